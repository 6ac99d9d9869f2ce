"""A judged figure and its interval, read from one launch's table (a
parsed run of netbench's benchmark: rows by column name).

A figure is named by a spec, the same in the checks, the job's
re-measurement and the record:

    {"figure": "latency"}                       smallest median time among
                                                messages under 64 bytes (seed
                                                000's definition, as the
                                                benchmark's @ latency_usec)
    {"figure": "peak", "column": "Mbps"}        the largest rate of the sweep
    {"figure": "at", "column": C, "bytes": N}   column C at message size N

Intervals: a time column's from the benchmark's `usec_lo`/`usec_hi` (the
order statistics around the median of its timed batches); a rate's from
its time's (a rate is bytes over time at one size); a stream's from its
runs' lowest and highest (`MBps_low`/`MBps_high`).  A row without them (an
older benchmark, another benchmark's table) gives a point.
"""

from .model import Estimate

LATENCY_BELOW_BYTES = 64
TIME_COLUMNS = ("usec",)
RATE_COLUMNS = ("Mbps", "MBps")


class NoFigure(ValueError):
    """The launch's table has no row for the figure."""


def row_estimate(row, column):
    """Estimate of `column` in one row."""
    value = row[column]
    if column in TIME_COLUMNS and "usec_lo" in row and "usec_hi" in row:
        return Estimate(value, row["usec_lo"], row["usec_hi"])
    if column in RATE_COLUMNS and "usec_lo" in row and row.get("usec"):
        # a rate is inversely proportional to its time at a fixed size
        lo = value * row["usec"] / row["usec_hi"] if row["usec_hi"] > 0 else 0.0
        hi = value * row["usec"] / row["usec_lo"] if row["usec_lo"] > 0 else value
        return Estimate(value, lo, hi)
    if column.startswith("MBps") and "MBps_low" in row and "MBps_high" in row:
        scale = value / row["MBps"] if row.get("MBps") else 1.0
        return Estimate(value, row["MBps_low"] * scale, row["MBps_high"] * scale)
    if column == "Mbps" and "MBps_low" in row and "MBps_high" in row:
        return Estimate(value, 8 * row["MBps_low"], 8 * row["MBps_high"])
    return Estimate.point(value)


def latency(rows, column="usec"):
    small = [r for r in rows if r.get("bytes", 0) < LATENCY_BELOW_BYTES and column in r]
    if not small:
        raise NoFigure("no message under 64 bytes")
    estimates = [row_estimate(r, column) for r in small]
    # the smallest median; its interval is the minimum's: a monotone
    # function of the sizes' own figures keeps their bounds' order
    return Estimate(min(e.value for e in estimates), min(e.lo for e in estimates),
                    min(e.hi for e in estimates))


def peak(rows, column="Mbps"):
    have = [r for r in rows if column in r]
    if not have:
        raise NoFigure(f"no {column} column")
    estimates = [row_estimate(r, column) for r in have]
    return Estimate(max(e.value for e in estimates), max(e.lo for e in estimates),
                    max(e.hi for e in estimates))


def at(rows, column, nbytes):
    row = next((r for r in rows if r.get("bytes") == nbytes and column in r), None)
    if row is None:
        raise NoFigure(f"no {column} at {nbytes:g} bytes")
    return row_estimate(row, column)


def estimate(rows, spec):
    """The Estimate of the figure `spec` names (see the module's docstring);
    NoFigure when the table lacks it."""
    kind = spec["figure"]
    if kind == "latency":
        return latency(rows, spec.get("column", "usec"))
    if kind == "peak":
        return peak(rows, spec.get("column", "Mbps"))
    if kind == "at":
        return at(rows, spec["column"], spec["bytes"])
    raise ValueError(f"unknown figure {kind!r}")


def estimates(runs, spec):
    """The Estimates of one figure over a list of launches' rows (runs
    without the figure, cut short, are left out)."""
    found = []
    for rows in runs:
        try:
            found.append(estimate(rows, spec))
        except NoFigure:
            continue
    return found

"""Recorded run reports with a cause's cost added to their curves, for the
tuning decision's and the diagnosis' tests (tests/data/tune/README.md)."""

import copy

TIME_COLUMNS = ("usec", "usec_lo", "usec_hi", "usec_min", "usec_max")
RATE_COLUMNS = ("Mbps", "MBps")


def records(report):
    return [tc["record"] for run in report["runs"] for tc in run["testcases"]
            if tc.get("record", {}).get("series")]


def rows_of(record):
    """Every row: the series' and every launch's."""
    return [r for s in record["series"] for r in s["rows"]] + [
        r for launches in (record.get("runs") or {}).values() for launch in launches
        for r in launch["rows"]]


def with_time(report, extra_us=0.0, at=lambda size: True, factor=1.0):
    """The report (a dict) as if every message at the chosen sizes took
    `factor` times as long plus `extra_us`; rates follow their times."""
    report = copy.deepcopy(report)
    for record in records(report):
        for row in rows_of(record):
            if not at(row["bytes"]):
                continue
            old = row["usec"]
            for c in TIME_COLUMNS:
                if c in row:
                    row[c] = row[c] * factor + extra_us
            for c in RATE_COLUMNS:
                if c in row:
                    row[c] *= old / row["usec"]
    return report

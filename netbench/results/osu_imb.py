"""Parsers of the OSU Micro-Benchmarks' and the Intel MPI Benchmarks' output,
every message size (ReFrame's hpctestlib keeps one size only), into the
curve rows netbench's reports draw: `bytes`, `usec`, `MBps` (10^6 bytes/s,
both tools' unit) and `Mbps`.

Where a tool reports only time or only rate, the other is derived from the
message size: a bandwidth test's `usec` is the time per message at that
rate, a latency test's `MBps` the size over the one-way time.
"""

import re

from . import record

OSU_TITLE = re.compile(r"^# OSU MPI(?:-\w+)? (.+?)(?: Test)?(?: v[\d.]+)?\s*$", re.M)
#: OSU test title -> what its first value column is
OSU_KINDS = {"Latency": "usec", "Bandwidth": "MBps", "Bi-Directional Bandwidth": "MBps",
             "Multiple Bandwidth / Message Rate": "MBps", "Broadcast Latency": "usec",
             "Multi Latency": "usec"}


#: the unit of each column of the rows below
COLUMN_UNITS = {"bytes": "B", "usec": "us", "MBps": "MB/s", "Mbps": "Mbit/s", "msg_rate": "1/s"}
#: the columns the report draws
DRAWN_COLUMNS = ("usec", "Mbps", "MBps")


class ParseError(ValueError):
    pass


def curve_row(nbytes, usec=None, MBps=None):
    if usec is None:
        usec = nbytes / MBps if MBps else 0.0
    if MBps is None:
        MBps = nbytes / usec if usec else 0.0
    return {"bytes": float(nbytes), "usec": float(usec), "MBps": float(MBps),
            "Mbps": float(MBps) * 8}


def series(name, rows):
    """Rows of this module's parsers as a series of a per-case record."""
    return record.make_series(name, rows, DRAWN_COLUMNS, COLUMN_UNITS)


def parse_osu(text):
    """(test title, rows) of one OSU benchmark's output."""
    title = OSU_TITLE.search(text)
    if not title:
        raise ParseError("no '# OSU MPI ... Test' title line")
    name = title.group(1).strip()
    kind = OSU_KINDS.get(name)
    if kind is None:
        raise ParseError(f"OSU test {name!r}: not a latency or bandwidth test")
    rows = []
    for line in text[title.end():].splitlines():
        fields = line.split()
        if len(fields) < 2 or not fields[0].isdigit():
            continue
        value = float(fields[1])
        extra = {"msg_rate": float(fields[2])} if name.startswith("Multiple") and \
            len(fields) > 2 else {}
        rows.append({**curve_row(int(fields[0]), **{kind: value}), **extra})
    if not rows:
        raise ParseError(f"OSU {name}: no result rows")
    return name, rows


def is_row(fields, columns):
    """Whether a line's fields are one row of the table: a number for each
    column.  The MPI library's own lines (its provenance switches) and
    another rank's, forwarded by the launcher whenever they come, fall
    among the rows and are passed over."""
    if len(fields) != len(columns):
        return False
    try:
        [float(f) for f in fields]
    except ValueError:
        return False
    return True


IMB_SECTION = re.compile(r"^# Benchmarking (\S+)\s*\n# #processes = (\d+)", re.M)


def parse_imb(text):
    """{(benchmark, processes): rows} of an IMB-MPI1 run; `usec` is t_avg
    where IMB reports min/max/avg (Sendrecv, Exchange), `MBps` IMB's
    Mbytes/sec (Sendrecv counts 2X bytes per call, Exchange 4X); lines
    among the rows that are no row (is_row) are passed over."""
    sections = list(IMB_SECTION.finditer(text))
    if not sections:
        raise ParseError("no '# Benchmarking ...' section")
    results = {}
    for i, sec in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(text)
        columns, rows = None, []
        for line in text[sec.end():end].splitlines():
            if line.strip().startswith("#bytes"):
                columns = line.split()
            elif columns and is_row(line.split(), columns):
                values = dict(zip(columns, map(float, line.split())))
                usec = values.get("t_avg[usec]", values.get("t[usec]"))
                rows.append(curve_row(int(values["#bytes"]), usec=usec,
                                      MBps=values.get("Mbytes/sec")))
        if not rows:
            raise ParseError(f"IMB {sec.group(1)}: no result rows")
        results[(sec.group(1), int(sec.group(2)))] = rows
    return results

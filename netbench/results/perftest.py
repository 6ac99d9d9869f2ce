"""perftest's output (linux-rdma/perftest: ib_write_bw, ib_send_bw, ...,
ib_send_lat, ib_write_lat, ...) as netbench's curve rows: the verbs layer
beneath the MPI (issue #34: the layers side by side).

A perftest run prints a block of settings, then one table: a header line
starting `#bytes` and one row per message size, closed by a line of
dashes.  The columns are named in the header:

    bandwidth  #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]
    latency    #bytes #iterations t_min[usec] t_max[usec] t_typical[usec]
               t_avg[usec] t_stdev[usec] 99% percentile[usec] 99.9% percentile[usec]
    -D (time)  #bytes #iterations t_avg[usec] tps average

Older releases print no MsgRate column; --report_gbits prints Gb/sec.
perftest's MB/sec is 2^20 bytes a second and its Gb/sec 10^9 bits a
second (print_report_bw in src/perftest_resources.c: format_factor
0x100000 or 125000000).  Lines between rows that are no row (perftest's
"Conflicting CPU frequency values detected" warnings) are passed over;
a server and a client writing one log (a loopback run) print the header
twice and the last row once more after the table: the first table is read.

Rows: `bytes`, `usec`, `MBps` (10^6 bytes/s), `Mbps` (10^6 bit/s), as
results/osu_imb.py's; a bandwidth table's `usec` is the time per message at
its average rate and it adds `msg_rate` (1/s); a latency table's `usec` is
t_typical (perftest's median), else t_avg, its `MBps` the size over it.
Pure: text in, rows out.
"""

import dataclasses
import re

from . import osu_imb

#: perftest's MB/sec in 10^6 bytes/s: it divides by 0x100000
MIB_IN_MB = 1.048576
#: perftest's Gb/sec in 10^6 bytes/s: 10^9 bits
GBIT_IN_MB = 125.0

#: a header's column names: `#bytes`, `BW average[MB/sec]`, `t_min[usec]`,
#: `99% percentile[usec]`, `MsgRate[Mpps]`, `tps average`
COLUMN = re.compile(r"#\w+|[\d.]+% percentile\[[^\]]*\]|BW \w+\[[^\]]*\]|\w+\[[^\]]*\]"
                    r"|tps average")
HEADER = re.compile(r"^\s*#bytes\s", re.M)
SEPARATOR = re.compile(r"^\s*-{10,}\s*$")
#: the test's title line, e.g. "RDMA_Write BW Test", "Send Latency Test"
TITLE = re.compile(r"^\s*(.+? (?:BW|Latency) Test)\s*$", re.M)
SETTING = re.compile(r"\b(Device|Link type|Connection type|Transport type)\s*:\s*([^\s:]+)")

#: bandwidth columns in the order a row's rate is read, and their scale to MBps
RATE_COLUMNS = {"BW average[MB/sec]": MIB_IN_MB, "BW average[Gb/sec]": GBIT_IN_MB}
PEAK_COLUMNS = {"BW peak[MB/sec]": MIB_IN_MB, "BW peak[Gb/sec]": GBIT_IN_MB}
#: latency columns, the first present is the row's one-way time
TIME_COLUMNS = ("t_typical[usec]", "t_avg[usec]")


class ParseError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Perftest:
    """One perftest run: what it was, where it ran, and its rows."""
    title: str           # "RDMA_Write BW Test", "" when the output has none
    kind: str            # bandwidth | latency
    settings: dict       # Device, Link type, Connection type, Transport type
    columns: list        # the header's column names
    rows: list           # curve rows (module doc)

    def rate_at(self, nbytes):
        """Mbit/s at a message size, None where the run has no such size."""
        return next((r["Mbps"] for r in self.rows if r["bytes"] == nbytes), None)

    @property
    def peak_mbps(self):
        return max((r["Mbps"] for r in self.rows), default=0.0)


def header_columns(line):
    columns = COLUMN.findall(line)
    if not columns or columns[0] != "#bytes":
        raise ParseError(f"not a perftest header: {line.strip()!r}")
    return columns


def table(text):
    """(columns, [values per row]) of the first table in `text`."""
    headers = list(HEADER.finditer(text))
    if not headers:
        raise ParseError("no '#bytes #iterations ...' header line")
    lines = text[headers[0].start():].splitlines()
    columns, rows = header_columns(lines[0]), []
    for line in lines[1:]:
        if HEADER.match(line) and not rows:
            columns = header_columns(line)      # a loopback log's second header
            continue
        if SEPARATOR.match(line) and rows:
            break
        fields = line.split()
        if len(fields) == len(columns) and all(is_number(f) for f in fields):
            rows.append([float(f) for f in fields])
    if not rows:
        raise ParseError(f"a header ({' '.join(columns)}) but no result rows")
    return columns, rows


def is_number(field):
    try:
        float(field)
    except ValueError:
        return False
    return True


def parse(text):
    """The Perftest of one perftest run's output (client or server side)."""
    columns, values = table(text)
    title = TITLE.search(text)
    settings = dict(SETTING.findall(text[:HEADER.search(text).start()]))
    rate = next((c for c in columns if c in RATE_COLUMNS), None)
    time = next((c for c in TIME_COLUMNS if c in columns), None)
    if rate:
        rows = [bandwidth_row(dict(zip(columns, v)), rate) for v in values]
        kind = "bandwidth"
    elif time:
        rows = [latency_row(dict(zip(columns, v)), time) for v in values]
        kind = "latency"
    else:
        raise ParseError(f"neither a bandwidth nor a latency table: {' '.join(columns)}")
    return Perftest(title.group(1).strip() if title else "", kind, settings, columns, rows)


def bandwidth_row(values, rate):
    row = osu_imb.curve_row(int(values["#bytes"]), MBps=values[rate] * RATE_COLUMNS[rate])
    peak = next((c for c in PEAK_COLUMNS if c in values), None)
    # perftest prints a peak of 0.00 where it did not measure one (-a, -D)
    if peak and values[peak] > 0:
        row["peak_Mbps"] = values[peak] * PEAK_COLUMNS[peak] * 8
    if "MsgRate[Mpps]" in values:
        row["msg_rate"] = values["MsgRate[Mpps]"] * 1e6
    return row


def latency_row(values, time):
    row = osu_imb.curve_row(int(values["#bytes"]), usec=values[time])
    for column in ("t_min[usec]", "t_max[usec]", "t_avg[usec]", "99% percentile[usec]",
                   "99.9% percentile[usec]"):
        if column in values and column != time:
            row[column_key(column)] = values[column]
    return row


def column_key(column):
    """`t_min[usec]` -> `t_min_usec`, `99.9% percentile[usec]` -> `p99_9_usec`."""
    name = column.split("[")[0].replace("% percentile", "").replace(".", "_")
    return (f"p{name}" if name[0].isdigit() else name) + "_usec"

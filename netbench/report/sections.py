"""What each section of the page draws, from the cases' records alone
(netbench/results/record.py): the series of each curve plot, the points
where a case says it was judged, the Hockney fits of ping-pong, MPI's loss
against raw TCP and the scaling lines.  Nothing here knows a check class,
a threshold key or a reference file, so a session re-rendered later shows
what judged it then.

Cases from run reports written before records are drawn from their legacy
`curve` (legacy_record), without reference points.
"""

import dataclasses
import re

from . import analysis
from ..results import record as results_record

#: the columns of the legacy curves (`curve`, `tcp_curve`) and their units
LEGACY_UNITS = {"bytes": "B", "usec": "us", "Mbps": "Mbit/s", "MBps": "MB/s"}


def legacy_section(tc):
    """The section of a case from before records: the section the check
    named (report_section), MPI-vs-TCP where it kept a raw TCP curve beside
    its MPI one, else its figures only."""
    if tc.get("tcp_curve"):
        return "mpi_vs_tcp"
    named = tc.get("report_section") or ""
    return named if named in results_record.SECTIONS else "figures_only"


def legacy_drawn_columns(tc):
    """{curve key: columns} the page draws from a case without a record."""
    return {"pingpong": {"curve": {"usec", "Mbps"}},
            "throughput": {"curve": {"MBps"}},
            "mpi_vs_tcp": {"curve": {"Mbps"}, "tcp_curve": {"Mbps"}}}.get(legacy_section(tc), {})


def legacy_record(tc):
    """The record of a case from a run report written before checks wrote
    one: its curves and labels, and no references (what judged it then is
    in its perfvalues, which the table shows)."""
    section = legacy_section(tc)
    series = [results_record.make_series(name, tc[key], tuple(LEGACY_UNITS)[1:], LEGACY_UNITS)
              for name, key in (("mpi", "curve"), ("tcp", "tcp_curve")) if tc.get(key)]
    label = _legacy_label(tc)
    group = ""
    if section in results_record.SCALING_SECTIONS and tc.get("pattern") in ("sendrecv",
                                                                           "exchange"):
        group = re.sub(r" \d+ ranks$", "", label)
    partition = tc.get("partition_info") or {}
    return {"version": results_record.VERSION, "section": section, "label": label,
            "group": group, "series": series, "references": {},
            "provenance": {"placement": tc.get("placement", ""),
                           "transport": tc.get("transport", ""),
                           "ranks": tc.get("ranks") or tc.get("num_tasks") or 0,
                           "interconnect": partition.get("interconnect", ""),
                           "line_rate_mbps": partition.get("line_rate_mbps")}}


def case_record(tc):
    """What the page draws of a case: its record (legacy_record for run
    reports written before records)."""
    return tc.get("record") or legacy_record(tc)


def _legacy_label(tc):
    parts = [tc.get("environ", "")]
    for attr in ("benchmark", "transport", "variant", "pattern"):
        if tc.get(attr):
            parts.append(str(tc[attr]))
    if tc.get("ranks"):
        parts.append(f"{tc['ranks']} ranks")
    return " ".join(parts)


@dataclasses.dataclass(frozen=True)
class CurvePlot:
    """A plot of one column against message size, drawn from every series
    of the cases of its sections that has that column."""
    sections: tuple
    column: str
    ylabel: str
    title: str
    logy: bool = True
    line_rates: bool = False


#: the page's curve plots by name (the taxonomy: results.record.SECTIONS)
CURVE_PLOTS = {
    "latency": CurvePlot(("pingpong",), "usec", "time, half round trip (us)",
                         "Ping-pong latency"),
    "bandwidth": CurvePlot(("pingpong",), "Mbps", "bandwidth (Mbit/s)", "Ping-pong bandwidth",
                           line_rates=True),
    "chain": CurvePlot(("throughput",), "MBps", "throughput per process (MB/s)",
                       "Sendrecv, Exchange, Bcast throughput"),
    "tcp_tuning": CurvePlot(("tcp_tuning",), "Mbps", "bandwidth (Mbit/s)",
                            "Raw TCP: socket buffers and parallel streams (seeds 000, 003)"),
    "mtu": CurvePlot(("mtu",), "Mbps", "bandwidth per process (Mbit/s)",
                     "Ping-pong and ring exchange per MTU (seed 004)", line_rates=True),
}


def _rows(series):
    """A series' rows with a message (size 0 has no place on a log axis)."""
    return [r for r in series["rows"] if r.get(series["x"]["column"], 0) > 0]


def _reference_label(citation):
    """`<source file>: <row>` of a recorded citation, short enough for a legend."""
    return f"{citation.split(',')[0]}: {citation.split('row ')[-1]}"


def _series_of(rec, column):
    """(legend suffix, series) of a record's series that have `column`."""
    found = [s for s in rec["series"] if column in results_record.y_columns(s) and _rows(s)]
    return [(f" {s['name']}" if len(rec["series"]) > 1 else "", s) for s in found]


#: the panel of raw TCP series: drawn in every MPI's panel as its baseline
RAW_TCP_PANEL = "raw TCP"


def panel_of(rec):
    """The small-multiples panel a record's curves go in: its MPI (family
    and where it came from), or raw TCP, which no MPI carries."""
    prov = rec["provenance"]
    if prov.get("transport") == "raw":
        return RAW_TCP_PANEL
    family = prov.get("mpi_family") or "MPI"
    return f"{family} ({prov['mpi_source']})" if prov.get("mpi_source") else family


def curve_plot_data(plot, records, tag=""):
    """(series, reference points) of one CurvePlot from (index, record) pairs.
    Each series is (label, xs, ys, style index, panel); the points are
    {(label, panel): (x, y)}, the figures each case recorded as judged by,
    where it said to draw them, in the panel of the case."""
    series, points = [], {}
    for i, rec in records:
        if rec["section"] not in plot.sections:
            continue
        panel = panel_of(rec)
        for suffix, s in _series_of(rec, plot.column):
            rows = _rows(s)
            series.append((tag + rec["label"] + suffix, [r[s["x"]["column"]] for r in rows],
                           [r[plot.column] for r in rows], i, panel))
        for ref in rec["references"].values():
            at = ref.get("at")
            if at and at["y"] == plot.column and ref.get("citation"):
                points[(_reference_label(ref["citation"]), panel)] = (at["bytes"], ref["value"])
    return series, points


def hockney_fits(records, tag=""):
    """Fit, protocol switch and dips of every ping-pong series."""
    fits = []
    for _, rec in records:
        if rec["section"] != "pingpong":
            continue
        for suffix, s in _series_of(rec, "usec"):
            rows = _rows(s)
            xs, times = [r["bytes"] for r in rows], [r["usec"] for r in rows]
            bandwidth = [r.get("Mbps", 0.0) for r in rows]
            fits.append({"label": tag + rec["label"] + suffix,
                         "fit": analysis.hockney_fit(xs, times),
                         "switch": analysis.protocol_switch(xs, times),
                         "dips": analysis.dips(xs, bandwidth)})
    return fits


def overhead_series(records, tag=""):
    """MPI against raw TCP at each size both measured, in two kinds: over a
    network transport, MPI's loss in % (seed 000, Figures 2 and 4); over
    shared memory, where MPI does not use TCP at all, the speed-up as a
    ratio.  Returns (losses, speedups), each [(label, sizes, values, i,
    panel)]."""
    losses, speedups = [], []
    for i, rec in records:
        if rec["section"] != "mpi_vs_tcp":
            continue
        mpi, tcp = (results_record.series_named(rec, n) for n in ("mpi", "tcp"))
        if not mpi or not tcp:
            continue
        mpi_bw = {r["bytes"]: r["Mbps"] for r in _rows(mpi) if "Mbps" in r}
        tcp_bw = {r["bytes"]: r["Mbps"] for r in _rows(tcp) if r.get("Mbps")}
        sizes = sorted(set(mpi_bw) & set(tcp_bw))
        if not sizes:
            continue
        label, panel = tag + rec["label"], panel_of(rec)
        if rec["provenance"].get("transport") == "shm":
            speedups.append((label, sizes, [mpi_bw[n] / tcp_bw[n] for n in sizes], i, panel))
        else:
            losses.append((label, sizes, [100 * (1 - mpi_bw[n] / tcp_bw[n]) for n in sizes],
                           i, panel))
    return losses, speedups


def scaling_points(records, tag=""):
    """{line: [(processes, peak throughput per process)]} of the cases that
    are points of the scaling plot (a group in a scaling section)."""
    lines = {}
    for _, rec in records:
        if rec["section"] not in results_record.SCALING_SECTIONS or not rec.get("group"):
            continue
        peaks = [r["MBps"] for s in rec["series"] for r in _rows(s) if "MBps" in r]
        ranks = rec["provenance"].get("ranks")
        if peaks and ranks:
            lines.setdefault(tag + rec["group"], []).append((ranks, max(peaks)))
    return lines


def line_rates(records):
    """The line rates of the partitions the cases ran on, as horizontal lines."""
    rates = {rec["provenance"].get("line_rate_mbps") for _, rec in records}
    return [(f"line rate {r:g} Mbit/s", r) for r in sorted(r for r in rates if r)]




#: the columns the container section draws, one panel each: (column, y label)
CONTAINER_PANELS = (("usec", "time, half round trip (us)"), ("Mbps", "bandwidth (Mbit/s)"))


def container_mpi(rec):
    """The MPI a container-section record compared: its label without the
    transport (`mpich shm` -> `mpich`), else its panel (MPI family)."""
    transport = rec["provenance"].get("transport", "")
    words = [w for w in rec["label"].split() if w != transport]
    return " ".join(words) or panel_of(rec)


def container_curves(records, tag=""):
    """{transport: [(mpi, side, xs, {column: ys})]} of the container
    section's records: each MPI's sweep natively and inside the image
    (record.CONTAINER_SERIES), by the transport it was forced through.
    A column a series lacks has no ys; rows at size 0 are left out."""
    by_transport = {}
    for _, rec in records:
        if rec["section"] != "container":
            continue
        transport = rec["provenance"].get("transport") or "unknown transport"
        mpi = tag + container_mpi(rec)
        for side in results_record.CONTAINER_SERIES:
            s = results_record.series_named(rec, side)
            if not s or not _rows(s):
                continue
            rows, columns = _rows(s), results_record.y_columns(s)
            by_transport.setdefault(transport, []).append(
                (mpi, side, [r[s["x"]["column"]] for r in rows],
                 {c: [r[c] for r in rows] for c, _ in CONTAINER_PANELS if c in columns}))
    return dict(sorted(by_transport.items()))

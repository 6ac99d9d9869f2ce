"""HTML reports from ReFrame's JSON run reports.

The page is drawn from each test case's record (netbench/results/record.py,
written by the checks): its section, series and the references it was
judged by.  Nothing here knows a check class, a threshold key or a
reference file, so a session re-rendered later shows what judged it then.
Cases from run reports written before records are drawn from their legacy
`curve` (legacy_record), without reference points.

A session folder `reports/YYYYMMDDTHHMMSS-<8 hex of the uuid>/` holds
`run-report.json` (ReFrame's), `provenance.json` (this machine at the end of
the session) and `index.html` (verdicts, curves, fits, provenance, history).
`reports/latest` points at the newest session; `reports/index.html` lists
every session folder on disk.  Every file is written to a temporary name and
renamed into place, so a reader never sees half a page.

Inputs are validated where they are read (JSON Schema, `datafiles`): a bad
run report, provenance.json or output folder is a DataError, one line
naming the file and key.  netbench runs as root on shared machines, so
folder names are built from parsed values, never taken from input, and
nothing is removed that netbench did not write (no recursive deletes).
"""

import atexit
import contextlib
import dataclasses
import datetime
import fcntl
import functools
import glob
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jinja2

from . import analysis, datafiles, paths
from .datafiles import DataError
from .results import record as results_record

RAW_REPORTS = paths.STATE / "reports"
TEMPLATES = paths.TEMPLATES
TUNING_STATE = paths.STATE / "tuning-state.json"


# ---- loading ------------------------------------------------------------

_NUMBER = {"type": "number"}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}


def curve_schema(*columns):
    """Rows of a legacy curve (a case's `curve`, `tcp_curve` before records):
    `bytes` and the `columns` a section draws, numbers where present."""
    return {"type": ["array", "null"], "items": {
        "type": "object", "required": ["bytes", *columns],
        "properties": {c: _NUMBER for c in ("bytes", "usec", "Mbps", "MBps")}}}


_CURVE = curve_schema()

#: an MPI as discovery describes it (a case's mpi_info, provenance's mpis)
_MPI_INFO = {"type": "object", "properties": {
    "transports": {"type": ["object", "null"],
                   "additionalProperties": {"type": ["object", "null"]}}}}

#: ReFrame's perfvalues entry: [value, reference, lower, upper, unit, result]
_PERFVALUE = {"type": "array", "minItems": 6, "prefixItems": [
    _NUMBER_OR_NULL, _NUMBER_OR_NULL, _NUMBER_OR_NULL, _NUMBER_OR_NULL,
    _STRING_OR_NULL, _STRING_OR_NULL]}

_TESTCASE = {"type": "object", "properties": {
    **{key: {"type": "string"} for key in (
        "name", "display_name", "unique_name", "system", "partition", "environ",
        "result", "report_section", "transport")},
    "fail_reason": _STRING_OR_NULL,
    "ranks": {"type": ["integer", "null"]},
    "perfvalues": {"type": ["object", "null"], "additionalProperties": _PERFVALUE},
    "curve": _CURVE, "tcp_curve": _CURVE,
    # checked by results.record.check (load_session)
    "record": {"type": "object"},
    "partition_info": {"type": ["object", "null"], "properties": {
        "interconnect": {"type": "string"}, "line_rate_mbps": _NUMBER_OR_NULL}},
    "mpi_info": {"anyOf": [_MPI_INFO, {"type": "null"}]},
}}

#: the parts of ReFrame's run report (data_version 4.x) netbench reads
RUN_REPORT_SCHEMA = {"type": "object", "required": ["session_info", "runs"], "properties": {
    "session_info": {"type": "object", "required": ["time_start", "time_start_unix", "uuid"],
                     "properties": {
        "data_version": {"type": "string", "pattern": r"^4\.",
                         "description": "expected ReFrame's run report format 4.x"},
        "time_start": {"type": "string", "pattern": r"^[0-9]{8}T[0-9]{6}[+-][0-9]{4}$",
                       "description": "expected ReFrame's start time YYYYMMDDTHHMMSS+ZZZZ"},
        "time_start_unix": _NUMBER,
        "uuid": {"type": "string", "pattern": "^[0-9a-fA-F]{8}[-0-9a-fA-F]*$",
                 "description": "expected ReFrame's session uuid (hex digits and dashes)"},
    }},
    "runs": {"type": "array", "items": {"type": "object", "properties": {
        "testcases": {"type": "array", "items": _TESTCASE}}}},
}}

#: provenance.json as collect_provenance writes it (what the page shows)
PROVENANCE_SCHEMA = {"type": "object", "properties": {
    "cpus": {"type": ["integer", "null"]},
    "mpis": {"type": "object", "additionalProperties": _MPI_INFO},
    "tuning_state": {"type": ["object", "null"]},
}}

#: a session folder's name: its start time and the first 8 hex digits of its uuid
SESSION_NAME = re.compile(r"[0-9]{8}T[0-9]{6}-[0-9a-f]{8}")
START_FORMAT = "%Y%m%dT%H%M%S%z"


def session_folder_name(info, path):
    """`YYYYMMDDTHHMMSS-<8 hex>` built from the parsed start time and uuid,
    never from their raw text: the name becomes a folder of reports/."""
    try:
        start = datetime.datetime.strptime(info["time_start"], START_FORMAT)
    except (TypeError, ValueError) as err:
        raise DataError(path, "session_info.time_start",
                        f"not a date ({err}): {info['time_start']!r}") from err
    prefix = str(info["uuid"])[:8].lower()
    if not re.fullmatch("[0-9a-f]{8}", prefix):
        raise DataError(path, "session_info.uuid", f"expected ReFrame's session uuid, got "
                                                   f"{info['uuid']!r}")
    return f"{start:%Y%m%dT%H%M%S}-{prefix}"


@dataclasses.dataclass
class Session:
    report: dict
    provenance: dict
    source: str

    @property
    def info(self):
        return self.report["session_info"]

    @property
    def uuid(self):
        return self.info["uuid"]

    @property
    def name(self):
        return session_folder_name(self.info, self.source)

    @property
    def started(self):
        return self.info["time_start_unix"]

    @functools.cached_property
    def testcases(self):
        """Every case, the last run of each (ReFrame reruns failed ones)."""
        cases = {}
        for run in self.report.get("runs", []):
            for tc in run.get("testcases", []):
                cases[(tc.get("unique_name"), tc.get("system"), tc.get("partition"),
                       tc.get("environ"))] = tc
        return list(cases.values())

    @property
    def systems(self):
        return sorted({tc.get("system", "") for tc in self.testcases})


def load_session(path):
    """A run report and the provenance.json beside it, validated where they
    are read: DataError naming the file and key of the first problem."""
    path = Path(path)
    report = datafiles.load_json(path)
    datafiles.validate(report, RUN_REPORT_SCHEMA, path)
    session_folder_name(report["session_info"], path)     # a real date
    check_records(report, path)
    prov_file = path.parent / "provenance.json"
    provenance = {}
    if os.path.lexists(prov_file):
        provenance = datafiles.validate(datafiles.load_json(prov_file), PROVENANCE_SCHEMA,
                                        prov_file)
    return Session(report, provenance, str(path))


def check_records(report, path):
    """Every case's record holds to results.record.SCHEMA; a case from a run
    report written before checks wrote records has, in its legacy curves,
    the columns its section draws (legacy_record)."""
    for i, run in enumerate(report["runs"]):
        for j, tc in enumerate(run.get("testcases", [])):
            where = ("runs", i, "testcases", j)
            if tc.get("record"):
                results_record.check(tc["record"], path, (*where, "record"))
                continue
            for key, columns in legacy_drawn_columns(tc).items():
                datafiles.validate(tc.get(key), curve_schema(*sorted(columns)), path,
                                   (*where, key))


def published_sessions(reports_dir=paths.REPORTS):
    """The sessions on disk, oldest first: real folders named like a session
    whose run report loads and names that folder.  Anything else in
    reports/ (latest, tune-demo/, a half-published staging folder, a broken
    session) is not a session and is left alone."""
    found = []
    for folder in Path(reports_dir).iterdir() if Path(reports_dir).is_dir() else ():
        if not SESSION_NAME.fullmatch(folder.name) or folder.is_symlink() \
                or not folder.is_dir():
            continue
        try:
            session = load_session(folder / "run-report.json")
        except DataError:
            continue
        if session.name == folder.name:
            found.append(session)
    return sorted(found, key=lambda s: (s.started, s.name))


# ---- provenance ----------------------------------------------------------

def _read(path, default=""):
    try:
        return Path(path).read_text()
    except OSError:
        return default


def _git_commit():
    try:
        # --no-optional-locks: read only, never take .git/index.lock from
        # whoever else works in this checkout
        out = subprocess.run(["git", "--no-optional-locks", "-C", str(paths.REPO), "describe",
                              "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def collect_provenance(report):
    cpu = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.M)
    mpis = {}
    for tc in Session(report, {}, "").testcases:
        info = tc.get("mpi_info") or {}
        if info:
            mpis[tc.get("environ", "")] = info
    lock = paths.REPO / "spack.lock"
    tuning = datafiles.load_json(TUNING_STATE) if os.path.lexists(TUNING_STATE) else None
    return {
        "host": platform.node(),
        "kernel": f"{platform.system()} {platform.release()}",
        "cpu": cpu.group(1).strip() if cpu else platform.processor(),
        "cpus": os.cpu_count(),
        "reframe": report["session_info"].get("version", ""),
        "netbench_commit": _git_commit(),
        "python": platform.python_version(),
        "mpis": mpis,
        "tuning_state": tuning,
        "spack_lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists()
        else None,
    }


# ---- what the page shows ------------------------------------------------

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


def case_label(tc):
    """Display name without ReFrame's hash suffix: stable across sessions."""
    return re.sub(r"\s+/[0-9a-f]{8}$", "", tc.get("display_name", tc.get("name", "")))


def headline_key(tc, var):
    return f"{case_label(tc)} | {tc.get('environ')} | {tc.get('system')}:{tc.get('partition')}" \
           f" | {var}"


def bound(ref, frac):
    if frac is None or ref in (None, 0):
        return None
    return ref * (1 + frac)


def case_rows(tc):
    """Summary-table rows of one test case: one per performance variable,
    or one with the verdict alone."""
    record = case_record(tc)
    base = {"partition": f"{tc.get('system')}:{tc.get('partition')}",
            "environ": tc.get("environ"), "case": case_label(tc),
            "placement": record["provenance"].get("placement", ""),
            "result": tc.get("result", "?"),
            "reason": tc.get("fail_reason") or ""}
    perf = tc.get("perfvalues") or {}
    if not perf:
        return [dict(base, variable="", value=None, unit="", reference=None, lower=None,
                     upper=None, verdict=tc.get("result", "?"), key=None, citation="")]
    rows = []
    for key, entry in perf.items():
        value, ref, lower, upper, unit, result = entry[:6]     # ReFrame may add more
        var = key.split(":")[-1]
        has_ref = ref not in (None, 0) and (lower is not None or upper is not None)
        rows.append(dict(base, variable=var, value=value, unit=unit,
                         reference=ref if has_ref else None, lower=bound(ref, lower),
                         upper=bound(ref, upper), verdict=result if has_ref else "no reference",
                         key=headline_key(tc, var),
                         # the documented figure, as the case recorded it
                         citation=(record["references"].get(var) or {}).get("citation") or ""))
    return rows


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


def curve_plot_data(plot, records, tag=""):
    """(series, reference points) of one CurvePlot from (index, record) pairs:
    the points are the figures each case recorded as judged by, where it
    said to draw them."""
    series, points = [], {}
    for i, rec in records:
        if rec["section"] not in plot.sections:
            continue
        for suffix, s in _series_of(rec, plot.column):
            rows = _rows(s)
            series.append((tag + rec["label"] + suffix, [r[s["x"]["column"]] for r in rows],
                           [r[plot.column] for r in rows], i))
        for ref in rec["references"].values():
            at = ref.get("at")
            if at and at["y"] == plot.column and ref.get("citation"):
                points[_reference_label(ref["citation"])] = (at["bytes"], ref["value"])
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
    """MPI's bandwidth loss against raw TCP at each size both measured."""
    out = []
    for i, rec in records:
        if rec["section"] != "mpi_vs_tcp":
            continue
        mpi, tcp = (results_record.series_named(rec, n) for n in ("mpi", "tcp"))
        if not mpi or not tcp:
            continue
        mpi_bw = {r["bytes"]: r["Mbps"] for r in _rows(mpi) if "Mbps" in r}
        tcp_bw = {r["bytes"]: r["Mbps"] for r in _rows(tcp) if r.get("Mbps")}
        sizes = sorted(set(mpi_bw) & set(tcp_bw))
        if sizes:
            out.append((tag + rec["label"], sizes,
                        [100 * (1 - mpi_bw[n] / tcp_bw[n]) for n in sizes], i))
    return out


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


def _line_rates(records):
    rates = {rec["provenance"].get("line_rate_mbps") for _, rec in records}
    return [(f"line rate {r:g} Mbit/s", r) for r in sorted(r for r in rates if r)]


def build_sections(sessions):
    """The page's plots, from the cases' records alone, for one session or
    overlaid for several; and the Hockney fits."""
    from . import plots   # matplotlib: loaded only when a page is drawn
    multi = len(sessions) > 1
    curves = {name: ([], {}) for name in CURVE_PLOTS}
    fits, overhead, scaling, every_record = [], [], [], []
    for s in sessions:
        tag = f"[{s.name}] " if multi else ""
        records = [(i, case_record(tc)) for i, tc in enumerate(s.testcases)]
        every_record += records
        for name, plot in CURVE_PLOTS.items():
            series, points = curve_plot_data(plot, records, tag)
            curves[name][0].extend(series)
            curves[name][1].update(points)
        fits += hockney_fits(records, tag)
        overhead += overhead_series(records, tag)
        scaling += [(line, [x for x, _ in sorted(p)], [y for _, y in sorted(p)])
                    for line, p in scaling_points(records, tag).items()]
    svg = {}
    for name, (series, points) in curves.items():
        plot = CURVE_PLOTS[name]
        if series:
            svg[name] = plots.curve_plot(
                series, "message size (bytes)", plot.ylabel, plot.title, logy=plot.logy,
                references=[(label, *xy) for label, xy in points.items()],
                hlines=_line_rates(every_record) if plot.line_rates else ())
    if overhead:
        svg["overhead"] = plots.curve_plot(overhead, "message size (bytes)",
                                           "MPI loss against raw TCP (%)",
                                           "MPI vs TCP overhead (seed 000, Figures 2 and 4)",
                                           logy=False)
    if scaling:
        svg["scaling"] = plots.scaling_plot(scaling, "Throughput vs processes "
                                                     "(seed 002, Figures 6-9)")
    return svg, fits


def history_for(session, earlier):
    """{headline key: {"values": [...], "change": %}} against the earlier
    sessions on the same systems, oldest first."""
    systems = set(session.systems)
    older = [s for s in earlier if s.started < session.started and set(s.systems) & systems]
    past = {}     # headline key -> values, oldest first, read once per session
    for old in older:
        for otc in old.testcases:
            for orow in case_rows(otc):
                if orow["key"] is not None and orow["value"] is not None:
                    past.setdefault(orow["key"], []).append(orow["value"])
    history = {}
    for tc in session.testcases:
        for row in case_rows(tc):
            if row["key"] is None or row["value"] is None:
                continue
            values = past.get(row["key"], [])
            if values:
                prev = values[-1]
                history[row["key"]] = {
                    "values": values + [row["value"]],
                    "change": 100 * (row["value"] - prev) / prev if prev else None,
                }
    return history


def sparkline(values, width=90, height=18):
    """Points of an SVG polyline for a small trend line."""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1
    step = width / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{height - 2 - (v - lo) / span * (height - 4):.1f}"
                    for i, v in enumerate(values))


def comparison_rows(sessions):
    """One row per headline figure present in any session: its value in
    each, and the change from the first session to the last."""
    table = {}
    for i, s in enumerate(sessions):
        for tc in s.testcases:
            for row in case_rows(tc):
                if row["key"] and row["value"] is not None:
                    table.setdefault(row["key"], {"unit": row["unit"], "values": {}})
                    table[row["key"]]["values"][i] = row["value"]
    rows = []
    for key, entry in sorted(table.items()):
        vals = entry["values"]
        first, last = vals.get(0), vals.get(len(sessions) - 1)
        change = 100 * (last - first) / first if first and last is not None else None
        rows.append({"key": key, "unit": entry["unit"],
                     "values": [vals.get(i) for i in range(len(sessions))], "change": change})
    return rows


# ---- rendering --------------------------------------------------------------

def environment():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["num"] = lambda v, digits=4: "" if v is None else f"{v:.{digits}g}"
    env.filters["sparkline"] = sparkline
    return env


def render_report(sessions, earlier=()):
    """The HTML page for one session (with history from `earlier`) or a
    comparison of several."""
    svg, fits = build_sections(sessions)
    rows = [r for s in sessions for tc in s.testcases for r in case_rows(tc)]
    counts = {}
    for s in sessions:
        for tc in s.testcases:
            counts[tc.get("result", "?")] = counts.get(tc.get("result", "?"), 0) + 1
    return environment().get_template("report.html.j2").render(
        sessions=sessions, rows=rows, counts=counts, svg=svg, fits=fits,
        history=history_for(sessions[-1], earlier) if len(sessions) == 1 else {},
        comparison=comparison_rows(sessions) if len(sessions) > 1 else [],
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def render_index(sessions):
    return environment().get_template("index.html.j2").render(
        sessions=sorted(sessions, key=lambda s: s.started, reverse=True))


# ---- writing ----------------------------------------------------------------

#: the files netbench writes into a session folder: all it ever removes there
SESSION_FILES = ("run-report.json", "provenance.json", "index.html")


def atomic_write(path, text):
    """Write to a temporary name beside `path`, then rename into place."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def reports_lock(reports_dir):
    """Publishers of one reports/ take turns (flock on reports/.lock, which
    works on NFS too).  The file stays: unlinking it would let the next two
    publishers lock two different files."""
    fd = os.open(Path(reports_dir) / ".lock",
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)            # releases the lock


def own_session_folder(folder):
    """True for a real folder holding a run report and nothing but files
    netbench writes into a session: one netbench may replace."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return False
    with os.scandir(folder) as entries:
        files = {e.name: e.is_file(follow_symlinks=False) for e in entries}
    return files.get("run-report.json", False) and all(
        is_file and name in SESSION_FILES for name, is_file in files.items())


def remove_session_files(folder):
    """Remove netbench's files from `folder`, then the folder, which fails
    (and stays) if anything else is in it: never a recursive delete."""
    for name in SESSION_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(Path(folder) / name)
    os.rmdir(folder)


def stage_session(reports_dir, raw_report, provenance, page):
    """The session's files in a new hidden folder of reports/, ready to be
    renamed into place."""
    staging = Path(tempfile.mkdtemp(dir=reports_dir, prefix=".session-"))
    try:
        shutil.copyfile(raw_report, staging / "run-report.json")
        (staging / "provenance.json").write_text(json.dumps(provenance, indent=2))
        (staging / "index.html").write_text(page)
        os.chmod(staging, 0o755)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_session_files(staging)
        raise
    return staging


def place_session(reports_dir, staging, name):
    """Rename `staging` to reports/<name>.  An earlier publication of the
    same session there is replaced if netbench wrote it (own_session_folder);
    anything else of that name is refused and kept.  Under reports_lock."""
    final = Path(reports_dir) / name
    replaced = None
    if os.path.lexists(final):
        if not own_session_folder(final):
            raise DataError(final, None, "exists and holds more than the files netbench "
                                         "writes into a session: not replaced")
        replaced = Path(reports_dir) / f".replaced-{name}-{secrets.token_hex(4)}"
        os.rename(final, replaced)
    try:
        os.rename(staging, final)
    except BaseException:
        if replaced:
            os.rename(replaced, final)
        raise
    if replaced:
        remove_session_files(replaced)
    return final


def check_latest(link):
    """`reports/latest` is netbench's symlink, or a copy of a session from an
    older netbench (own_session_folder); anything else is not replaced."""
    if os.path.lexists(link) and not link.is_symlink() and not own_session_folder(link):
        raise DataError(link, None, "exists and is not the symlink netbench keeps there: "
                                    "not replaced (move it away)")


def point_latest(reports_dir, target):
    """Swap `reports/latest` to the session folder `target` in one rename."""
    link = Path(reports_dir) / "latest"
    check_latest(link)
    if os.path.lexists(link) and not link.is_symlink():
        remove_session_files(link)           # an older netbench's copy
    tmp = Path(reports_dir) / f".latest.{os.getpid()}.{secrets.token_hex(4)}"
    tmp.symlink_to(target)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink()
        raise


def update_index_and_latest(reports_dir):
    """The index lists the session folders on disk, and `latest` points at
    the one that started last: publishers finishing in any order agree, and
    `latest` never moves back.  Under reports_lock."""
    sessions = published_sessions(reports_dir)
    if sessions:
        point_latest(reports_dir, sessions[-1].name)
    atomic_write(Path(reports_dir) / "index.html", render_index(sessions))


def publish(raw_report, reports_dir=paths.REPORTS):
    """Make `raw_report` a published session: reports/<name>/ with the run
    report, provenance and page, then the index and `latest`.  Returns the
    session folder.

    <name> is `YYYYMMDDTHHMMSS-<8 hex>`, built from the parsed start time
    and uuid; a report that does not validate is refused (DataError, one
    line) before anything is written.

    The same session published again replaces its folder, but only one
    netbench wrote: a real folder holding run-report.json and nothing but
    run-report.json, provenance.json and index.html.  Anything else of that
    name, or a `latest` that is not netbench's symlink, is refused with one
    line and nothing changes.  Apart from that replaced folder and the
    `latest` symlink, publish removes only its own temporary files.

    Concurrent publishers take turns (reports/.lock) from the rename on:
    the index lists the session folders on disk, and `latest` moves only
    forward, to the session that started last.
    """
    reports_dir = Path(reports_dir)
    session = load_session(raw_report)
    name = session.name
    try:
        reports_dir.mkdir(exist_ok=True)        # its parent must exist: no tree from a typo
        session.provenance = collect_provenance(session.report)
        # the page is drawn outside the lock: matplotlib takes seconds
        earlier = [s for s in published_sessions(reports_dir) if s.name != name]
        staging = stage_session(reports_dir, raw_report, session.provenance,
                                render_report([session], earlier))
        try:
            with reports_lock(reports_dir):
                check_latest(reports_dir / "latest")
                final = place_session(reports_dir, staging, name)
                staging = None
                update_index_and_latest(reports_dir)
        finally:
            if staging is not None:
                with contextlib.suppress(OSError):
                    remove_session_files(staging)
    except OSError as err:
        raise DataError(err.filename or reports_dir, None,
                        f"cannot publish {name}: {err.strerror}") from err
    return final


def check_output_folder(outdir):
    """`-o DIR` is an existing folder, or a new one in an existing folder:
    a typo makes no tree of folders."""
    if outdir.is_dir():
        return
    if os.path.lexists(outdir):
        raise DataError(outdir, "--output", "exists and is not a folder")
    if not outdir.parent.is_dir():
        raise DataError(outdir, "--output", f"no folder {outdir.parent} to create it in")


def write_report(run_reports, outdir):
    """`netbench report`: one session's page, or a comparison of several, as
    DIR/index.html."""
    sessions = sorted((load_session(p) for p in run_reports), key=lambda s: s.started)
    outdir = Path(outdir)
    check_output_folder(outdir)
    earlier = published_sessions() if len(sessions) == 1 else []
    page = render_report(sessions, earlier)
    created = False
    try:
        if not outdir.is_dir():
            outdir.mkdir()
            created = True
        atomic_write(outdir / "index.html", page)
    except OSError as err:
        if created:
            with contextlib.suppress(OSError):
                outdir.rmdir()
        raise DataError(outdir, "--output", f"cannot write: {err.strerror}") from err
    return outdir / "index.html"


# ---- after every ReFrame session -------------------------------------------

def register_after_session():
    """Publish the session's report when the ReFrame process exits (ReFrame
    has no post-session hook; its run report is written just before exit).
    Registered by the netbench configuration, so a plain `reframe -c
    reframe_checks -r` updates the reports too."""
    start = time.time()
    if getattr(register_after_session, "registered", False):
        return
    register_after_session.registered = True
    atexit.register(_after_session, start)


def _after_session(start):
    fresh = [p for p in glob.glob(str(RAW_REPORTS / "run-report-*.json"))
             if os.path.getmtime(p) >= start]
    if not fresh or "--dry-run" in sys.argv:
        return            # listing, --show-config, dry runs: nothing ran
    # a fresh interpreter: ReFrame's, at exit, is half torn down
    proc = subprocess.run([sys.executable, "-m", "netbench.cli", "publish",
                           max(fresh, key=os.path.getmtime)], capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:   # the run's own exit code stands; say why loudly
        detail = proc.stderr.strip().splitlines()
        print(f"netbench: ERROR: the HTML report was not written: "
              f"{detail[-1] if detail else proc.returncode}", file=sys.stderr)

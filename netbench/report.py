"""HTML reports from ReFrame's JSON run reports.

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

from . import analysis, datafiles, paths, references
from .datafiles import DataError

RAW_REPORTS = paths.STATE / "reports"
TEMPLATES = paths.TEMPLATES
TUNING_STATE = paths.STATE / "tuning-state.json"


# ---- loading ------------------------------------------------------------

_NUMBER = {"type": "number"}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}


def curve_schema(*columns):
    """Rows of a curve as netbench's checks write it (checklib, osu_imb):
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
    check_drawn_curves(report, path)
    prov_file = path.parent / "provenance.json"
    provenance = {}
    if os.path.lexists(prov_file):
        provenance = datafiles.validate(datafiles.load_json(prov_file), PROVENANCE_SCHEMA,
                                        prov_file)
    return Session(report, provenance, str(path))


def drawn_columns(tc):
    """{curve key: columns} the page draws from a case (build_sections)."""
    drawn = {"pingpong": {"curve": {"usec", "Mbps"}},
             "throughput": {"curve": {"MBps"}}}.get(section(tc), {})
    if family(tc) == "MpiVsTcp":
        drawn = {"curve": drawn.get("curve", set()) | {"Mbps"}, "tcp_curve": {"Mbps"}}
    return drawn


def check_drawn_curves(report, path):
    """The curves a section draws have its columns in every row (a TCP
    stream sweep, drawn by no section, has no `usec`)."""
    for i, run in enumerate(report["runs"]):
        for j, tc in enumerate(run.get("testcases", [])):
            for key, columns in drawn_columns(tc).items():
                datafiles.validate(tc.get(key), curve_schema(*sorted(columns)), path,
                                   ("runs", i, "testcases", j, key))


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

def family(tc):
    return tc.get("display_name", tc.get("name", "")).split(" ")[0]


#: sections of reports written before checks named theirs (report_section)
FAMILY_SECTIONS = {"PingPong": "pingpong", "Throughput": "throughput"}


def section(tc):
    """The report section that draws a case's curve: pingpong, throughput,
    or "" (figures only)."""
    return tc.get("report_section") or FAMILY_SECTIONS.get(family(tc), "")


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
    base = {"partition": f"{tc.get('system')}:{tc.get('partition')}",
            "environ": tc.get("environ"), "case": case_label(tc),
            "placement": tc.get("placement", ""), "result": tc.get("result", "?"),
            "reason": tc.get("fail_reason") or ""}
    perf = tc.get("perfvalues") or {}
    if not perf:
        return [dict(base, variable="", value=None, unit="", reference=None, lower=None,
                     upper=None, verdict=tc.get("result", "?"), key=None)]
    rows = []
    for key, entry in perf.items():
        value, ref, lower, upper, unit, result = entry[:6]     # ReFrame may add more
        var = key.split(":")[-1]
        has_ref = ref not in (None, 0) and (lower is not None or upper is not None)
        rows.append(dict(base, variable=var, value=value, unit=unit,
                         reference=ref if has_ref else None, lower=bound(ref, lower),
                         upper=bound(ref, upper), verdict=result if has_ref else "no reference",
                         key=headline_key(tc, var)))
    return rows


def _series_label(tc):
    parts = [tc.get("environ", "")]
    for attr in ("benchmark", "transport", "variant", "pattern"):
        if tc.get(attr):
            parts.append(str(tc[attr]))
    if tc.get("ranks"):
        parts.append(f"{tc['ranks']} ranks")
    return " ".join(parts)


def _curve(tc, key="curve"):
    return [r for r in (tc.get(key) or []) if r.get("bytes", 0) > 0]


def _reference_points(cases):
    """Documented points for the curves: each case's thresholds' figures."""
    lat, bw = {}, {}
    for tc in cases:
        interconnect = (tc.get("partition_info") or {}).get("interconnect", "")
        for var, th in references.thresholds_for(interconnect, "pingpong",
                                                 tc.get("transport", "")).items():
            label = f"{th.figure.citation.split(',')[0]}: {th.figure.citation.split('row ')[-1]}"
            if var == "latency":
                lat[label] = (1, th.figure.value)
            elif var == "peak_bw":
                size_key = th.figure.key.rsplit("/", 1)[0] + "/message_size_bits"
                size = references.load_figures().get(size_key)
                if size:
                    bw[label] = (size.value, th.figure.value)
    return lat, bw


def _line_rates(cases):
    rates = {(tc.get("partition_info") or {}).get("line_rate_mbps") for tc in cases}
    return [(f"line rate {r:g} Mbit/s", r) for r in sorted(r for r in rates if r)]


def pingpong_section(cases, session_tag=""):
    lat_series, bw_series, fits = [], [], []
    for i, tc in enumerate(cases):
        rows = _curve(tc)
        if not rows:
            continue
        label = session_tag + _series_label(tc)
        xs = [r["bytes"] for r in rows]
        lat_series.append((label, xs, [r["usec"] for r in rows], i))
        bw_series.append((label, xs, [r["Mbps"] for r in rows], i))
        fit = analysis.hockney_fit(xs, [r["usec"] for r in rows])
        switch = analysis.protocol_switch(xs, [r["usec"] for r in rows])
        fits.append({"label": label, "fit": fit, "switch": switch,
                     "dips": analysis.dips(xs, [r["Mbps"] for r in rows])})
    return lat_series, bw_series, fits


def build_sections(sessions):
    """Curves per check family, for one session or overlaid for several."""
    from . import plots   # matplotlib: loaded only when a page is drawn
    multi = len(sessions) > 1
    lat, bw, fits, overhead, scaling, chain = [], [], [], [], [], []
    all_cases = [tc for s in sessions for tc in s.testcases]
    for s in sessions:
        tag = f"[{s.name}] " if multi else ""
        cases = [tc for tc in s.testcases if section(tc) == "pingpong"]
        l_, b_, f_ = pingpong_section(cases, tag)
        lat += l_
        bw += b_
        fits += f_
        for i, tc in enumerate(tc for tc in s.testcases if family(tc) == "MpiVsTcp"):
            mpi = {r["bytes"]: r["Mbps"] for r in _curve(tc)}
            tcp = {r["bytes"]: r["Mbps"] for r in _curve(tc, "tcp_curve")}
            sizes = sorted(set(mpi) & set(tcp))
            if sizes:
                overhead.append((tag + _series_label(tc), sizes,
                                 [100 * (1 - mpi[n] / tcp[n]) for n in sizes], i))
        points = {}
        for tc in s.testcases:
            if section(tc) != "throughput":
                continue
            rows = _curve(tc)
            if rows:
                chain.append((tag + _series_label(tc), [r["bytes"] for r in rows],
                              [r["MBps"] for r in rows], len(chain)))
            peak = (tc.get("perfvalues") or {})
            peak = next((v[0] for k, v in peak.items() if k.endswith(":peak_throughput")), None)
            if peak is not None and tc.get("pattern") in ("sendrecv", "exchange"):
                tool = "" if family(tc) == "Throughput" else f"{family(tc)} "
                key = (f"{tag}{tool}{tc.get('environ')} {tc.get('pattern')} "
                       f"{tc.get('transport', '')}")
                points.setdefault(key, []).append((tc.get("ranks", 0), peak))
        scaling += [(k, [x for x, _ in sorted(v)], [y for _, y in sorted(v)])
                    for k, v in points.items()]
    lat_refs, bw_refs = _reference_points(all_cases)
    svg = {}
    if lat:
        svg["latency"] = plots.curve_plot(lat, "message size (bytes)",
                                          "time, half round trip (us)", "Ping-pong latency",
                                          references=[(k, *v) for k, v in lat_refs.items()])
        svg["bandwidth"] = plots.curve_plot(bw, "message size (bytes)", "bandwidth (Mbit/s)",
                                            "Ping-pong bandwidth",
                                            references=[(k, *v) for k, v in bw_refs.items()],
                                            hlines=_line_rates(all_cases))
    if overhead:
        svg["overhead"] = plots.curve_plot(overhead, "message size (bytes)",
                                           "MPI loss against raw TCP (%)",
                                           "MPI vs TCP overhead (seed 000, Figures 2 and 4)",
                                           logy=False)
    if chain:
        svg["chain"] = plots.curve_plot(chain, "message size (bytes)",
                                        "throughput per process (MB/s)",
                                        "Sendrecv, Exchange, Bcast throughput")
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

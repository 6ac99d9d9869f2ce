"""HTML reports from ReFrame's JSON run reports.

A session folder `reports/<start time>-<uuid>/` holds `run-report.json`
(ReFrame's), `provenance.json` (this machine at the end of the session) and
`index.html` (verdicts, curves, fits, provenance, history).  `reports/latest`
points at the newest session; `reports/index.html` lists every session.
Every file is written to a temporary name and renamed into place, so a
reader never sees half a page.
"""

import atexit
import dataclasses
import datetime
import functools
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jinja2

from . import analysis, paths, references

RAW_REPORTS = paths.STATE / "reports"
TEMPLATES = paths.TEMPLATES
TUNING_STATE = paths.STATE / "tuning-state.json"


# ---- loading ------------------------------------------------------------

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
        return self.info.get("uuid", "")

    @property
    def name(self):
        start = self.info.get("time_start", "unknown").split("+")[0]
        return f"{start}-{self.uuid[:8]}" if self.uuid else start

    @property
    def started(self):
        return self.info.get("time_start_unix", 0)

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
    path = Path(path)
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable ReFrame run report ({err})") from err
    if "session_info" not in report or "runs" not in report:
        raise ValueError(f"{path}: not a ReFrame run report (no session_info/runs)")
    prov_file = path.parent / "provenance.json"
    provenance = json.loads(prov_file.read_text()) if prov_file.exists() else {}
    return Session(report, provenance, str(path))


def published_sessions(reports_dir=paths.REPORTS):
    found = []
    for path in sorted(Path(reports_dir).glob("*/run-report.json")):
        if path.parent.name == "latest" or path.parent.is_symlink():
            continue
        try:
            found.append(load_session(path))
        except ValueError:
            continue
    return sorted(found, key=lambda s: s.started)


# ---- provenance ----------------------------------------------------------

def _read(path, default=""):
    try:
        return Path(path).read_text()
    except OSError:
        return default


def _git_commit():
    try:
        out = subprocess.run(["git", "-C", str(paths.REPO), "describe", "--always", "--dirty",
                              "--abbrev=12"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def collect_provenance(report):
    cpu = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.M)
    mpis = {}
    for tc in Session(report, {}, "").testcases:
        info = tc.get("mpi_info") or {}
        if info:
            mpis[tc["environ"]] = info
    lock = paths.REPO / "spack.lock"
    tuning = json.loads(_read(TUNING_STATE, "null") or "null")
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
    for key, (value, ref, lower, upper, unit, result) in perf.items():
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


def atomic_write(path, text):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def point_latest(reports_dir, target):
    """Swap `reports/latest` to the new session in one rename."""
    link = Path(reports_dir) / "latest"
    tmp = Path(reports_dir) / f".latest.{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target)
    if link.exists() and not link.is_symlink():
        shutil.rmtree(link)
    os.replace(tmp, link)


def publish(raw_report, reports_dir=paths.REPORTS):
    """Make `raw_report` a published session: its folder, the page, the
    index and `latest`.  Returns the session folder."""
    reports_dir = Path(reports_dir)
    reports_dir.mkdir(parents=True, exist_ok=True)
    session = load_session(raw_report)
    session.provenance = collect_provenance(session.report)
    staging = Path(tempfile.mkdtemp(dir=reports_dir, prefix=".session-"))
    try:
        shutil.copyfile(raw_report, staging / "run-report.json")
        (staging / "provenance.json").write_text(json.dumps(session.provenance, indent=2))
        earlier = [s for s in published_sessions(reports_dir) if s.name != session.name]
        (staging / "index.html").write_text(render_report([session], earlier))
        os.chmod(staging, 0o755)
        final = reports_dir / session.name
        if final.exists():
            shutil.rmtree(final)
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    point_latest(reports_dir, session.name)
    atomic_write(reports_dir / "index.html", render_index(earlier + [session]))
    return final


def write_report(run_reports, outdir):
    """`netbench report`: one session's page, or a comparison of several."""
    sessions = sorted((load_session(p) for p in run_reports), key=lambda s: s.started)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    earlier = published_sessions() if len(sessions) == 1 else []
    atomic_write(outdir / "index.html", render_report(sessions, earlier))
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

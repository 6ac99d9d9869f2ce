"""`make bench-report`: what publishing a session costs as it grows.

Synthetic sessions of 1,000 and 10,000 cases: each case a PingPong case
as a ReFrame session writes it (the ReFrame fields of a real run report,
a record made by netbench.results.record with a 24-size curve), over a
mix of partitions, MPIs, transports and variants, one case in 20 failed.
Each is published by `netbench publish` in a fresh interpreter into an
empty reports/ under a temporary folder, the largest again as the next
days' sessions (publish reads earlier sessions for the history and the
index): wall and CPU time, peak RSS (the child's rusage) and the page's
size.  Then `netbench compare` of two sessions of the largest size, each
case's launch recorded, B's every 5th case 10x slower (bench_compare:
median CPU, peak RSS, the page's size and the terminal's lines).  Last
(alone with `--refusals-only`), what refusing hostile input costs: `netbench
drain` of /dev/zero, of a 50 MB suspects.json and of a crafted one of
200,000 suspects, and the sweep's step between passes given a topology
whose hostlist names 10^9 hosts (bench_refusals: median wall, CPU and peak
RSS by GNU time, and the refusal's line).  Needs no root and no MPI.
Prints figures; asserts nothing.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import paths
from ..results import record as results_record

SIZES = [float(1 << k) for k in range(24)]          # 1 B to 8 MiB, as the suite sweeps
UNITS = {"bytes": "B", "usec": "us", "Mbps": "Mbit/s", "MBps": "MB/s"}
MPIS = (("mpich", "5.0.2"), ("openmpi", "5.0.11"))
TRANSPORTS = (("shm", "intranode", 0.6, 30000.0), ("tcp", "internode", 25.0, 940.0),
              ("ofi-tcp", "internode", 30.0, 900.0))
VARIANTS = ("blocking", "nonblocking", "persistent")
CITATION = ("000_0a10b582eb0a2537.txt, Table 1, \"Summary of performance of all the "
            "networks on the IBM e325 cluster\", row Intranode / Myrinet / MPI")
#: the cases published, as the issue measured them (#23)
CASES = (1000, 10000)


def curve(rng, t0, rate_mbps):
    """A ping-pong curve, t(n) = t0 + n / r, with a few per cent of noise."""
    rows = []
    for n in SIZES:
        usec = (t0 + 8 * n / rate_mbps) * rng.uniform(0.97, 1.08)
        rows.append({"bytes": n, "usec": round(usec, 4), "Mbps": round(8 * n / usec, 3),
                     "MBps": round(n / usec, 3)})
    return rows


def synthetic_case(i, rng, uuid):
    """Case `i` of a session: the fields a ReFrame 4.10 run report holds
    for one of netbench's PingPong cases, and its record."""
    (mpi, version), (transport, placement, t0, rate) = MPIS[i % 2], TRANSPORTS[i // 2 % 3]
    variant, partition = VARIANTS[i // 6 % 3], f"p{i // 18 % 24}"
    rows = curve(rng, t0, rate)
    latency, peak = rows[0]["usec"], max(r["Mbps"] for r in rows)
    failed = i % 20 == 19
    refs = {"latency": results_record.reference(
                t0, None, 1.5, "us", f"seed000#table1/{transport}/latency_us", CITATION,
                placement, at={"series": "mpi", "y": "usec", "bytes": 1.0}),
            "peak_bw": results_record.reference(
                rate, -0.2, None, "Mbit/s", f"seed000#table1/{transport}/max_bandwidth_mbps",
                CITATION, placement, at={"series": "mpi", "y": "Mbps", "bytes": SIZES[-1]})}
    record = results_record.make(
        "pingpong", f"{mpi} {variant} {transport} {placement}",
        [results_record.make_series("mpi", rows, ("usec", "Mbps", "MBps"), UNITS)],
        {"mpi_family": mpi, "mpi_version": version, "mpi_source": "wheel",
         "transport": transport, "placement": placement, "ranks": 2,
         "ranks_per_node": 2 if placement == "intranode" else 1,
         "partition": f"site:{partition}", "interconnect": placement,
         "line_rate_mbps": None if transport == "shm" else 1000.0}, refs)
    name = f"PingPong %variant={variant} %transport={transport} %placement={placement} " \
           f"%size_set={i}"
    stage = f"/scratch/netbench/.reframe/stage/site/{partition}/{mpi}/PingPong_{i:08x}"
    return {
        "name": name, "display_name": f"{name} /{i:08x}", "unique_name": f"PingPong_{i}",
        "short_name": f"PingPong_{i:08x}", "hashcode": f"{i:08x}",
        "system": "site", "partition": partition, "environ": mpi,
        "result": "fail" if failed else "pass",
        "fail_phase": "performance" if failed else None,
        "fail_reason": f"performance error: failed to meet reference(s): latency={latency} us"
                       if failed else None,
        "fail_severe": False, "fail_info": None, "skip_reason": "",
        "placement": placement, "transport": transport, "variant": variant,
        "partition_info": {"interconnect": placement, "nodes": 2},
        "mpi_info": {"family": mpi, "version": version, "source": "wheel",
                     "launcher": f"/opt/{mpi}/bin/mpirun", "transports": {transport: {}}},
        "perfvalues": {f"site:{partition}:latency": [latency, t0, None, 1.5, "us",
                                                     "fail" if failed else "pass"],
                       f"site:{partition}:peak_bw": [peak, rate, -0.2, None, "Mbit/s",
                                                     "pass"]},
        "record": record,
        "descr": "MPI ping-pong sweep", "executable": f"{stage}/netbench",
        "executable_opts": ["pingpong", "-x", "8388608", "-t", "0.05", "-r", "0.01", "-V"],
        "stagedir": stage, "outputdir": stage.replace("stage", "output"),
        "prefix": "/scratch/netbench/reframe_checks", "filename": "reframe_checks/pingpong.py",
        "job_stdout": "rfm_job.out", "job_stderr": "rfm_job.err", "jobid": str(20000 + i),
        "job_nodelist": [f"n{i % 64:03d}", f"n{(i + 1) % 64:03d}"], "job_exitcode": 0,
        "num_tasks": 2, "num_tasks_per_node": 1, "tags": ["pingpong", "full", "default"],
        "time_run": rng.uniform(2, 9), "time_total": rng.uniform(3, 10),
        "valid_systems": [f"site:{partition}"], "valid_prog_environs": [mpi],
        "dependencies_actual": [[f"NetbenchBuild_{i % 7:08x}", f"site:{partition}", mpi]],
        "session_uuid": uuid, "uuid": f"{uuid}:0:{i}", "run_index": 0,
        "env_vars": {}, "variables": {}, "modules": [], "maintainers": [],
    }


def synthetic_report(cases, seed=23):
    """A run report of `cases` cases (ReFrame 4.10's layout)."""
    rng = random.Random(seed)
    uuid = f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
    testcases = [synthetic_case(i, rng, uuid) for i in range(cases)]
    failures = sum(tc["result"] == "fail" for tc in testcases)
    return {"session_info": {"data_version": "4.0", "hostname": "login1", "uuid": uuid,
                             "time_start": "20261124T010000+0000",
                             "time_start_unix": 1795482000.0, "version": "4.10.4",
                             "cmdline": "reframe -c reframe_checks -r", "num_cases": cases,
                             "num_failures": failures},
            "runs": [{"testcases": testcases}]}


def publish_cost(report_file, reports_dir):
    """(wall seconds, CPU seconds, peak RSS in MB, exit code, last line of
    stderr) of `netbench publish` in a fresh interpreter (wait4: that
    child's own rusage).  CPU seconds are the figure to compare on a shared
    machine, where the wall time counts other users' load."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "netbench.cli", "publish",
                                 str(report_file), "-o", str(reports_dir)],
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        err.seek(0)
        error = (err.read().decode(errors="replace").strip().splitlines() or [""])[-1]
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, error


def dated(report, day):
    """`report` as a session started `day` days later, with its own uuid."""
    info = dict(report["session_info"], time_start=f"202611{24 + day:02d}T010000+0000",
                time_start_unix=report["session_info"]["time_start_unix"] + day * 86400,
                uuid=f"{day:08x}" + report["session_info"]["uuid"][8:])
    return {**report, "session_info": info}


#: the launches each case of a session accepted as a baseline ran (its
#: record's runs: the judging rule launches a run again while undecided)
ACCEPT_LAUNCHES = 2


def with_launches(report, seed):
    """`report` with each case's record holding its launches (record.runs,
    what `baseline accept` reads), each a few per cent off the curve."""
    rng = random.Random(seed)
    for tc in report["runs"][0]["testcases"]:
        series = tc["record"]["series"][0]
        tc["record"]["runs"] = {series["name"]: [
            {"columns": ["bytes", "usec"], "summary": {},
             "rows": [{"bytes": r["bytes"], "usec": round(r["usec"] * rng.uniform(0.98, 1.03), 4)}
                      for r in series["rows"]]}
            for _ in range(ACCEPT_LAUNCHES)]}
    return report


def accept_cost(cases, sessions=3):
    """`netbench baseline accept` (the last `sessions` published) over
    sessions of `cases` cases each, placed under reports/ as publish names
    them, in a fresh interpreter: (wall, CPU seconds, peak RSS MB, exit
    code, last line of stderr)."""
    from ..report.sessions import session_folder_name
    with tempfile.TemporaryDirectory(prefix="netbench-reportbench-") as tmp:
        reports = Path(tmp) / "reports"
        for day in range(sessions):
            report = with_launches(dated(synthetic_report(cases, seed=23 + day), day), day)
            folder = reports / session_folder_name(report["session_info"], "synthetic")
            folder.mkdir(parents=True)
            (folder / "run-report.json").write_text(json.dumps(report))
            del report
        started = time.monotonic()
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen([sys.executable, "-m", "netbench.cli", "baseline", "accept",
                                     "--reports", str(reports),
                                     "-o", str(Path(tmp) / "baselines")],
                                    stdout=subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.monotonic() - started
            err.seek(0)
            error = (err.read().decode(errors="replace").strip().splitlines() or [""])[-1]
    return (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            os.waitstatus_to_exitcode(status), error)


def print_accept_cost(cases, sessions=3):
    wall, cpu, peak, rc, error = accept_cost(cases, sessions)
    print(f"baseline accept of {sessions} sessions of {cases} cases: {wall:.1f} s wall, "
          f"{cpu:.1f} s CPU, {peak:.0f} MB peak RSS"
          + (f"; failed ({rc}): {error}" if rc else ""))


def compare_side(report, slower=1.0, every=1):
    """`report` with each case's two launches recorded (their rows with the
    interval of their samples, as record version 2 keeps them; the second
    2 % slower), every `every`-th case's times `slower` times longer: the
    sides of `netbench compare`, with the launches its model needs to call
    a loss (judging.yaml's min_to_fail)."""
    testcases = []
    for i, tc in enumerate(report["runs"][0]["testcases"]):
        factor = slower if i % every == 0 else 1.0
        (series,) = tc["record"]["series"]
        rows = [{**r, "usec": r["usec"] * factor, "usec_lo": 0.97 * r["usec"] * factor,
                 "usec_hi": 1.05 * r["usec"] * factor, "Mbps": r["Mbps"] / factor,
                 "MBps": r["MBps"] / factor} for r in series["rows"]]
        again = [{**r, **{c: r[c] * 1.02 for c in ("usec", "usec_lo", "usec_hi")},
                  **{c: r[c] / 1.02 for c in ("Mbps", "MBps")}} for r in rows]
        columns = ["bytes", "usec", "usec_lo", "usec_hi", "Mbps", "MBps"]
        record = {**tc["record"], "series": [{**series, "rows": rows}],
                  "runs": {"mpi": [{"columns": columns, "rows": launch, "summary": {}}
                                   for launch in (rows, again)]}}
        testcases.append({**tc, "record": record})
    return {**report, "runs": [{"testcases": testcases}]}


def compare_cost(a_file, b_file, outdir):
    """(wall s, CPU s, peak RSS MB, exit code, terminal lines) of `netbench
    compare A B -o OUTDIR` in a fresh interpreter (its own rusage)."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-m", "netbench.cli", "compare", str(a_file),
                                 str(b_file), "-o", str(outdir)],
                                stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        out.seek(0)
        lines = out.read().count(b"\n")
    return (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
            os.waitstatus_to_exitcode(status), lines)


def bench_compare(cases, repeats=3):
    """`netbench compare` of two sessions of `cases` cases, B's every 5th
    case 10x slower: the median of `repeats` runs of each figure."""
    print(f"{'compare':>7} {'cases':>6} {'wall':>7} {'CPU':>7} {'peak RSS':>9} {'page':>8} "
          f"{'lines':>6} {'exit':>4}")
    with tempfile.TemporaryDirectory(prefix="netbench-comparebench-") as tmp:
        report = synthetic_report(cases)
        a_file, b_file = Path(tmp) / "a.json", Path(tmp) / "b.json"
        a_file.write_text(json.dumps(compare_side(report)))
        b_file.write_text(json.dumps(compare_side(dated(report, 1), slower=10.0, every=5)))
        runs = [compare_cost(a_file, b_file, Path(tmp) / f"out{k}") for k in range(repeats)]
        wall, cpu, peak, _, _ = (statistics.median(r[k] for r in runs) for k in range(5))
        page = (Path(tmp) / "out0" / "index.html").stat().st_size / 2**20
        print(f"{'':7} {cases:6} {wall:5.1f} s {cpu:5.1f} s {peak:6.0f} MB {page:5.1f} MB "
              f"{runs[0][4]:6} {runs[0][3]:4}")


# -- hostile input: what refusing it costs (issue 54) ---------------------------------

#: the suspects of the crafted suspects.json: 200,000 (issue 54 measured 73 s
#: and 363 MB for `drain --dry-run` of one)
CRAFTED_SUSPECTS = 200_000


def sweep_session(cases=1):
    """A run report whose first case is a fabric sweep of n1-n3 naming n3."""
    report = synthetic_report(cases)
    case = report["runs"][0]["testcases"][0]
    hosts = ["n1", "n2", "n3"]
    pairs = [{"src": a, "dst": b, "latency_us": 20.0,
              "bw_Mbps": {"1048576": 300.0 if "n3" in (a, b) else 950.0}}
             for a in hosts for b in hosts if a != b]
    suspect = {"kind": "node", "names": ["n3"], "metric": "bw_Mbps@1048576", "value": 300.0,
               "fleet_median": 950.0, "reference": None, "direction": "both",
               "evidence": [{"src": "n1", "dst": "n3", "metric": "bw_Mbps@1048576",
                             "value": 300.0, "bound": 712.5}]}
    record = results_record.make("sweep", "mpich tcp", [], {"mpi_family": "mpich",
                                                            "placement": "internode"})
    record["fleet"] = {"hosts": hosts, "pairs": pairs, "suspects": [suspect], "findings": [],
                       "remeasured": [], "sweep_seconds": 1.0, "rounds": 3,
                       "order": "concurrent"}
    case.update(name="LinkSweep", display_name="LinkSweep /00000000",
                unique_name="LinkSweep_0", record=record, perfvalues={}, result="fail")
    return report, suspect


def crafted_suspects(path, suspect, count):
    """A suspects.json of `count` suspects naming as many nodes."""
    names = [f"x{i}" for i in range(count)]
    path.write_text(json.dumps({"session": "S", "sweeps": [{"nodes": names, "suspects": [
        {**suspect, "names": [name], "evidence": []} for name in names]}]},
        separators=(",", ":")))
    return path


def command_cost(argv):
    """(wall s, CPU s, peak RSS MB, exit code, last line of stderr) of
    `argv` in a fresh interpreter, by GNU time (Debian's `time`): this
    process's own rusage of a child counts, after exec, the peak of the
    process that forked it (Linux keeps the larger), so a parent holding
    hundreds of MB would show as the child's."""
    with tempfile.TemporaryDirectory() as folder:
        figures, err = Path(folder) / "time", Path(folder) / "stderr"
        with open(err, "w") as stderr:
            proc = subprocess.run([TIME, "-f", "%e %U %S %M", "-o", str(figures), *argv],
                                  stdout=subprocess.DEVNULL, stderr=stderr)
        wall, user, system, peak_kb = figures.read_text().split()[-4:]
        line = (err.read_text(errors="replace").strip().splitlines() or [""])[-1]
    return float(wall), float(user) + float(system), int(peak_kb) / 1024, proc.returncode, line


#: GNU time, whose %M is the command's own peak RSS
TIME = "/usr/bin/time"


def refusal_commands(tmp):
    """{what: argv} of each hostile input, through the real commands."""
    tmp = Path(tmp)
    netbench = [sys.executable, "-m", "netbench.cli"]
    big = tmp / "big-suspects.json"
    with open(big, "wb") as f:
        f.write(b" " * (50 << 20))
    topology = tmp / "topology.conf"
    topology.write_text("SwitchName=s1 Nodes=n[1-1000]x[1-1000]y[1-1000]\n")
    # a sweep's first pass (a 6-node sweep, one node slow), as the job's
    # step between passes reads it with the partition's topology
    first = paths.REPO / "tests" / "data" / "sweep_confirm" / "slow-node" / "sweep.out"
    report, suspect = sweep_session()
    raw = tmp / "run-report.json"
    raw.write_text(json.dumps(report))
    reports = tmp / "reports"
    reports.mkdir()
    published = subprocess.run([*netbench, "publish", str(raw), "-o", str(reports)],
                               capture_output=True, text=True)
    if published.returncode:
        raise SystemExit(f"publish failed: {published.stderr.strip()}")
    session = next(p for p in reports.iterdir() if (p / "suspects.json").is_file())
    crafted_suspects(session / "suspects.json", suspect, CRAFTED_SUSPECTS)
    (tmp / "elsewhere").mkdir()
    loose = crafted_suspects(tmp / "elsewhere" / "suspects.json", suspect, CRAFTED_SUSPECTS)
    return {
        "drain --dry-run /dev/zero": [*netbench, "drain", "--dry-run", "/dev/zero"],
        "drain --dry-run, a 50 MB suspects.json": [*netbench, "drain", "--dry-run", str(big)],
        "the sweep's step, a 10^9-name hostlist": [
            sys.executable, "-m", "netbench.fleet.remeasure", "--topology", str(topology),
            str(first)],
        f"drain --dry-run, {CRAFTED_SUSPECTS:,} suspects in a session": [
            *netbench, "drain", "--dry-run", str(session / "suspects.json")],
        f"drain --dry-run, {CRAFTED_SUSPECTS:,} suspects, no session": [
            *netbench, "drain", "--dry-run", str(loose)],
    }


def bench_refusals(repeats=5):
    """Each hostile input refused: the median wall and CPU time and peak
    RSS of `repeats` runs, and the refusal's line."""
    print(f"\n{'hostile input':44} {'wall':>6} {'CPU':>6} {'peak RSS':>9}  exit, refusal")
    with tempfile.TemporaryDirectory(prefix="netbench-refusalbench-") as tmp:
        for what, argv in refusal_commands(tmp).items():
            runs = [command_cost(argv) for _ in range(repeats)]
            wall, cpu, peak = (statistics.median(r[k] for r in runs) for k in range(3))
            rc, line = runs[-1][3], runs[-1][4]
            print(f"{what:44} {wall:5.2f}s {cpu:5.2f}s {peak:6.0f} MB  {rc}, "
                  f"{line.replace(tmp, '$TMP')[:160]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, nargs="+", default=list(CASES))
    parser.add_argument("--sessions", type=int, default=3,
                        help="publish the largest this many times, a day apart, into the "
                             "same reports/ (history and index read the earlier ones)")
    parser.add_argument("--compare-runs", type=int, default=3,
                        help="runs of `netbench compare` whose median is printed")
    parser.add_argument("--refusals-only", action="store_true",
                        help="only what refusing hostile input costs (drain, hostlists)")
    args = parser.parse_args(argv)
    if args.refusals_only:
        bench_refusals()
        return 0
    print(f"{'cases':>6} {'earlier':>7} {'run report':>10} {'publish wall':>12} "
          f"{'CPU':>7} {'peak RSS':>9} {'page':>8}")
    largest = max(args.cases)
    for cases in sorted(args.cases):
        with tempfile.TemporaryDirectory(prefix="netbench-reportbench-") as tmp:
            reports = Path(tmp) / "reports"
            reports.mkdir()
            report = synthetic_report(cases)
            for day in range(args.sessions if cases == largest else 1):
                report_file = Path(tmp) / f"run-report-{day}.json"
                report_file.write_text(json.dumps(dated(report, day)))
                wall, cpu, peak, rc, error = publish_cost(report_file, reports)
                if rc != 0:
                    print(f"{cases:6} publish failed ({rc}): {error}")
                    break
                page = reports / "latest" / "index.html"
                print(f"{cases:6} {day:7} {report_file.stat().st_size / 2**20:7.1f} MB "
                      f"{wall:10.1f} s {cpu:5.1f} s {peak:6.0f} MB "
                      f"{page.stat().st_size / 2**20:5.1f} MB")
    print_accept_cost(largest, args.sessions)
    bench_compare(largest, args.compare_runs)
    bench_refusals()
    return 0


if __name__ == "__main__":
    sys.exit(main())

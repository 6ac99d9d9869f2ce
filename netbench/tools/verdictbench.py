"""`make bench-verdict`: can the verdicts be trusted?  False alarms and
detected losses, counted over repeated real sessions (issue #25).

1. `local`: N consecutive default runs of this machine while one core is
   kept busy by a spinning process this benchmark starts and stops:
   failed cases (false alarms), inconclusive cases, exit codes, wall time.
2. `cluster`: the same, 5 runs on a 3-node virtual cluster with unshaped
   links (`--link none`), one core kept busy.
3. `detect`: a 2-node 1 Gbit/s virtual cluster; 3 accepted runs of the
   internode ping-pong become its baseline (in a copy of the references),
   then 3 runs with both ends' links lowered by 10 % (900mbit) on a quiet
   host, and 3 lowered by 20 % (800mbit) with one core kept busy: runs that
   fail, and at which sizes; 3 healthy runs under load: false alarms.

The cluster parts need root; each cluster is brought up here and taken
down after, even on failure.  Prints figures; asserts nothing.
"""

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .. import paths
from ..rfm import session

BENCH_CLUSTER = "vbench"
#: the internode ping-pong judged against the baseline on the 2-node cluster
INTERNODE = ("-n", "^PingPong%variant=blocking%transport=tcp%placement=internode$",
             "-p", "^openmpi$")


@contextlib.contextmanager
def busy_core():
    """One core kept busy by a spinning process (a login node's normal
    state), stopped when the block ends."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield spinner.pid
    finally:
        spinner.kill()
        spinner.wait()


def one_session(system, selection=(), env=None):
    """{exit, seconds, failed, inconclusive, cases, reasons} of one session."""
    start = time.monotonic()
    proc = session.run_reframe(system, *selection, env=env, timeout=3600)
    elapsed = time.monotonic() - start
    cases = [tc for run in session.latest_report()["runs"] for tc in run["testcases"]
             if tc.get("result") != "skip" and not tc["name"].startswith("NetbenchBuild")]
    failed = [tc for tc in cases if tc.get("result") == "fail"]
    unsure = [tc for tc in cases if (tc.get("record") or {}).get("verdict") == "inconclusive"]
    return {"exit": proc.returncode, "seconds": elapsed, "cases": len(cases),
            "failed": len(failed), "inconclusive": len(unsure),
            "reasons": [f"{tc['display_name'].split(' /')[0]} @ {tc['environ']}: "
                        f"{(tc.get('fail_reason') or '').splitlines()[0][:200]}"
                        for tc in failed],
            "record": [tc.get("record") or {} for tc in cases]}


def tally(label, results):
    runs = len(results)
    alarmed = sum(1 for r in results if r["failed"])
    print(f"{label}: {runs} runs, {alarmed} with a failed case "
          f"({sum(r['failed'] for r in results)} of {sum(r['cases'] for r in results)} cases), "
          f"{sum(1 for r in results if r['inconclusive'])} with an inconclusive case "
          f"({sum(r['inconclusive'] for r in results)} cases); exit codes "
          f"{sorted({r['exit'] for r in results})}; wall median "
          f"{statistics.median(r['seconds'] for r in results):.0f} s, max "
          f"{max(r['seconds'] for r in results):.0f} s")
    for r in results:
        for reason in r["reasons"]:
            print(f"    failed: {reason}")
    sys.stdout.flush()


def local_false_alarms(runs):
    results = []
    with busy_core():
        for _ in range(runs):
            results.append(one_session("local"))
    tally("local default run, one core busy", results)


@contextlib.contextmanager
def cluster(nodes, rate):
    from .. import vcluster
    state, created = vcluster.up(BENCH_CLUSTER, nodes=nodes, rate=rate)
    try:
        yield state
    finally:
        if created:
            vcluster.down(BENCH_CLUSTER)


def cluster_false_alarms(runs):
    with cluster(3, "none") as state, busy_core():
        results = [one_session(state["system"]) for _ in range(runs)]
    tally("default run, 3-node --link none cluster, one core busy", results)


def failed_sizes(result):
    sizes = []
    for record in result["record"]:
        verdict = (record.get("verdicts") or {}).get("vs_baseline") or {}
        sizes += [int(s["bytes"]) for s in verdict.get("sizes", []) if s["verdict"] == "fail"]
    return sizes


def detection(runs):
    from .. import vcluster
    from ..report import baselines
    references = tempfile.mkdtemp(prefix="netbench-verdictbench-") + "/references"
    shutil.copytree(paths.REFERENCES, references, ignore=shutil.ignore_patterns("baselines"))
    judged = ("-S", f"thresholds_folder={references}")
    try:
        with cluster(2, "1gbit") as state:
            system = state["system"]
            accepted = []
            for _ in range(3):
                one_session(system, INTERNODE + judged)
                accepted.append((paths.REPORTS / "latest").resolve().name)
            baselines.accept(accepted, folder=f"{references}/baselines")
            print(f"baseline of 3 accepted runs: {', '.join(accepted)}")
            for rate, loaded in (("900mbit", False), ("800mbit", True), (None, True)):
                for node in (1, 2):
                    if rate:
                        vcluster.set_fault(BENCH_CLUSTER, str(node), rate=rate,
                                           direction="both")
                    else:
                        vcluster.set_fault(BENCH_CLUSTER, str(node), clear_fault=True)
                with busy_core() if loaded else contextlib.nullcontext():
                    results = [one_session(system, INTERNODE + judged) for _ in range(runs)]
                label = (f"links at {rate}" if rate else "healthy links") + \
                    (", one core busy" if loaded else ", quiet")
                tally(f"2-node 1gbit cluster against its baseline, {label}", results)
                for r in results:
                    print(f"    failed sizes: {failed_sizes(r) or 'none'}")
    finally:
        shutil.rmtree(os.path.dirname(references), ignore_errors=True)


PARTS = {"local": local_false_alarms, "cluster": cluster_false_alarms, "detect": detection}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.tools.verdictbench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"any of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--runs", type=int, help="runs per part (default: local 20, "
                                                 "cluster 5, detect 3)")
    args = parser.parse_args(argv)
    defaults = {"local": 20, "cluster": 5, "detect": 3}
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r} (parts: {', '.join(PARTS)})")
    for part in args.parts or list(PARTS):
        if part != "local" and os.geteuid() != 0:
            print(f"{part}: not measured: a virtual cluster needs root")
            continue
        PARTS[part](args.runs or defaults[part])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make bench-verdict`: can the verdicts be trusted?  False alarms and
detected losses, counted over repeated real sessions (issue #25).  Every
part keeps one core busy with a spinning process it starts and stops (a
login node's normal state), except where it says quiet.

1. `local`: N consecutive default runs of this machine: failed cases
   (false alarms), inconclusive cases, exit codes, wall time.
2. `cluster`: the same, 5 default runs on a 3-node virtual cluster with
   unshaped links (`--link none`).
3. `sweep`: 5 fabric sweeps (LinkSweep, `-t sweep`) of a healthy 5-node
   1 Gbit/s virtual cluster: false alarms and suspects named.
4. `parity`: 5 runs of container parity (ContainerParity, podman).
5. `detect`: a 2-node 1 Gbit/s virtual cluster's internode ping-pong
   against baselines of 3 accepted runs each (in a copy of the
   references): one accepted on a quiet host, one under the load.  Quiet:
   links lowered by 10 % (900mbit on both ends) must fail, healthy links
   must not.  Loaded, against the loaded baseline: lowered by 20 %
   (800mbit) must fail, healthy must not.  Loaded, against the quiet
   baseline: healthy links, which the load alone cannot fail, and links
   lowered by 20 %, which the load can hide (one core's load cost healthy
   links up to 1.3x the quiet band) but must never pass.
6. `shm`: locally, Open MPI's shared memory against a baseline of 3
   accepted runs: slowed (single copy off, 256-byte fragments) must fail,
   healthy must not.

The cluster parts need root; each cluster is brought up here and taken
down after, even on failure.  Prints figures; asserts nothing.
"""
import argparse
import contextlib
import os
import shutil
import signal
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


def sweep_false_alarms(runs):
    with cluster(5, "1gbit") as state, busy_core():
        results = [one_session(state["system"], ("-t", "sweep")) for _ in range(runs)]
    tally("fabric sweep, healthy 5-node 1gbit cluster, one core busy", results)
    for r in results:
        named = {kind: [" ".join(s.get("names", [])) for rec in r["record"]
                        for s in (rec.get("fleet") or {}).get(kind, [])]
                 for kind in ("suspects", "unconfirmed")}
        pressure = [(rec.get("host") or {}).get("cpu_pressure") for rec in r["record"]
                    if rec.get("fleet")]
        print(f"    suspects named: {named['suspects'] or 'none'}; unconfirmed (host "
              f"contended, or within the fleet's own spread): {named['unconfirmed'] or 'none'}; "
              f"cpu pressure {pressure}")


def parity_false_alarms(runs):
    with busy_core():
        results = [one_session("local-container:container", ("-n", "^ContainerParity"))
                   for _ in range(runs)]
    tally("container parity (podman), one core busy", results)


@contextlib.contextmanager
def references_copy():
    """A copy of the references without baselines, removed after."""
    folder = tempfile.mkdtemp(prefix="netbench-verdictbench-")
    shutil.copytree(paths.REFERENCES, f"{folder}/references",
                    ignore=shutil.ignore_patterns("baselines"))
    try:
        yield f"{folder}/references"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def accept_baseline(system, selection, references, label, loaded=False):
    """3 runs of `selection` accepted as `system`'s baseline in
    `references`; the name of the baseline's folder."""
    from ..report import baselines
    folder = f"{references}/baselines-{label}"
    accepted = []
    with busy_core() if loaded else contextlib.nullcontext():
        for _ in range(3):
            one_session(system, selection + ("-S", f"thresholds_folder={references}"))
            accepted.append((paths.REPORTS / "latest").resolve().name)
    baselines.accept(accepted, folder=folder)
    print(f"baseline '{label}' of 3 accepted runs: {', '.join(accepted)}")
    return folder


def judged_against(system, selection, references, folder, runs, label, loaded, env=None):
    """`runs` sessions judged against the baseline in `folder` (swapped in
    as the references' baselines/), tallied under `label`."""
    target = f"{references}/baselines"
    if os.path.islink(target):
        os.unlink(target)
    os.symlink(folder, target)
    with busy_core() if loaded else contextlib.nullcontext():
        results = [one_session(system, selection + ("-S", f"thresholds_folder={references}"),
                               env=env) for _ in range(runs)]
    tally(label, results)
    for r in results:
        print(f"    failed sizes: {failed_sizes(r) or 'none'}")


def set_links(rate):
    from .. import vcluster
    for node in (1, 2):
        if rate:
            vcluster.set_fault(BENCH_CLUSTER, str(node), rate=rate, direction="both")
        else:
            vcluster.set_fault(BENCH_CLUSTER, str(node), clear_fault=True)


def detection(runs):
    # the quiet part first: CPU pressure (PSI avg10) decays for tens of
    # seconds after the spinning process stops, and a quiet run read right
    # after the loaded baseline would carry it
    with references_copy() as references, cluster(2, "1gbit") as state:
        system = state["system"]
        quiet = accept_baseline(system, INTERNODE, references, "quiet")
        for rate, label in (("900mbit", "links at 900mbit, quiet"),
                            (None, "healthy links, quiet")):
            set_links(rate)
            judged_against(system, INTERNODE, references, quiet, runs,
                           f"2-node 1gbit cluster against its baseline, {label}", False)
        loaded = accept_baseline(system, INTERNODE, references, "loaded", loaded=True)
        plan = (("800mbit", loaded, "links at 800mbit, one core busy, loaded baseline"),
                (None, loaded, "healthy links, one core busy, loaded baseline"),
                (None, quiet, "healthy links, one core busy, quiet baseline"),
                ("800mbit", quiet, "links at 800mbit, one core busy, quiet baseline"))
        for rate, folder, label in plan:
            set_links(rate)
            judged_against(system, INTERNODE, references, folder, runs,
                           f"2-node 1gbit cluster against its baseline, {label}", True)


#: Open MPI's shared memory crippled (tests/test_baselines.py says why)
SLOWED_SHM = {"OMPI_MCA_smsc": "^cma", "OMPI_MCA_btl_sm_max_send_size": "256"}
SHM = ("-n", "^PingPong%variant=blocking%transport=shm%placement=intranode$",
       "-p", "^openmpi$")


def shm_detection(runs):
    with references_copy() as references:
        folder = accept_baseline("local", SHM, references, "shm", loaded=True)
        judged_against("local", SHM, references, folder, runs,
                       "local Open MPI shm, slowed, one core busy", True, env=SLOWED_SHM)
        judged_against("local", SHM, references, folder, runs,
                       "local Open MPI shm, healthy, one core busy", True)


PARTS = {"local": local_false_alarms, "cluster": cluster_false_alarms,
         "sweep": sweep_false_alarms, "parity": parity_false_alarms, "detect": detection,
         "shm": shm_detection}
#: parts that need root (a virtual cluster, podman's cgroup set-up)
AS_ROOT = {"cluster", "sweep", "parity", "detect"}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.tools.verdictbench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"any of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--runs", type=int, help="runs per part (default: local 20, "
                                                 "cluster, sweep and parity 5, detect and "
                                                 "shm 3)")
    args = parser.parse_args(argv)
    # a benchmark stopped with kill still takes its clusters down and stops
    # its spinning process (the finally blocks run on SystemExit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    defaults = {"local": 20, "cluster": 5, "sweep": 5, "parity": 5, "detect": 3, "shm": 3}
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r} (parts: {', '.join(PARTS)})")
    for part in args.parts or list(PARTS):
        if part in AS_ROOT and os.geteuid() != 0:
            print(f"{part}: not measured: it needs root (a virtual cluster or podman)")
            continue
        PARTS[part](args.runs or defaults[part])
    return 0


if __name__ == "__main__":
    sys.exit(main())

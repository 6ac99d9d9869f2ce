"""`make bench-verdict`: can the verdicts be trusted?  Issue #33's "Must
show", counted over repeated real sessions, each figure a count and its
95 % Wilson score interval.  "One core busy" is a spinning process this
tool starts and stops (a login node's normal state); every quiet part runs
before its busy one, since CPU pressure (PSI avg10) decays for tens of
seconds after the spinner stops.

1. `local`: N default runs of this machine quiet, then N with one core
   busy (N=20): failed cases, inconclusive cases, and every inconclusive
   case whose record names no condition that kept it from a verdict (no
   verdict with numbers.conditions, no code conditions_differ), listed.
2. `detect`: a 2-node 1 Gbit/s virtual cluster's internode ping-pong
   against a baseline of 3 quiet runs (in a copy of the references): links
   at 900mbit (-10 %), quiet, must fail in N of N (N=10); with one core
   busy, healthy links must fail no case and links at 800mbit (-20 %) must
   never pass.
3. `sweep`: fabric sweeps (LinkSweep, `-t sweep`) of a 5-node 1 Gbit/s
   cluster, healthy, quiet and with one core busy (N=10 each): suspects
   named; one node's link at 850mbit (0.85 of the others'), quiet: named
   in N of N (N=5).
4. `parity`: container parity (ContainerParity, podman): N healthy runs,
   no failed case (N=10); Open MPI's shared memory in a container started
   without CAP_SYS_PTRACE (the shipped run flags less that capability:
   single copy off): failed in N of N (N=5).
5. `tune`: `netbench tune`'s decision on a 2-node 1 Gbit/s cluster whose
   switch carries jumbo frames, fresh nodes for every run, the loop's
   default rounds: `ethernet_1g` (jumbo frames and larger buffers: from
   32 KiB up faster) kept, `sockbuf_capped` (TCP buffers capped at 4 KiB)
   reverted, `mtu_1500` (the MTU the nodes have: nothing changes) not
   kept; N runs each (N=3), each revert read back exact.  Then, with one
   core busy, `sockbuf_capped` must still never be kept, and how often
   `ethernet_1g` is kept, and measured again first (a loss beside a
   gain), is counted.

`--runs N` sets every N.  The cluster and container parts need root;
each cluster is brought up here under a name of its own and taken down
after, even on failure.  Prints figures; asserts nothing.
"""
import argparse
import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .. import paths
from ..datafiles import load_yaml
from ..report import reasons
from ..rfm import container, session
from ..textsafe import printable
from .load import busy_core

#: the two-sided 95 % normal quantile of the Wilson score intervals
Z95 = 1.959964
#: clusters of this tool (a name of its own per part: 1-6 letters or digits)
DETECT_CLUSTER, SWEEP_CLUSTER = "vbdet", "vbswp"
#: the internode ping-pong judged against the baseline on the 2-node cluster
INTERNODE = ("-n", "^PingPong%variant=blocking%transport=tcp%placement=internode$",
             "-p", "^openmpi$")
SWEEP = ("-t", "sweep", "-p", "^(mpich|openmpi)$")
PARITY = ("-n", "^ContainerParity")
#: the path the missing capability touches: Open MPI's single copy (smsc/cma)
PARITY_SLOWED = ("-n", "^ContainerParity%transport=shm", "-p", "^openmpi$")
#: the capability the slowed container lacks (container_run.yaml says why)
LACKED_CAPABILITY = "--cap-add=SYS_PTRACE"
#: runs per measurement, each part's (`--runs` sets them all)
DEFAULT_RUNS = {"local": 20, "detect": 10, "sweep_healthy": 10, "sweep_fault": 5,
                "parity_healthy": 10, "parity_slowed": 5, "tune": 3}
TUNE_CLUSTER = "vbtun"
#: what the tuning loop measures: Open MPI's blocking ping-pong between the nodes
TUNE_CHECKS = ["-p", "^openmpi$", "-n", "^PingPong",
               "-E", "placement=='internode' and transport=='tcp' and variant=='blocking'"]
#: the test suite's profiles that hurt (sockbuf_capped) and change nothing
#: (mtu_1500): a benchmark of a checkout, like every part here
TEST_PROFILES = paths.REPO / "tests" / "data" / "tune" / "profiles"
#: (profile, its folder: None for the shipped ones, whether it must be kept)
TUNE_PROFILES = [("ethernet_1g", None, True), ("sockbuf_capped", TEST_PROFILES, False),
                 ("mtu_1500", TEST_PROFILES, False)]
#: those measured again with one core busy: a loss must still never be
#: kept; a gain's count is shown (a site tunes a quiet cluster)
TUNE_BUSY = [("ethernet_1g", None, None), ("sockbuf_capped", TEST_PROFILES, False)]


def wilson(k, n, z=Z95):
    """The Wilson score interval (lo, hi) of a rate of k in n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def share(k, n):
    """'k of n (p %, 95 % CI lo-hi %)'."""
    lo, hi = wilson(k, n)
    rate = f"{100 * k / n:.1f} %, " if n else ""
    return f"{k} of {n} ({rate}95 % CI {100 * lo:.1f}-{100 * hi:.1f} %)"


def case_name(tc):
    return f"{tc['display_name'].split(' /')[0]} @ {tc['environ']}"


def names_a_condition(record):
    """Whether a record says which difference in the host's conditions kept
    a figure from a verdict (judgement.conditions)."""
    return any(entry.get("code") == "conditions_differ"
               or (entry.get("numbers") or {}).get("conditions")
               for entry in (record.get("verdicts") or {}).values() if isinstance(entry, dict))


def own_report(argv, started):
    """(folder name, run report) of the session started at `started`
    (time.time()) with the command line `argv`: reports/latest may be another session's,
    one this checkout's tests ran meanwhile."""
    found = []
    for folder in paths.REPORTS.iterdir():
        path = folder / "run-report.json"
        if folder.is_symlink() or not path.is_file() or path.stat().st_mtime < started:
            continue
        report = json.loads(path.read_text())
        info = report.get("session_info") or {}
        # ReFrame keeps its command line shell-quoted
        if shlex.split(info.get("cmdline", "")) == argv and \
                info.get("time_start_unix", 0) >= started:
            found.append((info["time_start_unix"], folder.name, report))
    if not found:
        raise SystemExit(f"verdictbench: no run report of `{shlex.join(argv)}` in "
                         f"{paths.REPORTS}")
    return max(found, key=lambda found: found[0])[1:]


def one_session(system, selection=(), env=None):
    """{exit, seconds, cases, folder} of one session (folder: its own in
    reports/); each case {name, result, verdict, record, fail_reason}."""
    started, start = time.time(), time.monotonic()
    proc = session.run_reframe(system, *selection, env=env, timeout=3600)
    elapsed = time.monotonic() - start
    folder, report = own_report(list(proc.args), started)
    cases = [{"name": case_name(tc), "result": tc.get("result"),
              "verdict": (tc.get("record") or {}).get("verdict"),
              "record": tc.get("record") or {}, "fail_reason": tc.get("fail_reason") or ""}
             for run in report["runs"] for tc in run["testcases"]
             if tc.get("result") != "skip" and not tc["name"].startswith("NetbenchBuild")]
    return {"exit": proc.returncode, "seconds": elapsed, "cases": cases,
            "folder": folder}


def sessions(runs, system, selection=(), env=None, busy=False):
    with busy_core(busy):
        return [one_session(system, selection, env=env) for _ in range(runs)]


def first_line(text):
    return printable((text or "").strip().splitlines()[0][:200]) if (text or "").strip() else ""


def tally(label, results):
    """Runs, failed and inconclusive cases, the inconclusive ones that
    name no condition, exit codes and wall time."""
    cases = [tc for r in results for tc in r["cases"]]
    # a loss called (the record's verdict), apart from a case that failed
    # to run (a job's time limit, a launcher's error: no verdict)
    failed = [tc for tc in cases if tc["verdict"] == "fail"]
    broken = [tc for tc in cases if tc["result"] == "fail" and tc["verdict"] != "fail"]
    unsure = [tc for tc in cases if tc["verdict"] == "inconclusive"]
    unnamed = [tc for tc in unsure if not names_a_condition(tc["record"])]
    walls = [r["seconds"] for r in results]
    print(f"{label}: {len(results)} runs; wall median {statistics.median(walls):.0f} s, "
          f"max {max(walls):.0f} s; exit codes {sorted({r['exit'] for r in results})}")
    alarmed = sum(1 for r in results if any(tc["verdict"] == "fail" for tc in r["cases"]))
    print(f"    runs with a failed case: {share(alarmed, len(results))}")
    print(f"    failed cases: {share(len(failed), len(cases))}")
    print(f"    cases that failed to run (no verdict): {share(len(broken), len(cases))}")
    print(f"    inconclusive cases: {share(len(unsure), len(cases))}")
    print(f"    inconclusive cases naming no condition: {share(len(unnamed), len(unsure))}")
    for tc in failed + broken:
        print(f"      {'failed' if tc in failed else 'did not run'}: {tc['name']}: "
              f"{first_line(tc['fail_reason'])}")
    for tc in unnamed:
        why = "; ".join(f"{var}: {first_line(entry.get('reason'))}"
                        for var, entry in (tc["record"].get("verdicts") or {}).items()
                        if isinstance(entry, dict) and entry.get("verdict") == "inconclusive")
        print(f"      inconclusive, no condition named: {tc['name']}: {why}")
    sys.stdout.flush()
    return cases


def local(runs):
    for label, busy in (("quiet", False), ("one core busy", True)):
        tally(f"local default run, {label}", sessions(runs["local"], "local", busy=busy))


@contextlib.contextmanager
def cluster(name, nodes, rate, **settings):
    """A virtual cluster of this tool's for the block, taken down however
    it ends (one of an earlier, killed run first)."""
    from .. import vcluster
    vcluster.down(name)
    state, _ = vcluster.up(name, nodes=nodes, rate=rate, **settings)
    try:
        yield state
    finally:
        vcluster.down(name)


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


def accept_baseline(system, selection, references):
    """3 quiet runs of `selection` accepted as `system`'s baseline in
    `references`/baselines."""
    from ..report import baselines
    accepted = []
    for _ in range(3):
        accepted.append(one_session(system, selection)["folder"])
    baselines.accept(accepted, folder=f"{references}/baselines")
    print(f"baseline of 3 quiet runs accepted: {', '.join(accepted)}")


def set_links(cluster_name, nodes, rate):
    from .. import vcluster
    for node in nodes:
        if rate:
            vcluster.set_fault(cluster_name, str(node), rate=rate, direction="both")
        else:
            vcluster.set_fault(cluster_name, str(node), clear_fault=True)


def verdicts_of(results):
    """How many cases ended in each verdict."""
    counts = {}
    for tc in (tc for r in results for tc in r["cases"]):
        counts[tc["verdict"] or tc["result"]] = counts.get(tc["verdict"] or tc["result"], 0) + 1
    return counts


def against_baseline(results):
    """Each case's verdict against the baseline: the curve's figure (the
    deciding size over its band's end) and its reason code."""
    for tc in (tc for r in results for tc in r["cases"]):
        entry = (tc["record"].get("verdicts") or {}).get("vs_baseline") or {}
        failed = [int(s["bytes"]) for s in entry.get("sizes", []) if s.get("verdict") == "fail"]
        print(f"      {tc['name']}: vs_baseline {entry.get('verdict')} ({entry.get('code')}), "
              f"{entry.get('value', math.nan):.2f}x the band's end; failed sizes "
              f"{failed or 'none'}")


def detect(runs):
    n = runs["detect"]
    with references_copy() as references, cluster(DETECT_CLUSTER, 2, "1gbit") as state:
        selection = INTERNODE + ("-S", f"thresholds_folder={references}")
        system = state["system"]
        accept_baseline(system, selection, references)
        set_links(DETECT_CLUSTER, (1, 2), "900mbit")
        slowed = sessions(n, system, selection)
        cases = tally("2-node 1gbit cluster, links at 900mbit (-10 %), quiet", slowed)
        against_baseline(slowed)
        print(f"    MUST fail in {n} of {n}: failed "
              f"{share(sum(tc['verdict'] == 'fail' for tc in cases), len(cases))}")
        set_links(DETECT_CLUSTER, (1, 2), None)
        healthy = sessions(n, system, selection, busy=True)
        cases = tally("2-node 1gbit cluster, healthy links, one core busy", healthy)
        against_baseline(healthy)
        print(f"    MUST fail no case: failed "
              f"{share(sum(tc['verdict'] == 'fail' for tc in cases), len(cases))}")
        set_links(DETECT_CLUSTER, (1, 2), "800mbit")
        slowed = sessions(n, system, selection, busy=True)
        cases = tally("2-node 1gbit cluster, links at 800mbit (-20 %), one core busy", slowed)
        against_baseline(slowed)
        print(f"    MUST never pass: passed "
              f"{share(sum(tc['verdict'] == 'pass' for tc in cases), len(cases))}; "
              f"verdicts {verdicts_of(slowed)}")


def suspects_of(tc, kind="suspects"):
    return [tuple(s.get("names", [])) for s in (tc["record"].get("fleet") or {}).get(kind, [])]


def sweep_tally(label, results):
    cases = tally(label, results)
    naming = [tc for tc in cases if suspects_of(tc)]
    print(f"    sweeps (a case per MPI) naming a suspect: {share(len(naming), len(cases))}")
    lows = [low for low in map(lowest_pair, cases) if low is not None]
    if lows:
        # what a fleet floor must stay below, on this cluster: the margin
        # of its healthy pairs (profiles/virtual-cluster.yaml's min_change)
        print(f"    lowest pair of each sweep, of its fleet's median: "
              f"{', '.join(f'{low:.2f}' for low in sorted(lows))}")
    for tc in cases:
        if suspects_of(tc) or suspects_of(tc, "unconfirmed"):
            print(f"      {tc['name']}: suspects {suspects_of(tc) or 'none'}; unconfirmed "
                  f"{suspects_of(tc, 'unconfirmed') or 'none'}")
    return cases


def rates_at_largest_size(tc):
    """{(src, dst): bandwidth} of a sweep's pairs at its largest size ({}
    without pairs)."""
    pairs = (tc["record"].get("fleet") or {}).get("pairs") or []
    sizes = {size for p in pairs for size in p.get("bw_Mbps", {})}
    if not sizes:
        return {}
    size = max(sizes, key=float)
    return {(p["src"], p["dst"]): p["bw_Mbps"][size] for p in pairs if size in p["bw_Mbps"]}


def lowest_pair(tc):
    """The slowest pair's bandwidth over the fleet's median, at the
    sweep's largest size (None without pairs)."""
    rates = list(rates_at_largest_size(tc).values())
    return min(rates) / statistics.median(rates) if rates else None


def node_rate(tc, node):
    """The median bandwidth of `node`'s pairs over the other pairs' median,
    at the sweep's largest size (None without pairs)."""
    rates = rates_at_largest_size(tc)
    mine = [rate for pair, rate in rates.items() if node in pair]
    others = [rate for pair, rate in rates.items() if node not in pair]
    if not mine or not others:
        return None
    return statistics.median(mine) / statistics.median(others)


def sweep(runs):
    with cluster(SWEEP_CLUSTER, 5, "1gbit", mtu=9000) as state:
        system = state["system"]
        sweep_tally("sweep, healthy 5-node 1gbit cluster, quiet",
                    sessions(runs["sweep_healthy"], system, SWEEP))
        victim = state["nodes"][2]["name"]
        set_links(SWEEP_CLUSTER, (3,), "850mbit")
        try:
            cases = sweep_tally(f"sweep, node {victim} at 850mbit (0.85), quiet",
                                sessions(runs["sweep_fault"], system, SWEEP))
        finally:
            set_links(SWEEP_CLUSTER, (3,), None)
        for tc in cases:
            ratio = node_rate(tc, victim)
            print(f"      {tc['name']}: {victim}'s pairs at "
                  f"{'?' if ratio is None else f'{ratio:.2f}'} of the others' median")
        print(f"    MUST name {victim}: named it alone "
              f"{share(sum(suspects_of(tc) == [(victim,)] for tc in cases), len(cases))}")
        sweep_tally("sweep, healthy 5-node 1gbit cluster, one core busy",
                    sessions(runs["sweep_healthy"], system, SWEEP, busy=True))


def flags_lacking(capability):
    """The shipped container run flags (container_run.yaml) less `capability`,
    as NETBENCH_CONTAINER_FLAGS words."""
    entries = load_yaml(container.RUN_FLAGS_FILE)["run_flags"]
    return shlex.join(flag for entry in entries for flag in entry["flags"]
                      if flag != capability)


def slowdowns(tc):
    """The paired verdicts' figures of a parity case, in words (no figure:
    nan)."""
    def figure(entry, key):
        return math.nan if entry.get(key) is None else entry[key]
    return "; ".join(f"{var} {figure(entry, 'value'):.2f}x ({figure(entry, 'lo'):.2f}-"
                     f"{figure(entry, 'hi'):.2f}) {entry.get('verdict')}"
                     for var, entry in (tc["record"].get("verdicts") or {}).items())


def parity(runs):
    cases = tally("container parity, healthy, quiet",
                  sessions(runs["parity_healthy"], "local-container:container", PARITY))
    print(f"    MUST fail no case: failed "
          f"{share(sum(tc['verdict'] == 'fail' for tc in cases), len(cases))}")
    env = {container.RUN_FLAGS_ENV: flags_lacking(LACKED_CAPABILITY)}
    cases = tally(f"container parity, Open MPI shm, without {LACKED_CAPABILITY}, quiet",
                  sessions(runs["parity_slowed"], "local-container:container",
                           PARITY_SLOWED, env=env))
    print(f"    MUST fail in every run: failed "
          f"{share(sum(tc['verdict'] == 'fail' for tc in cases), len(cases))}")
    for tc in cases:
        print(f"      {tc['name']}: {slowdowns(tc)}")


def one_tune(profile, profiles):
    """`netbench tune` of `profile` on fresh nodes: (exit code, its record,
    wall seconds)."""
    from ..tuning import loop, record
    with cluster(TUNE_CLUSTER, 2, "1gbit", switch_mtu=9000) as state, \
            tempfile.TemporaryDirectory(prefix="netbench-verdictbench-") as reports:
        started = time.monotonic()
        code, folder = loop.run(profile, inventory=state["files"]["inventory"],
                                system=state["system"], checks=TUNE_CHECKS,
                                profiles=profiles or loop.PROFILES, reports_dir=Path(reports),
                                say=lambda line: None)
        return code, record.load(folder), time.monotonic() - started


def tune(runs):
    for label, busy, profiles_measured in (("quiet", False, TUNE_PROFILES),
                                           ("one core busy", True, TUNE_BUSY)):
        for profile, profiles, must_keep in profiles_measured:
            with busy_core(busy):
                results = [one_tune(profile, profiles) for _ in range(runs["tune"])]
            tune_tally(f"netbench tune {profile}, {label}", results, must_keep)


def tune_tally(label, results, must_keep):
    """A profile's tunes counted: kept (against what it must be, when it
    must), reverted exactly, measured again, and each decision's reason."""
    kept = sum(rec["decision"]["kept"] for _, rec, _ in results)
    exact = sum(rec.get("revert", {}).get("exact") is True for _, rec, _ in results)
    walls = [wall for _, _, wall in results]
    print(f"{label}: {len(results)} runs; wall median "
          f"{statistics.median(walls):.0f} s; exit codes "
          f"{sorted({code for code, _, _ in results})}")
    must = "" if must_keep is None else f"MUST {'be' if must_keep else 'NOT be'} kept: "
    print(f"    {must}kept {share(kept, len(results))}")
    print(f"    reverted and read back exact: {share(exact, len(results))}")
    retested = [rec for _, rec, _ in results if "retested" in rec["decision"]["numbers"]]
    print(f"    measured again (a loss beside a gain): {share(len(retested), len(results))}"
          + (f"; then kept {sum(r['decision']['kept'] for r in retested)}" if retested
             else ""))
    for _, rec, _ in results:
        print(f"      {first_line(rec['decision']['reason'])}")
        first = rec["decision"]["numbers"].get("retested")
        if first:
            print(f"        the first {first['rounds']} rounds: worse "
                  f"{first_line(reasons.named_changes(first['worse']))}")
    sys.stdout.flush()


PARTS = {"local": local, "detect": detect, "sweep": sweep, "parity": parity, "tune": tune}
#: parts that need root (a virtual cluster, podman's cgroup set-up)
AS_ROOT = {"detect", "sweep", "parity", "tune"}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.tools.verdictbench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"any of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--runs", type=int, help="runs of every measurement (default: the "
                                                 "protocol's, above)")
    args = parser.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        parser.error("--runs: at least 1")
    # a benchmark stopped with kill still takes its clusters down and stops
    # its spinning process (the finally blocks run on SystemExit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r} (parts: {', '.join(PARTS)})")
    runs = {key: args.runs or n for key, n in DEFAULT_RUNS.items()}
    for part in args.parts or list(PARTS):
        if part in AS_ROOT and os.geteuid() != 0:
            print(f"{part}: not measured: it needs root (a virtual cluster or podman)")
            continue
        started = time.monotonic()
        PARTS[part](runs)
        print(f"{part}: {time.monotonic() - started:.0f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

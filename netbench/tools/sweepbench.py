"""`make bench-sweep`: what the fabric sweep (LinkSweep) costs, measured on
virtual clusters of 8 and 16 nodes at 100 Mbit/s, each round's pairs at
once (the default) against one pair at a time side by side, and the quick
health check (the first few rounds only, each node against that many
partners), and the check's default sizes round by round at 100 Mbit/s and
on unshaped links (a fast fabric: each batch bound by the benchmark's time
budget); what the measured time per round predicts for fleets of 128,
1024 and 4096 nodes (docs/howto/find-bad-node.md, "What it costs": the
cost model); and what its analysis costs for fleets of 192 to 1024 nodes,
on synthetic measurements with one slow node: judging them (netbench.fleet)
and the page's sweep section (heat maps, per-node table); and judging 1024
nodes with their topology (netbench.fleet.components).  With
`--topology-sweeps N`: a 9-node cluster from a topology.conf of three
leaves under one spine (100 Mbit/s links), swept N times healthy, N times
with one leaf's uplink slowed and N times with one node slowed, and how
often the sweep named exactly that component (issue 36).  The clusters
need root; each is taken down after its sweeps, even on failure
(`--analysis-only` skips them).  Prints figures; asserts nothing.
"""

import argparse
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .. import vcluster
from ..fleet.attribution import partner_pairs
from ..fleet.judge import judge
from ..rfm import session

CLUSTER = "bsweep"
#: the fleets the model predicts for, and the partners of a partial sweep
FLEETS = (128, 1024, 4096)
PARTNERS = 4
#: the rounds of the quick health check: each node against 3 partners, so a
#: node bad with most of them is named, not only a pair
QUICK_ROUNDS = 3
#: the rate the clusters' links are shaped to: slow enough that 16 nodes'
#: rounds (8 pairs at once) stay within what 2 shared cores can move
RATE = "100mbit"
#: the message sizes of the side-by-side runs (1 MiB keeps one pair at a
#: time on 16 nodes, 120 pairs, within a few minutes); the check's default
#: sizes are timed round by round once, on the largest cluster
BENCH_SIZES = "1048576"
#: the model's fast fabric: unshaped namespace links, the fastest this host
#: emulates; each timed batch of the check's default sizes is then bound by
#: the benchmark's time budget, not by the link, as on a fabric of 10
#: Gbit/s or more (an 8 MiB message takes 7 ms there, the budget 50 ms).
#: A shaped 1 Gbit/s is not that: 4 pairs at once starve 2 shared cores
FAST = "none"
DEFAULT_SIZES = "rounds at once, 1+8 MiB"


def one_sweep(cluster, concurrent=True, rounds=0, sizes=BENCH_SIZES):
    """(wall seconds of the ReFrame session, the sweep's own seconds, its
    rounds, pairs) of one sweep of the running `cluster`; sweep seconds
    None when it did not finish (a sweep that finished but whose figures
    fell short, the host's CPUs starving a fast emulated link, still took
    its time)."""
    extra = []
    if rounds:
        extra += ["-S", f"LinkSweep.rounds={rounds}"]
    if sizes:
        extra += ["-S", f"LinkSweep.sizes={sizes}"]
    wall, fleet, code = swept_fleet(cluster, concurrent, extra)
    if fleet is None:
        return wall, None, 0, code
    return wall, fleet["sweep_seconds"], fleet.get("rounds", 0), len(fleet["pairs"]) // 2


def swept_fleet(cluster, concurrent, extra=()):
    """(wall seconds of the ReFrame session, the LinkSweep case's record
    `fleet`, ReFrame's exit code) of one sweep of the running `cluster`
    with MPICH; the fleet None when the sweep did not finish."""
    started = time.monotonic()
    proc = session.run_reframe(
        cluster["system"], "-t", "sweep", "-p", "^mpich$",
        "-S", f"LinkSweep.concurrent={'true' if concurrent else 'false'}", *extra,
        timeout=1800)
    wall = time.monotonic() - started
    cases = [tc for run in session.latest_report()["runs"][-1:]
             for tc in run["testcases"] if tc["name"].startswith("LinkSweep")]
    fleet = (cases[0].get("record") or {}).get("fleet") if cases else None
    if not fleet or fleet.get("sweep_seconds") is None:
        return wall, None, proc.returncode
    return wall, fleet, proc.returncode


def measured(nodes, quick_rounds, name=CLUSTER):
    """{(nodes, rate): {how: (wall, sweep seconds, rounds, pairs)}}: at
    RATE, rounds at once and one pair at a time on each cluster size, and
    on the largest the quick check; on the smallest, the check's default
    sizes round by round at RATE and on FAST links, the model's time per
    round on a slow and on a fast fabric."""
    plan = [(n, RATE) for n in nodes] + [(min(nodes), FAST)]
    results = {}
    for n, rate in plan:
        state, created = vcluster.up(name, nodes=n, rate=rate, mtu=1500)
        try:
            runs = {}
            if rate == RATE:
                runs["rounds at once"] = one_sweep(state)
                runs["one pair at a time"] = one_sweep(state, concurrent=False)
            if rate == RATE and n == max(nodes):
                runs[f"quick ({quick_rounds} rounds)"] = one_sweep(state, rounds=quick_rounds)
            if n == min(nodes):
                runs[DEFAULT_SIZES] = one_sweep(state, sizes=None)
            results[(n, rate)] = runs
        finally:
            if created:
                vcluster.down(name)
    return results


#: the fleets the analysis is timed on (#23: 192 nodes took 7.8 s to judge)
ANALYSED = (192, 512, 1024)
SIZES = (1 << 20, 8 << 20)


def synthetic_measurements(n, slow, seed=23):
    """Every ordered pair of n hosts as LinkSweep measures them: bandwidth
    at two sizes each way, latency one way, +-8 % noise; `slow` at a third
    of the rate."""
    rng = random.Random(seed)
    hosts = [f"node{i:04d}" for i in range(n)]
    out = {}
    for a in hosts:
        for b in hosts:
            if a != b:
                rate = 900.0 / (3 if slow in (a, b) else 1)
                out[(a, b)] = {"latency_us": 20 * rng.uniform(0.92, 1.08) if a < b else None,
                               "bw_Mbps": {s: rate * rng.uniform(0.92, 1.08) for s in SIZES}}
    return out


def sweep_page(measurements, verdict):
    """(seconds, bytes) of the page's sweep section for one LinkSweep case
    of these measurements, its record as the check writes it."""
    from ..report import sweep
    found = json.loads(verdict.to_json())
    fleet = {"hosts": sorted({h for pair in measurements for h in pair}), "findings": [],
             "suspects": found["suspects"], "remeasured": [], "sweep_seconds": None,
             "pairs": [{"src": a, "dst": b, "latency_us": f["latency_us"],
                        "bw_Mbps": {str(s): v for s, v in f["bw_Mbps"].items()}}
                       for (a, b), f in sorted(measurements.items())]}
    case = {"system": "site", "partition": "fabric", "environ": "mpich", "result": "fail",
            "record": {"section": "sweep", "label": "mpich", "fleet": fleet}}
    started = time.process_time()
    sections = sweep.sweep_sections([type("Session", (), {"testcases": [case]})])
    seconds = time.process_time() - started
    markup = sum(len(str(v)) for v in sections[0].values())
    return seconds, markup


def analysis_costs(fleets):
    """Print, per fleet size, the CPU seconds of judging and of the page's
    sweep section, its size, and this process's peak RSS."""
    print(f"{'nodes':>5} {'pairs':>8} {'judge (CPU s)':>13} {'named':>10} "
          f"{'page (CPU s)':>12} {'section':>8} {'peak RSS':>9}")
    for n in fleets:
        slow = f"node{n // 3:04d}"
        measurements = synthetic_measurements(n, slow)
        started = time.process_time()
        verdict = judge(measurements)
        judged = time.process_time() - started
        named = ",".join(s.names[0] for s in verdict.suspects) or "nobody"
        drawn, size = sweep_page(measurements, verdict)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:5} {len(measurements):8} {judged:13.2f} {named:>10} {drawn:12.2f} "
              f"{size / 2**20:5.1f} MB {peak:6.0f} MB")


#: the fleet judged with a topology: leaves of LEAF_NODES nodes, GROUP_LEAVES
#: leaves under each aggregation switch, those under one core
TOPOLOGY_NODES, LEAF_NODES, GROUP_LEAVES = 1024, 32, 8


def synthetic_fabric(n=TOPOLOGY_NODES, slow_uplink=None, seed=36):
    """(measurements, Topology) of n hosts on leaves of LEAF_NODES under
    aggregation switches under one core, every ordered pair measured as
    synthetic_measurements does; the pairs crossing `slow_uplink` (a
    leaf's name) at a third of the rate."""
    from ..fleet.topology import build
    rng = random.Random(seed)
    hosts = [f"node{i:04d}" for i in range(n)]
    leaves = [hosts[i:i + LEAF_NODES] for i in range(0, n, LEAF_NODES)]
    groups = [list(range(i, min(i + GROUP_LEAVES, len(leaves))))
              for i in range(0, len(leaves), GROUP_LEAVES)]
    # (line, switch, child switches, nodes), as topology.conf would give them
    entries = [(1, "core", [f"agg{g}" for g in range(len(groups))], [])]
    entries += [(2 + g, f"agg{g}", [f"leaf{k}" for k in group], [])
                for g, group in enumerate(groups)]
    entries += [(2 + len(groups) + k, f"leaf{k}", [], nodes) for k, nodes in enumerate(leaves)]
    leaf_of = {h: k for k, nodes in enumerate(leaves) for h in nodes}
    slow = None if slow_uplink is None else int(slow_uplink[len("leaf"):])
    out = {}
    for a in hosts:
        for b in hosts:
            if a != b:
                crossing = slow is not None and (leaf_of[a] == slow) != (leaf_of[b] == slow)
                rate = 900.0 / (3 if crossing else 1)
                out[(a, b)] = {"latency_us": 20 * rng.uniform(0.92, 1.08) if a < b else None,
                               "bw_Mbps": {s: rate * rng.uniform(0.92, 1.08) for s in SIZES}}
    return out, build("synthetic", entries)


def topology_costs():
    """Print the CPU seconds of judging a TOPOLOGY_NODES-node fleet with
    its topology (the components named), healthy and with a leaf's slow
    uplink: issue 36 wants it under 10 s."""
    print(f"{'nodes':>5} {'fault':>14} {'judge with topology (CPU s)':>27} {'named':>18}")
    for fault in (None, "leaf5"):
        measurements, topology = synthetic_fabric(slow_uplink=fault)
        started = time.process_time()
        verdict = judge(measurements, topology=topology)
        judged = time.process_time() - started
        named = ",".join(f"{s.kind} {s.component}" for s in verdict.suspects) or "nothing"
        print(f"{TOPOLOGY_NODES:5} {fault and fault + ' uplink' or 'none':>14} "
              f"{judged:27.2f} {named:>18}")


#: the fabric of the topology runs: LEAVES leaves of LEAF_SIZE nodes under
#: one spine, links at RATE; the fault slows to half of it
LEAVES, LEAF_SIZE, FAULT_RATE = 3, 3, "50mbit"


def fabric_conf(folder, name):
    """A topology.conf of LEAVES leaves under one spine, the nodes named as
    the virtual cluster names them (`<name>-n1` ...)."""
    lines = [f"SwitchName=spine Switches=leaf[1-{LEAVES}]"]
    for leaf in range(LEAVES):
        first = leaf * LEAF_SIZE + 1
        lines.append(f"SwitchName=leaf{leaf + 1} Nodes={name}-n[{first}-{first + LEAF_SIZE - 1}]")
    path = Path(folder) / "topology.conf"
    path.write_text("\n".join(lines) + "\n")
    return path


def topology_sweep(cluster, concurrent):
    """(seconds of the session, the components named, those named or left
    unconfirmed) of one sweep, each a set of (kind, component, direction);
    None for both when the sweep did not finish."""
    wall, fleet, _ = swept_fleet(cluster, concurrent, ["-S", f"LinkSweep.sizes={BENCH_SIZES}"])
    if fleet is None:
        return wall, None, None
    def components(suspects):
        return frozenset((x["kind"], x["component"], x["direction"]) for x in suspects)
    return wall, components(fleet["suspects"]), \
        components(fleet["suspects"] + fleet.get("unconfirmed", []))


def topology_repeats(sweeps, concurrent, name="bfab"):
    """{scenario: [(wall, named, found)] of `sweeps` sweeps} on the
    LEAVES x LEAF_SIZE fabric: healthy, leaf2's uplink slowed, node n5
    slowed (each fault cleared after its sweeps, even on failure)."""
    scenarios = {"healthy": (None, None, frozenset()),
                 "leaf2 uplink slowed": (vcluster.set_switch_link_fault, "leaf2",
                                         frozenset({("switch-link", "leaf2<->spine", "both")})),
                 "node n5 slowed": (vcluster.set_fault, f"{name}-n5",
                                    frozenset({("node", f"{name}-n5", "both")}))}
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        state, created = vcluster.up(name, nodes=LEAVES * LEAF_SIZE, rate=RATE, mtu=1500,
                                     topology=str(fabric_conf(folder, name)))
        try:
            for scenario, (set_fault, target, _) in scenarios.items():
                if set_fault:
                    set_fault(name, target, rate=FAULT_RATE)
                try:
                    results[scenario] = [topology_sweep(state, concurrent)
                                         for _ in range(sweeps)]
                finally:
                    if set_fault:
                        set_fault(name, target, clear_fault=True)
        finally:
            if created:
                vcluster.down(name)
    return {s: (scenarios[s][2], runs) for s, runs in results.items()}


def print_topology_repeats(results, concurrent):
    how = "rounds at once" if concurrent else "one pair at a time"
    print(f"{LEAVES * LEAF_SIZE} nodes on {LEAVES} leaves under one spine, {RATE}, faults "
          f"{FAULT_RATE}, 1 MiB, {how}:")
    print(f"{'scenario':<20} {'sweeps':>6} {'named exactly':>13} {'named or unconfirmed':>20} "
          f"{'unfinished':>10} {'median session (s)':>18}  other outcomes")
    for scenario, (expected, runs) in results.items():
        finished = [r for r in runs if r[1] is not None]
        exact = sum(1 for _, named, _ in finished if named == expected)
        found = sum(1 for _, _, both in finished if both == expected)
        others = sorted({", ".join(sorted(" ".join(c) for c in both)) or "nothing"
                         for _, _, both in finished if both != expected})
        median = statistics.median(r[0] for r in runs) if runs else 0
        print(f"{scenario:<20} {len(runs):6} {exact:13} {found:20} {len(runs) - len(finished):10} "
              f"{median:18.0f}  {'; '.join(others) or '-'}")


def rounds(n):
    return n - 1 if n % 2 == 0 else n


def predictions(per_pair, per_round, quick_round, default_rounds, quick_rounds):
    """Lines of the model: one pair at a time, n(n-1)/2 pairs x per-pair
    time; round by round, rounds x per-round time (a switch that does not
    block: a round's pairs share no link), with the check's default sizes
    at each measured rate (`default_rounds`: {rate: seconds per round}); the
    quick check, its rounds x per-round time; K partners each one pair at a
    time, nK/2 pairs."""
    lines = []
    for n in FLEETS:
        full = n * (n - 1) // 2
        partial = len(partner_pairs(n, PARTNERS))
        at = ", ".join(f"{shown(rate)} {duration(rounds(n) * t)}"
                       for rate, t in default_rounds.items())
        lines.append(
            f"{n:5} nodes, {rounds(n)} rounds at once: 1 MiB at {RATE} "
            f"{duration(rounds(n) * per_round)}; 1+8 MiB at {at}; "
            f"quick ({quick_rounds} rounds) {duration(quick_rounds * quick_round)}; "
            f"every pair one at a time {duration(full * per_pair)}; "
            f"{PARTNERS} partners each one at a time {duration(partial * per_pair)}")
    return lines


def shown(rate):
    return "a fast fabric (unshaped)" if rate == FAST else rate


def duration(seconds):
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"


def print_measured(results):
    print(f"{'nodes':>5} {'rate':>7} {'how':<26} {'pairs':>5} {'rounds':>6} "
          f"{'session (s)':>11} {'sweep (s)':>9} {'per pair':>8} {'per round':>9}")
    for (n, rate), runs in results.items():
        for how, (wall, swept, nrounds, pairs) in runs.items():
            if swept is None:
                print(f"{n:5} {rate:>7} {how:<26} the sweep failed ({wall:.0f} s): see "
                      f"reports/latest")
                continue
            print(f"{n:5} {'unshaped' if rate == FAST else rate:>7} {how:<26} {pairs:5} "
                  f"{nrounds:6} {wall:11.0f} "
                  f"{swept:9.1f} {swept / pairs:8.2f} {swept / max(nrounds, 1):9.2f}")


def per(run, unit):
    """A run's sweep seconds per pair (unit 3) or per round (2); None when
    it failed."""
    if not run or run[1] is None or not run[unit]:
        return None
    return run[1] / run[unit]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--quick-rounds", type=int, default=QUICK_ROUNDS)
    parser.add_argument("--cluster", default=CLUSTER, help="the virtual cluster's name")
    parser.add_argument("--analysed", type=int, nargs="+", default=list(ANALYSED),
                        help="fleet sizes whose judging and page are timed")
    parser.add_argument("--analysis-only", action="store_true",
                        help="time the analysis only: no virtual cluster, no root")
    parser.add_argument("--topology-sweeps", type=int, metavar="N",
                        help="only the 9-node fabric: N sweeps per scenario")
    parser.add_argument("--one-pair-at-a-time", action="store_true",
                        help="with --topology-sweeps: the sweeps measure one pair at a time")
    args = parser.parse_args(argv)
    if args.topology_sweeps:
        concurrent = not args.one_pair_at_a_time
        print(f"measured with MPICH, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}:")
        print_topology_repeats(topology_repeats(args.topology_sweeps, concurrent), concurrent)
        return 0
    analysis_costs(args.analysed)
    print()
    topology_costs()
    if args.analysis_only:
        return 0
    print(f"\nmeasured with MPICH, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}:")
    results = measured(args.nodes, args.quick_rounds, args.cluster)
    print_measured(results)
    largest, smallest = results[(max(args.nodes), RATE)], min(args.nodes)
    per_pair = per(largest["one pair at a time"], 3)
    per_round = per(largest["rounds at once"], 2)
    quick = per(largest[f"quick ({args.quick_rounds} rounds)"], 2)
    slow = per(results[(smallest, RATE)][DEFAULT_SIZES], 2)
    fast = per(results[(smallest, FAST)][DEFAULT_SIZES], 2)
    if None in (per_pair, per_round, quick, slow, fast):
        return 1
    print(f"\nmodel: {max(args.nodes)} nodes at {RATE}, 1 MiB: {per_pair:.2f} s per pair one "
          f"at a time, {per_round:.2f} s per round, quick {quick:.2f} s per round; "
          f"1+8 MiB per round on {smallest} nodes: {slow:.2f} s at {RATE}, {fast:.2f} s at "
          f"{shown(FAST)}")
    print("\n".join(predictions(per_pair, per_round, quick, {RATE: slow, FAST: fast},
                                 args.quick_rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

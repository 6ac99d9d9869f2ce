"""`make bench-sweep`: what the fabric sweep (LinkSweep) costs, measured on
virtual clusters of 3 to 8 nodes at 1 Gbit/s, and what the measured cost
per pair predicts for fleets of 256 and 1024 nodes (docs/howto/find-bad-node.md, "What it costs": the cost
model); and what its analysis costs for fleets of 192 to 1024 nodes, on
synthetic measurements with one slow node: judging them (netbench.fleet)
and the page's sweep section (heat maps, per-node table); and judging 1024
nodes with their topology (netbench.fleet.components).  The clusters
need root; each is taken down after its sweep, even on failure
(`--analysis-only` skips them).  Prints figures; asserts nothing.
"""

import argparse
import json
import random
import resource
import sys
import time

from .. import vcluster
from ..fleet.judge import judge, partner_pairs
from ..rfm import session

CLUSTER = "bsweep"
#: the fleets the model predicts for, and the partners of a partial sweep
FLEETS = (256, 1024)
PARTNERS = 4


def one_sweep(nodes, concurrent=False):
    """(wall seconds of the ReFrame session, the sweep's own seconds, pairs)."""
    state, created = vcluster.up(CLUSTER, nodes=nodes, rate="1gbit", mtu=9000)
    try:
        extra = ["-S", "LinkSweep.concurrent=true"] if concurrent else []
        started = time.monotonic()
        proc = session.run_reframe(state["system"], "-t", "sweep", "-p", "^mpich$", *extra,
                                   timeout=1800)
        wall = time.monotonic() - started
        cases = [tc for run in session.latest_report()["runs"][-1:]
                 for tc in run["testcases"] if tc["name"].startswith("LinkSweep")]
        if proc.returncode != 0 or not cases:
            return wall, None, 0
        fleet = cases[0]["record"]["fleet"]
        return wall, fleet["sweep_seconds"], len(fleet["pairs"]) // 2
    finally:
        if created:
            vcluster.down(CLUSTER)


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


def rounds(n):
    return n - 1 if n % 2 == 0 else n


def predictions(per_pair, per_round):
    """Lines of the model: sequential n(n-1)/2 pairs x per-pair time;
    concurrent rounds x per-round time (a non-blocking switch); a partial
    sweep of K partners per node, nK/2 pairs."""
    lines = []
    for n in FLEETS:
        full = n * (n - 1) // 2
        partial = len(partner_pairs(n, PARTNERS))
        lines.append(
            f"{n:5} nodes: every pair one at a time {hours(full * per_pair)}, "
            f"rounds concurrently {hours(rounds(n) * per_round)}, "
            f"{PARTNERS} partners each ({partial} pairs) {hours(partial * per_pair)}")
    return lines


def hours(seconds):
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[3, 4, 5, 6, 7, 8])
    parser.add_argument("--analysed", type=int, nargs="+", default=list(ANALYSED),
                        help="fleet sizes whose judging and page are timed")
    parser.add_argument("--analysis-only", action="store_true",
                        help="time the analysis only: no virtual cluster, no root")
    args = parser.parse_args(argv)
    analysis_costs(args.analysed)
    print()
    topology_costs()
    if args.analysis_only:
        return 0
    print()
    print(f"{'nodes':>5} {'pairs':>5} {'session (s)':>11} {'sweep (s)':>9} {'per pair (s)':>12}")
    per_pair = []
    for n in args.nodes:
        wall, swept, pairs = one_sweep(n)
        if swept is None:
            print(f"{n:5} {'':5} {wall:11.0f} the sweep failed: see reports/latest")
            continue
        per_pair.append(swept / pairs)
        print(f"{n:5} {pairs:5} {wall:11.0f} {swept:9.1f} {swept / pairs:12.2f}")
    if not per_pair:
        return 1
    largest = max(args.nodes)
    _, swept, _ = one_sweep(largest, concurrent=True)
    per_round = swept / rounds(largest) if swept else max(per_pair)
    print(f"{largest} nodes, each round's pairs at once: "
          f"{swept:.1f} s, {per_round:.2f} s per round" if swept else "concurrent sweep failed")
    typical = sorted(per_pair)[len(per_pair) // 2]
    print(f"\nmodel, {typical:.2f} s per pair (median above), {per_round:.2f} s per round:")
    print("\n".join(predictions(typical, per_round)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

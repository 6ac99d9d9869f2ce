"""`make bench-sweep`: what the fabric sweep (LinkSweep) costs, measured on
virtual clusters of 3 to 8 nodes at 1 Gbit/s, and what the measured cost
per pair predicts for fleets of 256 and 1024 nodes (README: the cost
model).  Needs root (virtual clusters); each cluster is taken down after
its sweep, even on failure.  Prints figures; asserts nothing.
"""

import argparse
import sys
import time

from . import session, vcluster
from .fleet.judge import partner_pairs

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
    args = parser.parse_args(argv)
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

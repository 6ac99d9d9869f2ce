"""`make bench-sweep-calibration`: what the fabric sweep (LinkSweep)
measures on a healthy link, as a fraction of its line rate, the figure
thresholds.yaml's `sweep: line_rate_fraction` is calibrated by.

The sweep streams one way with a 2 MiB window at 1 and 8 MiB, which is not
what a ping-pong's peak measures: its fleet must be held to a fraction of
the line rate measured for the sweep itself.  This brings up a healthy
5-node virtual cluster with 1 Gbit/s links, runs SWEEPS sweeps with both
wheel MPIs and prints, per sweep, MPI and size, the fleet median (the
median of every directed pair) and the check's own fleet figure (its
`peak_bw`, the median without the node that drags it most), over the line
rate.  Needs root; the cluster is taken down however it ends.  Prints
figures; asserts nothing.
"""

import argparse
import os
import statistics
import time

from .. import vcluster
from ..rfm import session
from .load import busy_core

CLUSTER = "bcalib"
MPIS = "^(mpich|openmpi)$"


def sweep_figures(report):
    """[(environment, {size: median over directed pairs}, peak_bw)] of the
    report's LinkSweep cases."""
    out = []
    for run in report["runs"][-1:]:
        for tc in run["testcases"]:
            if not tc["name"].startswith("LinkSweep"):
                continue
            pairs = tc["record"]["fleet"]["pairs"]
            sizes = sorted({int(s) for p in pairs for s in p["bw_Mbps"]})
            medians = {s: statistics.median(p["bw_Mbps"][str(s)] for p in pairs
                                            if str(s) in p["bw_Mbps"]) for s in sizes}
            # ReFrame's perfvalues: {"system:partition:variable": [value, ...]}
            peak = next((v[0] for k, v in (tc.get("perfvalues") or {}).items()
                         if k.endswith(":peak_bw")), None)
            out.append((tc["environ"], medians, peak))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--rate-mbps", type=int, default=1000)
    parser.add_argument("--busy", action="store_true",
                        help="keep one core busy with a spinning process during the sweeps")
    args = parser.parse_args(argv)
    state, created = vcluster.up(CLUSTER, nodes=args.nodes, rate=f"{args.rate_mbps}mbit",
                                 mtu=9000)
    fractions = {}
    try:
        for attempt in range(args.sweeps):
            started = time.monotonic()
            with busy_core(args.busy):
                session.run_reframe(state["system"], "-t", "sweep", "-p", MPIS,
                                    timeout=1800)
            wall = time.monotonic() - started
            for env, medians, peak in sweep_figures(session.latest_report()):
                figures = ", ".join(f"{size // 1048576} MiB {m:.0f} Mbit/s "
                                    f"({m / args.rate_mbps:.3f})"
                                    for size, m in medians.items())
                print(f"sweep {attempt + 1} ({wall:.0f} s) {env:8} {figures}; "
                      f"check's peak_bw {peak}; load {os.getloadavg()[0]:.1f}", flush=True)
                for size, m in medians.items():
                    fractions.setdefault(size, []).append(m / args.rate_mbps)
    finally:
        if created:
            vcluster.down(CLUSTER)
    for size, values in sorted(fractions.items()):
        print(f"{size // 1048576} MiB: fleet medians / line rate {min(values):.3f}-"
              f"{max(values):.3f}, median {statistics.median(values):.3f} "
              f"({len(values)} sweeps x MPIs)")


if __name__ == "__main__":
    main()

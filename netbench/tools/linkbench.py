"""`make bench-link` (root): how close MPI gets to an emulated link's rate.

A 2-node virtual cluster with 1 Gbit/s links; each wheel MPI runs the
8 MiB ping-pong over TCP, untuned (MTU 1500, the default) and tuned (MTU
9000: seed 004's jumbo frames), several times each, interleaved.  Prints
the median bandwidth as a fraction of the line rate (target for the tuned
configuration: at least 0.95; seed 000 reached 0.8-0.9 of theoretical
peak) with its range.  Asserts nothing.
"""

import argparse
import statistics
import sys
import tempfile

from .. import benchspec, vcluster
from ..probe import discovery
from .benchrun import Benchmark

CONFIGS = (("untuned", 1500), ("tuned", 9000))
SIZE = 8 * 1024 * 1024


def bandwidth_8mib(bench, state, transport):
    launch = bench.measure_on_cluster(state, 2, 1,
                                      *benchspec.command_line("pingpong", sizes=[SIZE]),
                                      transport=transport)
    return next(r["Mbps"] for r in launch["rows"] if r["bytes"] == SIZE)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.tools.linkbench", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--link", default="1gbit")
    args = parser.parse_args(argv)
    families = discovery.load_families()
    mpis = [m for m in discovery.discover(families=families) if m.source == "wheel"]
    name = "lbench"
    try:
        state, _ = vcluster.up(name, nodes=2, rate=args.link)
    except vcluster.VclusterError as err:
        print(f"netbench linkbench: {err}", file=sys.stderr)
        return 2
    rate = state["link"]["rate_mbps"]
    results = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            benches = {m.name: Benchmark.build(m, families, tempfile.mkdtemp(dir=tmp))
                       for m in mpis}
            for _ in range(args.runs):
                for label, mtu in CONFIGS:        # interleaved: noise hits both
                    vcluster.set_mtu(name, mtu)
                    for m in mpis:
                        transport = discovery.preferred_network_transport(m.transports)
                        key = (m.name, transport, label, mtu)
                        results.setdefault(key, []).append(
                            bandwidth_8mib(benches[m.name], state, transport))
    finally:
        vcluster.down(name)
    print(f"8 MiB MPI ping-pong across 2 namespace nodes, links {args.link} "
          f"(tbf, {rate:.0f} Mbit/s), {args.runs} runs each, medians:")
    print(f"{'MPI':10} {'transport':9} {'config':8} {'MTU':>5} {'Mbit/s':>8} "
          f"{'of line':>8} {'range':>17}")
    for (mpi, transport, label, mtu), values in sorted(results.items()):
        med = statistics.median(values)
        print(f"{mpi:10} {transport:9} {label:8} {mtu:5d} {med:8.1f} {med / rate:8.3f} "
              f"{min(values) / rate:8.3f}-{max(values) / rate:.3f}")
    tuned = [statistics.median(v) / rate for k, v in results.items() if k[2] == "tuned"]
    verdict = "met" if tuned and min(tuned) >= 0.95 else "NOT met"
    print(f"target: tuned large-message bandwidth >= 0.95 of line rate: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

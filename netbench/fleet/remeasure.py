"""`python -m netbench.fleet.remeasure [--bandwidth-only] SWEEP_OUTPUT`: the
pairs a sweep must measure again before anything is named (repeat before
alarm), as the benchmark's `-L` list of rank pairs (`0:1,2:3`), or nothing
when every pair is within its band.

LinkSweep's job script runs it between the sweep and the re-measurement, on
the node that runs the job script, so the second launch follows the first
within the same job (one allocation, one launch per pass).  Pure: it reads
one file and prints one line.
"""

import sys

from ..results.sweep import parse_sweep
from .judge import judge, pairs_to_remeasure


def rank_pairs(sweep, host_pairs):
    """`-L` text for directed host pairs: each unordered pair once, by the
    ranks that ran on those hosts (the benchmark measures both directions
    of a pair it is given)."""
    rank_of = {host: rank for rank, host in sorted(sweep.hosts.items(), reverse=True)}
    wanted = sorted({tuple(sorted((rank_of[a], rank_of[b]))) for a, b in host_pairs})
    return ",".join(f"{a}:{b}" for a, b in wanted)


def without_latency(measurements):
    return {pair: {**figs, "latency_us": None} for pair, figs in measurements.items()}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # --bandwidth-only: a partition whose latency is not judged (a link that
    # emulates only its rate) has no latency to re-measure either
    bandwidth_only = "--bandwidth-only" in argv
    files = [a for a in argv if a != "--bandwidth-only"]
    if len(files) != 1:
        print("usage: python -m netbench.fleet.remeasure [--bandwidth-only] SWEEP_OUTPUT",
              file=sys.stderr)
        return 2
    with open(files[0], errors="replace") as f:
        sweep = parse_sweep(f.read())
    measurements = sweep.measurements()
    if bandwidth_only:
        measurements = without_latency(measurements)
    print(rank_pairs(sweep, pairs_to_remeasure(judge(measurements))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

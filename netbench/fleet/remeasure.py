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


class Unusable(Exception):
    """The sweep output cannot say what to measure again (one line)."""


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
    try:
        print(pairs_to_measure_again(files[0], bandwidth_only))
    except OSError as err:
        print(f"netbench.fleet.remeasure: {files[0]}: cannot read: {err.strerror}",
              file=sys.stderr)
        return 2
    except (Unusable, ValueError) as err:
        print(f"netbench.fleet.remeasure: {files[0]}: {err}", file=sys.stderr)
        return 2
    return 0


def pairs_to_measure_again(path, bandwidth_only=False):
    """The `-L` text for the sweep output in `path`; empty when every pair
    is within its band, or when the sweep did not finish (a node that went
    silent would fail the second launch too; the check names it).
    ValueError (a figure that is not finite) or Unusable otherwise."""
    with open(path, errors="replace") as f:
        sweep = parse_sweep(f.read())
    if sweep.sweep_seconds is None:
        print(f"netbench.fleet.remeasure: {path}: the sweep did not finish: nothing is "
              f"measured again", file=sys.stderr)
        return ""
    unplaced = sorted({rank for pair in sweep.by_rank for rank in pair} - set(sweep.hosts))
    if unplaced:
        raise Unusable(f"no '# rank R host H' line for rank {unplaced[0]}: the output's "
                       f"header is cut or edited")
    measurements = sweep.measurements()
    if bandwidth_only:
        measurements = without_latency(measurements)
    return rank_pairs(sweep, pairs_to_remeasure(judge(measurements)))


if __name__ == "__main__":
    sys.exit(main())

"""Container parity by the judging rule's paired form (rule.decide_paired):
the median of the interleaved rounds' container/host ratios
(results.container_parity) and its interval against MAX_SLOWDOWN.

    python -m netbench.judgement.parity --stagedir D [--max-bytes N] ...

exits 0 when the rounds in D leave parity undecided: the job asks before
measuring more rounds, as every check's job asks netbench.judgement.remeasure.
"""

import argparse
import sys

from ..results.container_parity import MAX_SLOWDOWN, round_figures, round_ratios
from .rule import UNDECIDED, Bound, decide_paired


def parity_decisions(runs, min_rounds, max_rounds):
    """{figure: netbench.judgement Decision} of container parity: the
    median of the rounds' ratios and its order-statistic interval against
    MAX_SLOWDOWN (judgement.rule.decide_paired)."""
    bound = Bound("upper", MAX_SLOWDOWN)
    return {figure: decide_paired(ratios, bound, min_rounds, max_rounds)
            for figure, ratios in round_ratios(runs).items()}


def parity_undecided(stagedir, max_bytes, min_rounds, max_rounds):
    """The job's question between batches of rounds: measure again?"""
    decisions = parity_decisions(round_figures(stagedir, max_bytes), min_rounds, max_rounds)
    return any(d.verdict == UNDECIDED for d in decisions.values())


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.judgement.parity",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stagedir", default=".", help="the rounds' folder")
    parser.add_argument("--max-bytes", type=int, default=1048576,
                        help="the message size of the bandwidth figure")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds before anything is decided")
    parser.add_argument("--max-rounds", type=int, default=20, help="rounds at most")
    args = parser.parse_args(argv)
    return 0 if parity_undecided(args.stagedir, args.max_bytes, args.rounds,
                                 args.max_rounds) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Container parity by the verdict model's paired form
(model.judge_paired, kind "paired"): the median of the interleaved rounds'
container/host ratios (results.container_parity) and its interval against
1 + judging.yaml's min_change.paired.

The two launches of a round share the host's load of their moment, so the
load cancels in their ratio and is no excuse: a container slower in every
round fails, busy host or not (a busy host that moves the rounds' ratios
either way widens the interval, which the rounds measured again narrow).

    python -m netbench.judgement.parity --stagedir D --knobs F [--max-bytes N] ...

exits 0 when the rounds in D leave parity undecided: the job asks before
measuring more rounds.  F holds the check's knobs (knobs.Knobs.to_json), so
the job decides by the same knobs as the check.
"""

import argparse
import sys

from ..datafiles import DataError, load_json
from ..results.container_parity import round_figures, round_ratios
from . import knobs as judging_knobs
from .model import UNDECIDED, Bound, judge_paired

KIND = "paired"


def limit(knobs):
    """The container/host ratio beyond which parity fails."""
    return 1 + knobs.min_change[KIND]


def bound(knobs):
    """limit() as the Bound the record and ReFrame's reference show."""
    return Bound("upper", limit(knobs))


def parity_decisions(runs, min_rounds, max_rounds, knobs):
    """{figure: model.Decision} of container parity: the median of the
    rounds' ratios and its order-statistic interval against limit()."""
    return {figure: judge_paired(ratios, knobs, min_rounds, max_rounds, kind=KIND)
            for figure, ratios in round_ratios(runs).items()}


def parity_undecided(stagedir, max_bytes, min_rounds, max_rounds, knobs):
    """The job's question between batches of rounds: measure again?"""
    decisions = parity_decisions(round_figures(stagedir, max_bytes), min_rounds, max_rounds,
                                 knobs)
    return any(d.verdict == UNDECIDED for d in decisions.values())


def knobs_of(path):
    """The knobs the check sent to its job (knobs.Knobs.to_json in `path`)."""
    data = load_json(path, kind="record")
    return judging_knobs.from_json(data, str(path))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.judgement.parity",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stagedir", default=".", help="the rounds' folder")
    parser.add_argument("--knobs", required=True,
                        help="the check's knobs as JSON (judgement.knobs.Knobs.to_json)")
    parser.add_argument("--max-bytes", type=int, default=1048576,
                        help="the message size of the bandwidth figure")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds before anything is decided")
    parser.add_argument("--max-rounds", type=int, default=20, help="rounds at most")
    args = parser.parse_args(argv)
    try:
        knobs = knobs_of(args.knobs)
    except DataError as err:
        print(f"netbench.judgement.parity: {err}", file=sys.stderr)
        return 2
    return 0 if parity_undecided(args.stagedir, args.max_bytes, args.rounds,
                                 args.max_rounds, knobs) else 1


if __name__ == "__main__":
    sys.exit(main())

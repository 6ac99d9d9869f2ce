"""A loss along a curve: one rule for the learned baseline's sizes, the
tuning decision's and the sweep's.

A path's loss touches a range of message sizes (a slower link every size
it bounds, a protocol every size past its switch), while a curve of ~20
sizes each judged on its own sees single sizes land beyond their band by
chance.  So a curve fails only where `min_span` (judging.yaml)
neighbouring sizes failed, one after the other.  Sizes that could not be
told (inconclusive, undecided) are unknowns, never part of a loss: two
failures with only such sizes between them leave the curve inconclusive,
not failed (a tuning once was reverted on 8 B and 2 KiB failing with
eight undecided sizes between).  A run of sizes that did not pass,
shorter than `min_span`, is reported and decides nothing."""

from .model import FAIL, INCONCLUSIVE, PASS, UNDECIDED, case_verdict


def runs_of(verdicts, kinds):
    """(start, end) of every run of consecutive verdicts in `kinds`."""
    runs, start = [], None
    for i, v in enumerate(list(verdicts) + [None]):
        if v in kinds and start is None:
            start = i
        elif v not in kinds and start is not None:
            runs.append((start, i))
            start = None
    return runs


def losses(verdicts, min_span):
    """The indexes of the failed sizes that make a loss: every failure of
    a curve shorter than `min_span` (held to every size), else those in a
    run of at least `min_span` neighbouring failures."""
    verdicts = list(verdicts)
    if len(verdicts) < min_span:
        return [i for i, v in enumerate(verdicts) if v == FAIL]
    return [i for start, end in runs_of(verdicts, (FAIL,)) if end - start >= min_span
            for i in range(start, end)]


def curve_span(verdicts, min_span):
    """(the curve's verdict, the indexes of sizes that decided nothing):
    `verdicts` are the sizes' in size order.  The curve fails on a loss
    (`losses`); otherwise a run of sizes that did not pass, at least
    `min_span` long, leaves it undecided while a size of the run is, else
    inconclusive, and a shorter run is set aside.  Curves shorter than
    `min_span` are held to every size."""
    verdicts = list(verdicts)
    if len(verdicts) < min_span:
        return case_verdict(verdicts), []
    aside, deciding = [], []
    lost = set(losses(verdicts, min_span))
    for start, end in runs_of(verdicts, (FAIL, INCONCLUSIVE, UNDECIDED)):
        run = verdicts[start:end]
        if lost.intersection(range(start, end)):
            deciding.append(FAIL)
        elif end - start < min_span:
            aside.extend(range(start, end))
        else:
            deciding.append(UNDECIDED if UNDECIDED in run else INCONCLUSIVE)
    return case_verdict(deciding or [PASS]), aside

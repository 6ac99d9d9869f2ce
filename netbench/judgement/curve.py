"""A loss along a curve: one rule for the learned baseline's sizes, the
tuning decision's and the sweep's.

A path's loss touches a range of message sizes (a slower link every size
it bounds, a protocol every size past its switch), while a curve of ~20
sizes each judged on its own sees single sizes land beyond their band by
chance.  So a run of neighbouring sizes that did not pass decides the
curve only when it spans at least `min_span` sizes (judging.yaml); a
shorter run is reported and decides nothing."""

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


def curve_span(verdicts, min_span):
    """(the curve's verdict, the indexes of sizes that decided nothing):
    `verdicts` are the sizes' in size order.  A run of sizes that did not
    pass, shorter than `min_span`, is set aside; a longer one fails the
    curve when at least `min_span` of its sizes failed, else leaves it
    inconclusive (or undecided while a size is).  Curves shorter than
    `min_span` are held to every size."""
    verdicts = list(verdicts)
    if len(verdicts) < min_span:
        return case_verdict(verdicts), []
    aside, deciding = [], []
    for start, end in runs_of(verdicts, (FAIL, INCONCLUSIVE, UNDECIDED)):
        run = verdicts[start:end]
        if end - start < min_span:
            aside.extend(range(start, end))
        elif run.count(FAIL) >= min_span:
            deciding.append(FAIL)
        else:
            deciding.append(UNDECIDED if UNDECIDED in run else INCONCLUSIVE)
    return case_verdict(deciding or [PASS]), aside

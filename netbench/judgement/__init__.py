"""Deciding every comparison netbench makes by one model (model.py): a
figure against a reference, the host's conditions against the reference's
(conditions.py), a loss along a curve (curve.py), with the knobs of
judging.yaml and its profiles (knobs.py); the figures and their intervals
read from a record's parsed runs (figures.py), and the job's own question,
whether to launch again (remeasure.py).  Pure: no ReFrame, no subprocess."""

from .model import (FAIL, INCONCLUSIVE, PASS, UNDECIDED, Bound, Decision, Estimate,
                    Reference, Replicate, case_verdict, judge, judge_paired)

__all__ = ["FAIL", "INCONCLUSIVE", "PASS", "UNDECIDED", "Bound", "Decision", "Estimate",
           "Reference", "Replicate", "case_verdict", "judge", "judge_paired"]

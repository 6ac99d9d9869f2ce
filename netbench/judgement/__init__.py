"""Deciding a judged figure from the evidence of its launches: one rule for
every check (rule.py), the figures and their intervals read from the
record's parsed runs (figures.py), and the job's own question, whether to
launch again (remeasure.py).  Pure: no ReFrame, no subprocess."""

from .rule import (FAIL, INCONCLUSIVE, PASS, UNDECIDED, Bound, Decision, Estimate,
                   case_verdict, decide, load_rule)

__all__ = ["FAIL", "INCONCLUSIVE", "PASS", "UNDECIDED", "Bound", "Decision", "Estimate",
           "case_verdict", "decide", "load_rule"]

"""netbench's one verdict model: a figure against a reference.

Every comparison is the same question.  The reference is a documented
threshold, a learned baseline, the paired other side (container parity,
tuning's before), the fleet's own pairs or another session; each kind has
its smallest change that counts (judging.yaml's min_change).  Figures are
oriented so that larger is worse (a time over its reference, a reference
rate over the figure), and the replicate is a whole launch, never a batch
inside one.

Against a reference measured elsewhere (`judge`): a busy host only ever
adds time, so

    pass          some launch's interval lies wholly within the bound
    fail          at least `min_to_fail` launches, every one so far, lie
                  wholly beyond it, under the reference's conditions (or
                  beyond what differing conditions explain)
    undecided     neither, while the budget of launches lasts
    inconclusive  neither, with the budget spent, or a CPU-bound miss in
                  every launch that the host's conditions, differing from
                  the reference's, explain: the difference is named

Against a paired reference (`judge_paired`) the two sides of a round share
its moment's load, which can move their ratio either way: the median of
the rounds' ratios and its distribution-free interval decide.

Decisions carry a reason code and its numbers; report/reasons.py renders
them in words.  Pure: no ReFrame, no files but the knobs.
"""

import dataclasses
import math

from . import conditions as host_conditions

PASS, FAIL, UNDECIDED, INCONCLUSIVE = "pass", "fail", "undecided", "inconclusive"
#: kinds of reference whose bound already holds the smallest change that
#: counts: a learned baseline's band is never narrower than it (baseline.band)
CHANGE_IN_BOUND = ("baseline",)
#: a case's verdicts, worst first: the case takes the first any figure has
SEVERITY = (FAIL, INCONCLUSIVE, UNDECIDED, PASS)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """One replicate's figure and the interval its own samples give it."""
    value: float
    lo: float
    hi: float

    @classmethod
    def point(cls, value):
        return cls(value, value, value)

    def to_json(self):
        return {"value": self.value, "lo": self.lo, "hi": self.hi}


@dataclasses.dataclass(frozen=True)
class Bound:
    """Where a figure fails: above `value` (side "upper": a time) or below
    it (side "lower": a rate)."""
    side: str
    value: float

    def __post_init__(self):
        if self.side not in ("upper", "lower"):
            raise ValueError(f"a bound's side is upper or lower, not {self.side!r}")

    def oriented(self, x):
        """x against the bound, larger worse: 1 at the bound."""
        if self.side == "upper":
            return x / self.value if self.value else math.inf
        return self.value / x if x > 0 else math.inf

    def oriented_estimate(self, e):
        """(ratio, low, high) of an Estimate, larger worse."""
        ends = sorted((self.oriented(e.lo), self.oriented(e.hi)))
        return self.oriented(e.value), ends[0], ends[1]

    def within(self, e, change=0.0):
        return self.oriented_estimate(e)[2] <= 1 + change

    def beyond(self, e, change=0.0):
        return self.oriented_estimate(e)[1] > 1 + change

    def words(self):
        return f"{'at most' if self.side == 'upper' else 'at least'} {self.value:.4g}"

    def to_json(self):
        return {"side": self.side, "value": self.value}


@dataclasses.dataclass(frozen=True)
class Reference:
    """What a figure is held to: its bound, the kind of reference (whose
    smallest meaningful change applies) and the conditions it was measured
    under (None: a documented figure, taken on a quiet host)."""
    bound: Bound
    kind: str = "threshold"
    conditions: dict = None


@dataclasses.dataclass(frozen=True)
class Replicate:
    """One whole launch: its figure and the conditions it ran under
    ({"nodes": {host: {"cpu_pressure": %}}, "core_round_trip_ns": ns})."""
    estimate: Estimate
    conditions: dict = None


@dataclasses.dataclass(frozen=True)
class Decision:
    verdict: str
    #: the figure the case reports: the replicate that decided, else the best
    value: float
    lo: float
    hi: float
    launches: int
    #: why, as a code (report/reasons.py renders it) and its numbers
    code: str
    numbers: dict = dataclasses.field(default_factory=dict)

    def to_json(self):
        """No figure (no round finished, no launch) is null in a record,
        never NaN, which JSON does not have."""
        return {"verdict": self.verdict, **{k: v if finite(v) else None for k, v in (
                    ("value", self.value), ("lo", self.lo), ("hi", self.hi))},
                "launches": self.launches, "code": self.code, "numbers": self.numbers}


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def finite_replicates(replicates):
    return [r for r in replicates
            if all(finite(x) for x in (r.estimate.value, r.estimate.lo, r.estimate.hi))]


def smallest_change(kind, knobs):
    """The change beyond a reference's bound that counts, as a fraction."""
    return 0.0 if kind in CHANGE_IN_BOUND else knobs.min_change[kind]


def _numbers(best, reference, change, n):
    ratio, lo, hi = reference.bound.oriented_estimate(best.estimate)
    return {"launches": n, "value": best.estimate.value, "lo": best.estimate.lo,
            "hi": best.estimate.hi, "bound": reference.bound.value,
            "side": reference.bound.side, "kind": reference.kind, "min_change": change,
            "ratio": ratio / (1 + change)}


def _decision(verdict, pick, n, code, numbers):
    e = pick.estimate
    return Decision(verdict, e.value, e.lo, e.hi, n, code, numbers)


def judge(replicates, reference, knobs, cpu_bound=True):
    """The Decision on one figure from its replicates so far."""
    replicates = finite_replicates(replicates)
    n = len(replicates)
    if not n:
        return Decision(INCONCLUSIVE, math.nan, math.nan, math.nan, 0, "no_launch",
                        {"bound": reference.bound.value, "side": reference.bound.side})
    change = smallest_change(reference.kind, knobs)
    bound = reference.bound
    best = min(replicates, key=lambda r: bound.oriented(r.estimate.value))
    numbers = _numbers(best, reference, change, n)
    passing = [r for r in replicates if bound.within(r.estimate, change)]
    if passing:
        pick = min(passing, key=lambda r: bound.oriented(r.estimate.value))
        return _decision(PASS, pick, n, "within", _numbers(pick, reference, change, n))
    if n >= knobs.min_to_fail and all(bound.beyond(r.estimate, change) for r in replicates):
        return _beyond_everywhere(replicates, best, reference, knobs, cpu_bound, numbers)
    differences = host_conditions.differences(best.conditions, reference.conditions,
                                              knobs.conditions)
    numbers = {**numbers, **({"conditions": differences} if differences else {})}
    if n < knobs.launches:
        return _decision(UNDECIDED, best, n, "straddles", numbers)
    values = sorted(bound.oriented(r.estimate.value) for r in replicates)
    return _decision(INCONCLUSIVE, best, n, "too_noisy",
                     {**numbers, "spread": values[-1] / values[0] if values[0] else math.inf})


def _beyond_everywhere(replicates, best, reference, knobs, cpu_bound, numbers):
    """Every replicate missed: a failure, unless every one of them ran
    under conditions that differ from the reference's and explain a miss
    this large of a figure the CPUs bound."""
    per_replicate = [host_conditions.differences(r.conditions, reference.conditions,
                                                 knobs.conditions) for r in replicates]
    differences = host_conditions.differences(best.conditions, reference.conditions,
                                              knobs.conditions)
    n = len(replicates)
    if not (cpu_bound and all(per_replicate) and differences):
        return _decision(FAIL, best, n, "beyond", numbers)
    limit = host_conditions.explained_factor(differences,
                                             host_conditions.node_ranks(best.conditions))
    numbers = {**numbers, "conditions": differences, "explains": limit}
    if numbers["ratio"] > limit:
        return _decision(FAIL, best, n, "beyond_conditions", numbers)
    # another launch may run under the reference's conditions
    verdict = UNDECIDED if n < knobs.launches else INCONCLUSIVE
    return _decision(verdict, best, n, "conditions_differ", numbers)


def after_the_job(decision):
    """A figure still undecided when the job launched no more (its time ran
    short, or the re-measurement failed) is inconclusive."""
    if decision.verdict != UNDECIDED:
        return decision
    return dataclasses.replace(decision, verdict=INCONCLUSIVE, code="job_stopped",
                               numbers={**decision.numbers, "was": decision.code})


def case_verdict(verdicts):
    """The worst of a case's figures' verdicts; pass when none."""
    verdicts = list(verdicts)
    return next((v for v in SEVERITY if v in verdicts), PASS)


def median_interval(values):
    """The median of `values` and its distribution-free ~95 % interval from
    their order statistics (the whole range below 6 values)."""
    ordered = sorted(values)
    n = len(ordered)
    j = 1
    tail, term = 0.0, 0.5 ** n          # P(B(n, 1/2) <= k), P(B = k)
    for k in range(n // 2):
        tail += term
        if tail > 0.025:
            break
        j = k + 1
        term = term * (n - k) / (k + 1)
    mid = n // 2
    median = ordered[mid] if n % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])
    return Estimate(median, ordered[j - 1], ordered[n - j])


def judge_paired(ratios, knobs, min_rounds, max_rounds, kind="paired", limit=None):
    """The Decision on paired rounds' ratios (one side over the other,
    larger worse): fail when the median's whole interval lies beyond
    `limit` (1 + min_change[kind] unless given), pass when within it, else
    undecided until `max_rounds`, then inconclusive.  Monotone: a larger
    ratio in every round never moves a fail to a pass."""
    ratios = [r for r in ratios if finite(r)]
    n = len(ratios)
    limit = 1 + knobs.min_change[kind] if limit is None else limit
    if not n:
        return Decision(INCONCLUSIVE, math.nan, math.nan, math.nan, 0, "no_round",
                        {"limit": limit})
    est = median_interval(ratios)
    numbers = {"rounds": n, "median": est.value, "lo": est.lo, "hi": est.hi, "limit": limit,
               "kind": kind}
    if n >= min_rounds and est.lo > limit:
        return Decision(FAIL, est.value, est.lo, est.hi, n, "paired_beyond", numbers)
    if n >= min_rounds and est.hi <= limit:
        return Decision(PASS, est.value, est.lo, est.hi, n, "paired_within", numbers)
    if n < max_rounds:
        return Decision(UNDECIDED, est.value, est.lo, est.hi, n, "paired_straddles", numbers)
    return Decision(INCONCLUSIVE, est.value, est.lo, est.hi, n, "paired_too_noisy", numbers)

"""The judging rule (parameters and reasons: reframe_checks/references/
judging.yaml).

A figure is judged launch by launch.  Each launch gives an `Estimate`: the
figure and an interval around it from the launch's own samples.  A
`Bound` says on which side the figure fails.  `decide` looks at every
launch so far:

- pass          some launch's interval lies wholly within the bound: the
                system showed it can (a busy host only adds time, so a
                launch cannot look better than the system is);
- fail          at least `min_launches_to_fail` launches, every one of
                them, lie wholly beyond the bound;
- undecided     neither, and the budget allows another launch;
- inconclusive  neither, with the budget spent: the host was too noisy
                to tell, and the reason names the launches' spread.
"""

import dataclasses
import functools
import math
from pathlib import Path

from .. import paths
from ..datafiles import load_yaml, validate

PASS, FAIL, UNDECIDED, INCONCLUSIVE = "pass", "fail", "undecided", "inconclusive"
#: a case's verdicts, worst first: the case takes the first that any of its
#: figures has
SEVERITY = (FAIL, INCONCLUSIVE, UNDECIDED, PASS)

RULE_FILE = paths.REFERENCES / "judging.yaml"
RULE_SCHEMA = {
    "type": "object", "required": ["launches", "min_launches_to_fail", "baseline",
                                   "contended_cpu_pressure", "contention_explains"],
    "additionalProperties": False,
    "properties": {
        "launches": {"type": "integer", "minimum": 1, "maximum": 20},
        "min_launches_to_fail": {"type": "integer", "minimum": 1, "maximum": 20},
        "contended_cpu_pressure": {"type": "number", "minimum": 0, "maximum": 100},
        "contention_explains": {"type": "number", "minimum": 1},
        "saturated_cpu_pressure": {"type": "number", "minimum": 0, "maximum": 100},
        "host_mode_change": {"type": "number", "minimum": 1},
        "core_mode_spread": {"type": "number", "minimum": 1},
        "host_mode_round_trips": {"type": "number", "minimum": 0},
        "time_sliced_round_trip_ns": {"type": "number", "exclusiveMinimum": 0},
        "baseline": {"type": "object", "required": ["min_runs", "min_band"],
                     "additionalProperties": False,
                     "properties": {"min_runs": {"type": "integer", "minimum": 2},
                                    "min_band": {"type": "number", "minimum": 0,
                                                 "maximum": 1}}},
    },
}


@dataclasses.dataclass(frozen=True)
class Rule:
    launches: int
    min_launches_to_fail: int
    baseline_min_runs: int
    baseline_min_band: float
    contended_cpu_pressure: float = 25.0
    contention_explains: float = 3.0
    #: at or above this CPU pressure contention explains any miss
    saturated_cpu_pressure: float = 100.0
    #: a core round trip this many times the slowest of a baseline's runs:
    #: the host's cores were in another, slower mode
    host_mode_change: float = 1.5
    #: a core round trip this long: ranks 0 and 1 waited for the scheduler
    #: to run them (a time slice), so the CPUs were oversubscribed
    time_sliced_round_trip_ns: float = 1e6
    #: between ranks of one node, how far the cores' speed moves between
    #: launches without the core round trip showing it
    core_mode_spread: float = 1.0
    #: the core round trips a slower mode of the cores adds to a message
    host_mode_round_trips: float = 4.0


def rule_of(folder):
    """The rule of a references folder (its judging.yaml), else netbench's."""
    path = Path(folder) / RULE_FILE.name
    return load_rule(path if path.exists() else RULE_FILE)


@functools.cache
def load_rule(path=RULE_FILE):
    """The rule's parameters from judging.yaml; DataError naming the key."""
    data = validate(load_yaml(path), RULE_SCHEMA, path)
    return Rule(data["launches"], data["min_launches_to_fail"],
                data["baseline"]["min_runs"], data["baseline"]["min_band"],
                data["contended_cpu_pressure"], data["contention_explains"],
                data.get("saturated_cpu_pressure", 100.0), data.get("host_mode_change", 1.5),
                data.get("time_sliced_round_trip_ns", 1e6), data.get("core_mode_spread", 1.0),
                data.get("host_mode_round_trips", 4.0))


@dataclasses.dataclass(frozen=True)
class Estimate:
    """One launch's figure and the interval its samples give it."""
    value: float
    lo: float
    hi: float

    @classmethod
    def point(cls, value):
        """A figure without samples behind it (an interval of zero width)."""
        return cls(value, value, value)

    def to_json(self):
        return {"value": self.value, "lo": self.lo, "hi": self.hi}


@dataclasses.dataclass(frozen=True)
class Bound:
    """Where a figure fails: above `value` (side "upper": a time) or below
    it (side "lower": a bandwidth)."""
    side: str
    value: float

    def __post_init__(self):
        if self.side not in ("upper", "lower"):
            raise ValueError(f"a bound's side is upper or lower, not {self.side!r}")

    def within(self, estimate):
        """The whole interval meets the bound."""
        return estimate.hi <= self.value if self.side == "upper" else estimate.lo >= self.value

    def beyond(self, estimate):
        """The whole interval misses the bound."""
        return estimate.lo > self.value if self.side == "upper" else estimate.hi < self.value

    def better(self, a, b):
        """The better of two estimates by their figure."""
        return min(a, b, key=lambda e: e.value) if self.side == "upper" else \
            max(a, b, key=lambda e: e.value)

    def words(self):
        return f"{'at most' if self.side == 'upper' else 'at least'} {self.value:.4g}"

    def to_json(self):
        return {"side": self.side, "value": self.value}


@dataclasses.dataclass(frozen=True)
class Decision:
    verdict: str
    #: the figure the case reports: the launch that decided it, else the best
    value: float
    lo: float
    hi: float
    launches: int
    reason: str
    #: what excused a failure, each allowance's words as its reason ends
    #: with them (", but ..."): the curve names them (baseline.excuses)
    excuses: tuple = ()

    def to_json(self):
        """The record's form: the reason already says the excuses."""
        out = dataclasses.asdict(self)
        del out["excuses"]
        return out

    def excused(self, words):
        """This failure, inconclusive because `words` explain it."""
        return dataclasses.replace(self, verdict=INCONCLUSIVE,
                                   reason=f"{self.reason}, but {words}",
                                   excuses=self.excuses + (words,))


def _finite(estimates):
    return [e for e in estimates
            if all(isinstance(x, (int, float)) and math.isfinite(x)
                   for x in (e.value, e.lo, e.hi))]


def spread(estimates):
    """The launches' figures from lowest to highest, as words."""
    values = sorted(e.value for e in estimates)
    if len(values) < 2:
        return ""
    low, high = values[0], values[-1]
    pct = 100 * (high - low) / low if low > 0 else math.inf
    return f"launches ranged {low:.4g}-{high:.4g} ({pct:.0f} %)"


def decide(estimates, bound, rule=None):
    """The Decision on a figure from its launches' Estimates so far."""
    rule = rule or load_rule()
    estimates = _finite(estimates)
    n = len(estimates)
    if not n:
        return Decision(INCONCLUSIVE, math.nan, math.nan, math.nan, 0,
                        "no launch gave the figure")
    best = estimates[0]
    for e in estimates[1:]:
        best = bound.better(best, e)
    passing = [e for e in estimates if bound.within(e)]
    if passing:
        clearest = passing[0]
        for e in passing[1:]:
            clearest = bound.better(clearest, e)
        return Decision(PASS, clearest.value, clearest.lo, clearest.hi, n,
                        f"{clearest.value:.4g} ({clearest.lo:.4g}-{clearest.hi:.4g}) is "
                        f"{bound.words()}")
    if n >= rule.min_launches_to_fail and all(bound.beyond(e) for e in estimates):
        return Decision(FAIL, best.value, best.lo, best.hi, n,
                        f"all {n} launches beyond the bound ({bound.words()}): best "
                        f"{best.value:.4g} ({best.lo:.4g}-{best.hi:.4g})")
    if n < rule.launches:
        return Decision(UNDECIDED, best.value, best.lo, best.hi, n,
                        f"after {n} launch{'es' if n > 1 else ''} the interval "
                        f"{best.lo:.4g}-{best.hi:.4g} straddles the bound ({bound.words()})")
    noise = spread(estimates)
    return Decision(INCONCLUSIVE, best.value, best.lo, best.hi, n,
                    f"too noisy to tell after {n} launches: best {best.value:.4g} "
                    f"({best.lo:.4g}-{best.hi:.4g}) against {bound.words()}"
                    + (f"; {noise}" if noise else ""))


def after_the_job(decision):
    """The decision once the job is over: a figure still undecided (the
    job stopped launching before the budget of launches, as its time ran
    short or the host was too slow to launch again) is inconclusive."""
    if decision.verdict != UNDECIDED:
        return decision
    return dataclasses.replace(decision, verdict=INCONCLUSIVE,
                               reason=f"{decision.reason}; the job launched no more "
                                      f"(its time limit was near, or the re-measurement "
                                      f"could not read its launches: see the job's stderr)")


def contended(host, rule):
    """Words naming the host's contention when other work waited for a CPU
    more than the rule allows, or the ranks waited for the scheduler to run
    them (host: {cpu_pressure, host_load, core_round_trip_ns, and against a
    baseline baseline_cpu_pressure}), else ""."""
    pressure = (host or {}).get("cpu_pressure")
    # against a baseline, what its accepted runs' own jobs read is no other
    # work (baseline.host_beside_baseline)
    accepted = (host or {}).get("baseline_cpu_pressure") or 0.0
    words = []
    if pressure is not None and pressure - accepted >= rule.contended_cpu_pressure:
        load = (host or {}).get("host_load")
        words.append(f"other work waited for a CPU {pressure:.0f} % of the last 10 s"
                     + (f" (load {load:g})" if load is not None else "")
                     + (f", {pressure - accepted:.0f} points more than when the baseline "
                        f"was accepted" if accepted else ""))
    if time_sliced(host, rule):
        words.append(f"ranks 0 and 1 took {host['core_round_trip_ns'] / 1e6:.1f} ms to pass a "
                     f"cache line in every launch: they waited for a CPU, not for each other")
    return "; ".join(words)


def time_sliced(host, rule):
    """Whether the job's core round trip shows ranks 0 and 1 taking turns
    on the CPUs (judging.yaml's time_sliced_round_trip_ns)."""
    trip = (host or {}).get("core_round_trip_ns")
    return trip is not None and trip >= rule.time_sliced_round_trip_ns


def miss_factor(value, bound):
    """How many times the figure misses its bound (1: at the bound)."""
    if not value or not bound.value or not math.isfinite(value):
        return math.inf
    return value / bound.value if bound.side == "upper" else bound.value / value


def contention_limit(host, rule, explains=None):
    """How many times a CPU-bound figure may miss its bound and still be
    explained by the host's contention (judging.yaml's contention_explains,
    or `explains` where the path is the host's CPUs alone); without bound
    once the pressure says the CPUs were oversubscribed all along (a time
    slice per message)."""
    limit = rule.contention_explains if explains is None else explains
    if (host or {}).get("cpu_pressure", 0) >= rule.saturated_cpu_pressure \
            or time_sliced(host, rule):
        limit = math.inf
    return limit


def allowing_for_contention(decision, host, cpu_bound, rule, bound, explains=None):
    """A failure of a figure the CPUs bound, on a host whose CPUs were
    contended while it measured, becomes inconclusive when the miss is
    within what contention explains (judging.yaml, or `explains` where the
    path is the host's CPUs alone, e.g. math.inf): the evidence cannot
    tell the path's loss from the contention.  A larger miss still fails."""
    why = contended(host, rule) if cpu_bound and decision.verdict == FAIL else ""
    if not why or miss_factor(decision.value, bound) > contention_limit(host, rule, explains):
        return decision
    return decision.excused(f"{why}: a CPU-bound figure cannot be told from that")


def case_verdict(verdicts):
    """A case's verdict from its figures' verdicts: the worst of them
    (fail, then inconclusive, then undecided); pass when all pass or
    nothing was judged."""
    verdicts = list(verdicts)
    return next((v for v in SEVERITY if v in verdicts), PASS)


def median_interval(values):
    """The median of `values` and its distribution-free ~95 % interval
    from their order statistics (as netbench.c's usec_lo/usec_hi): an
    Estimate; the whole range below 6 values."""
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


def decide_paired(ratios, bound, min_rounds, max_rounds):
    """The Decision on a paired comparison (container over host, after
    over before) from its rounds' ratios: each round's two sides share the
    load of their moment, so the ratios are the evidence, and interference
    can move them either way; hence not the best round but the median's
    interval.  Fail when the whole interval is beyond the bound, pass when
    it is within; else undecided until `max_rounds`, then inconclusive."""
    ratios = [r for r in ratios if isinstance(r, (int, float)) and math.isfinite(r)]
    n = len(ratios)
    if not n:
        return Decision(INCONCLUSIVE, math.nan, math.nan, math.nan, 0,
                        "no round finished on both sides")
    est = median_interval(ratios)
    interval = f"median {est.value:.3g} ({est.lo:.3g}-{est.hi:.3g}) over {n} rounds"
    if n >= min_rounds and bound.within(est):
        return Decision(PASS, est.value, est.lo, est.hi, n, f"{interval} is {bound.words()}")
    if n >= min_rounds and bound.beyond(est):
        return Decision(FAIL, est.value, est.lo, est.hi, n,
                        f"{interval}: beyond the bound ({bound.words()})")
    if n < max_rounds:
        return Decision(UNDECIDED, est.value, est.lo, est.hi, n,
                        f"{interval} straddles the bound ({bound.words()})")
    return Decision(INCONCLUSIVE, est.value, est.lo, est.hi, n,
                    f"too noisy to tell: {interval} straddles the bound ({bound.words()})")

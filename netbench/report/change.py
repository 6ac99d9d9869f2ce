"""One figure in both sides of a comparison (report/compare.py): the change
in %, its direction by the unit (a time is better lower, a rate higher),
and its call by the verdict model, as a check decides.

The call is the model's (model.judge), with a reference of kind "session":
B is worse when its launches, judged against A's slowest launch's figure as
the bound, fail (every launch beyond it by more than min_change.session, at
least min_to_fail of them); better when A's launches fail against B's
slowest.  The slowest, not the best: a learned baseline holds a run to its
slowest accepted run, so that the spread between the reference's own
launches is inside the bound; against the best launch, one lucky launch of
a noisy session made the other "worse" in every launch (two sessions of
the same settings on an emulated link: 12 sizes better, 4 worse).  Not a
paired form: two sessions ran at different times, so no launch of A shares
its moment's load with one of B, and their ratios would not cancel it.  A
figure beyond in every launch but with fewer launches than a loss needs is
"too few launches", as the check would have launched again (not a loss
shown: the exit does not count it); one beyond in every launch, each run
under host conditions (Hosts) that explain a miss that large of a figure
the CPUs bound, is "hosts differed", as the check would say inconclusive;
any other is within noise.  A record
of version 1 (no `runs`), or a figure without a verdict, has points only:
its changes say "no interval".
"""

import dataclasses
import functools

from ..judgement import conditions as host_conditions
from ..judgement import knobs as judging_knobs
from ..judgement import model
from ..judgement.model import Bound, Reference, Replicate

BETTER, WORSE, SAME, CHANGED = "better", "worse", "same", "changed"
SIGNIFICANT, NOISE, NO_INTERVAL = "significant", "within noise", "no interval"
#: beyond in every launch, but fewer launches than the model fails on
FEW_LAUNCHES = "too few launches"
#: beyond in every launch, each under host conditions that differ from the
#: other side's and explain a miss that large (the check: inconclusive)
HOSTS_DIFFERED = "hosts differed"
#: the kinds of reference (judging.yaml's min_change) a side is to the other
SESSION, BASELINE = "session", "baseline"

#: units whose figure is better lower (times) and higher (rates)
LOWER_IS_BETTER = ("us", "usec", "ns", "ms", "s")
HIGHER_IS_BETTER_SUFFIX = "/s"


def better_side(unit):
    """"lower" for a time, "higher" for a rate, None when the unit does not
    say (a size, a ratio)."""
    unit = (unit or "").strip()
    if unit in LOWER_IS_BETTER:
        return "lower"
    if unit.endswith(HIGHER_IS_BETTER_SUFFIX):
        return "higher"
    return None


def is_point(e):
    return e.lo == e.hi == e.value


def best(estimates, side):
    """The best launch's Estimate: the lowest time, the highest rate; the
    first launch's when the unit has no better side."""
    if side == "lower":
        return min(estimates, key=lambda e: e.value)
    if side == "higher":
        return max(estimates, key=lambda e: e.value)
    return estimates[0]


#: a change's call without intervals, by its direction
NO_INTERVAL_CALLS = {d: f"{d}, {NO_INTERVAL}" for d in (BETTER, WORSE, CHANGED)}
#: a change's call beyond in every launch, too few of them, by its direction
FEW_LAUNCHES_CALLS = {d: f"{d}, {FEW_LAUNCHES}" for d in (BETTER, WORSE, CHANGED)}
#: a change's call beyond in every launch while the hosts differed
HOSTS_DIFFERED_CALLS = {d: f"{d}, {HOSTS_DIFFERED}" for d in (BETTER, WORSE, CHANGED)}
#: the order of the calls, worst first (Comparison.worst): worse by the
#: model, worse in every launch but too few of them, worse without an
#: interval, the rest, the better last
CALL_ORDER = {WORSE: 0, FEW_LAUNCHES_CALLS[WORSE]: 1, NO_INTERVAL_CALLS[WORSE]: 1,
              HOSTS_DIFFERED_CALLS[WORSE]: 1,
              BETTER: 3, FEW_LAUNCHES_CALLS[BETTER]: 3, NO_INTERVAL_CALLS[BETTER]: 3,
              HOSTS_DIFFERED_CALLS[BETTER]: 3}
#: the bound's side of a unit's worse figure: above a time, below a rate
WORSE_BEYOND = {"lower": "upper", "higher": "lower"}


def worst(estimates, side):
    """The worst launch's Estimate: the highest time, the lowest rate."""
    return best(estimates, "higher" if side == "lower" else "lower")


def reference_bound(launches, side, kind):
    """The Bound another side's launches are held to: a session's slowest
    launch's figure, as a learned baseline holds runs to its slowest
    accepted run, so the spread between that session's own launches is
    inside the bound; the far end of a baseline's band (the bound a run
    fails beyond, as the check holds it)."""
    bound_side = WORSE_BEYOND[side]
    if kind == BASELINE:
        e = launches[0]
        return Bound(bound_side, e.hi if bound_side == "upper" else e.lo)
    return Bound(bound_side, worst(launches, side).value)


@dataclasses.dataclass(frozen=True)
class Hosts:
    """What the hosts did during a figure's launches on each side (each
    launch's conditions, conditions.of_launch, in the order of its
    launches; () where a side does not say), and whether the host's CPUs
    bound the figure (conditions.cpu_bound): the model then weighs the
    conditions as the check does."""
    a: tuple = ()
    b: tuple = ()
    cpu_bound: bool = False


NO_HOSTS = Hosts()


def aligned(conditions, launches):
    """Each launch's conditions, or None for each where the side's
    conditions do not match its launches one to one (a launch that
    measured no figure at a size)."""
    return tuple(conditions) if len(conditions) == len(launches) else (None,) * len(launches)


def judge_against(launches, reference_launches, side, kind, knobs, conditions=((), ()),
                  cpu_bound=False):
    """model.judge of `launches` against the other side's reference_bound,
    with whether every launch lies beyond it; (None, False) without asking
    the model where one does not: the model fails a figure only when every
    launch is beyond (Bound.beyond), and a comparison of 10,000 cases asks
    about half a million sizes, most of them within noise.  `conditions`:
    (the launches', the reference launches') as Hosts holds them."""
    bound = reference_bound(reference_launches, side, kind)
    if not all(bound.beyond(e, model.smallest_change(kind, knobs)) for e in launches):
        return None, False
    mine, theirs = aligned(conditions[0], launches), aligned(conditions[1], reference_launches)
    bound_launch = 0 if kind == BASELINE else reference_launches.index(
        worst(reference_launches, side))
    reference = Reference(bound, kind, host_conditions.as_reference(theirs[bound_launch]))
    return model.judge([Replicate(e, c) for e, c in zip(launches, mine)], reference, knobs,
                       cpu_bound=cpu_bound), True


@functools.cache
def default_knobs():
    """judging.yaml's knobs, read once per process (knobs.load)."""
    return judging_knobs.load()


def judged(a, b, side, kind=SESSION, knobs=None, hosts=NO_HOSTS):
    """(direction, significance, call, model.Decision or None) of B's
    launches against A's (tuples of Estimates; A a reference of `kind`),
    for a unit whose `side` is better (better_side).  The direction by the best launches' figures;
    the call by the model (the module's docstring): worse (better) when B
    (A) fails against the other's reference, its direction and "too few
    launches" when that fails only for want of launches, its direction and
    "hosts differed" when every launch ran under conditions (`hosts`) that
    explain the miss, else within noise; without intervals, its direction
    and "no interval"."""
    ba, bb = best(a, side), best(b, side)
    if bb.value == ba.value:
        direction = SAME
    elif side is None:
        direction = CHANGED
    else:
        direction = BETTER if (bb.value < ba.value) == (side == "lower") else WORSE
    if (len(a) == 1 and is_point(a[0])) or (len(b) == 1 and is_point(b[0])):
        return direction, NO_INTERVAL, SAME if direction == SAME else \
            NO_INTERVAL_CALLS[direction], None
    knobs = knobs or default_knobs()
    sides = (side,) if side else ("lower", "higher")
    pending = None
    for judged_side in sides:
        # B against A (worse), A against B (better); without a better side,
        # beyond either way is a change
        # (B is always a session: A's launches are held to B's best)
        for launches, others, their_kind, call, conditions in (
                (b, a, kind, WORSE, (hosts.b, hosts.a)),
                (a, b, SESSION, BETTER, (hosts.a, hosts.b))):
            decision, beyond = judge_against(launches, others, judged_side, their_kind, knobs,
                                             conditions, hosts.cpu_bound)
            call = call if side else CHANGED
            if beyond and decision.verdict == model.FAIL:
                return call, SIGNIFICANT, call, decision
            if beyond and pending is None:
                pending = unfinished(call, decision, len(launches), knobs)
    return pending or (direction, NOISE, NOISE, None)


def unfinished(call, decision, launches, knobs):
    """The call of a figure beyond in every launch that the model did not
    fail: too few launches for it (the check would launch again), or every
    launch under host conditions that explain the miss (the check:
    inconclusive); None otherwise."""
    if decision.verdict == model.UNDECIDED and launches < knobs.min_to_fail:
        return call, FEW_LAUNCHES, FEW_LAUNCHES_CALLS[call], decision
    if decision.code == "conditions_differ":
        return call, HOSTS_DIFFERED, HOSTS_DIFFERED_CALLS[call], decision
    return None


def factor_of(a, b, direction):
    """How many times worse (or better) B is than A: a time's B/A, a
    rate's A/B, at least 1; 1 where the unit has no better side or a
    figure is not positive."""
    if direction not in (BETTER, WORSE) or a.value <= 0 or b.value <= 0:
        return 1.0
    return max(b.value / a.value, a.value / b.value)


def rank_of(call, factor):
    """The sort key of a change, worst first (Comparison.worst)."""
    order = CALL_ORDER.get(call, 2)
    return (order, -factor if order < 3 else factor)


@dataclasses.dataclass(frozen=True)
class Change:
    """One figure (at one size, or a case's performance variable) in both
    sessions: every launch of each (tuples of Estimates)."""
    figure: str
    unit: str
    bytes: float | None
    a_launches: tuple
    b_launches: tuple
    kind: str = SESSION
    hosts: Hosts = NO_HOSTS

    @property
    def a(self):
        """A's best launch."""
        return best(self.a_launches, better_side(self.unit))

    @property
    def b(self):
        return best(self.b_launches, better_side(self.unit))

    @functools.cached_property
    def pct(self):
        if not self.a.value:
            return None
        return 100 * (self.b.value - self.a.value) / abs(self.a.value)

    @functools.cached_property
    def _judged(self):
        return judged(self.a_launches, self.b_launches, better_side(self.unit), self.kind,
                      hosts=self.hosts)

    @property
    def direction(self):
        return self._judged[0]

    @property
    def significance(self):
        return self._judged[1]

    @property
    def call(self):
        """What the change amounts to (judged)."""
        return self._judged[2]

    @property
    def decision(self):
        """The model's Decision behind a call of worse, better or too few
        launches (its code and numbers: report/reasons.py says them)."""
        return self._judged[3]

    @property
    def factor(self):
        return factor_of(self.a, self.b, self.direction)

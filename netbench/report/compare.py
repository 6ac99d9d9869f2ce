"""What changed between two sessions (`netbench compare A B`): per case, per
figure and per message size, the change in %, and whether it is better or
worse (by the unit: a time is better lower, a rate higher) by the verdict
model, as a check decides.  Pure: sessions in, a Comparison out (cli.py
prints it, compare_page renders it).

Each side gives, per case, every launch's Estimate (netbench.judgement.model)
of each figure: a figure with the interval its launch's samples give it.

- per size: every launch of the record's runs (record version 2), each
  row's Estimate (judgement.figures.row_estimate);
- per figure: the case's performance variables, with the interval of the
  launch its verdict rests on (record `verdicts`) where it has one.

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
shown: the exit does not count it); any other is within noise.  A record
of version 1 (no `runs`), or a figure without a verdict, has points only:
its changes say "no interval".

A baseline (reframe_checks/references/baselines/) enters as a side like a
session's (kind "baseline"): `Side` {case key: CaseFigures}, its band at
each size as one Estimate (centre, band low, band high), the band's end the
bound a session's launches are held to, as the check holds them.
"""

import bisect
import collections.abc
import dataclasses
import functools
import heapq
import math
import pickle
import re
from array import array

from ..judgement import knobs as judging_knobs
from ..judgement import model
from ..judgement.figures import row_estimate
from ..judgement.model import Bound, Estimate, Reference, Replicate
from .verdict import EXIT_INCONCLUSIVE, EXIT_LOSS, EXIT_PASS

BETTER, WORSE, SAME, CHANGED = "better", "worse", "same", "changed"
SIGNIFICANT, NOISE, NO_INTERVAL = "significant", "within noise", "no interval"
#: beyond in every launch, but fewer launches than the model fails on
FEW_LAUNCHES = "too few launches"
#: the kinds of reference (judging.yaml's min_change) a side is to the other
SESSION, BASELINE = "session", "baseline"

#: units whose figure is better lower (times) and higher (rates)
LOWER_IS_BETTER = ("us", "usec", "ns", "ms", "s")
HIGHER_IS_BETTER_SUFFIX = "/s"
#: columns that repeat another column of the same series in another unit
#: (the table shows one)
REPEATS = {"MBps": "Mbps"}


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
#: the order of the calls, worst first (Comparison.worst): worse by the
#: model, worse in every launch but too few of them, worse without an
#: interval, the rest, the better last
CALL_ORDER = {WORSE: 0, FEW_LAUNCHES_CALLS[WORSE]: 1, NO_INTERVAL_CALLS[WORSE]: 1,
              BETTER: 3, FEW_LAUNCHES_CALLS[BETTER]: 3, NO_INTERVAL_CALLS[BETTER]: 3}
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


def judge_against(launches, reference_launches, side, kind, knobs):
    """model.judge of `launches` against the other side's reference_bound,
    with whether every launch lies beyond it; (None, False) without asking
    the model where one does not: the model fails a figure only when every
    launch is beyond (Bound.beyond), and a comparison of 10,000 cases asks
    about half a million sizes, most of them within noise."""
    bound = reference_bound(reference_launches, side, kind)
    if not all(bound.beyond(e, model.smallest_change(kind, knobs)) for e in launches):
        return None, False
    reference = Reference(bound, kind=kind)
    return model.judge([Replicate(e) for e in launches], reference, knobs,
                       cpu_bound=False), True


@functools.cache
def default_knobs():
    """judging.yaml's knobs, read once per process (knobs.load)."""
    return judging_knobs.load()


def judged(a, b, side, kind=SESSION, knobs=None):
    """(direction, significance, call, model.Decision or None) of B's
    launches against A's (tuples of Estimates; A a reference of `kind`),
    for a unit whose `side` is better (better_side).  The direction by the best launches' figures;
    the call by the model (the module's docstring): worse (better) when B
    (A) fails against the other's reference, its direction and "too few
    launches" when that fails only for want of launches, else within noise;
    without intervals, its direction and "no interval"."""
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
    few = None
    for judged_side in sides:
        # B against A (worse), A against B (better); without a better side,
        # beyond either way is a change
        # (B is always a session: A's launches are held to B's best)
        for launches, others, their_kind, call in ((b, a, kind, WORSE),
                                                   (a, b, SESSION, BETTER)):
            decision, beyond = judge_against(launches, others, judged_side, their_kind, knobs)
            call = call if side else CHANGED
            if beyond and decision.verdict == model.FAIL:
                return call, SIGNIFICANT, call, decision
            # beyond in every launch, undecided only for want of launches
            if beyond and few is None and decision.verdict == model.UNDECIDED and \
                    len(launches) < knobs.min_to_fail:
                few = (call, FEW_LAUNCHES, FEW_LAUNCHES_CALLS[call], decision)
    return few or (direction, NOISE, NOISE, None)


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
        return judged(self.a_launches, self.b_launches, better_side(self.unit), self.kind)

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


#: the tuples of sizes the PerSize in memory hold, each once (most curves
#: of a session sweep the same sizes)
_SIZES = {}


def launches_of(found):
    """A size's or figure's launches as a tuple of Estimates (one Estimate
    alone: one launch)."""
    return (found,) if hasattr(found, "value") else tuple(found)


class PerSize(collections.abc.Mapping):
    """{bytes: (Estimate of each launch)} held as the sorted sizes (shared
    with the other curves of the same sizes), their launches' figures in
    one flat array and where each size's start: the Estimates made when
    asked for, so a side of 10,000 cases keeps millions in little memory."""
    __slots__ = ("_sizes", "_figures", "_starts")

    def __init__(self, per_size):
        sizes = tuple(sorted(per_size))
        self._sizes = _SIZES.setdefault(sizes, sizes)
        self._figures = array("d")
        self._starts = array("L", [0])
        for size in sizes:
            for e in launches_of(per_size[size]):
                self._figures.extend((e.value, e.lo, e.hi))
            self._starts.append(len(self._figures) // 3)

    def __len__(self):
        return len(self._sizes)

    def __iter__(self):
        return iter(self._sizes)

    def _index(self, size):
        i = bisect.bisect_left(self._sizes, size)
        if i == len(self._sizes) or self._sizes[i] != size:
            raise KeyError(size)
        return i

    def _launches(self, i):
        f = self._figures
        return tuple(Estimate(f[3 * k], f[3 * k + 1], f[3 * k + 2])
                     for k in range(self._starts[i], self._starts[i + 1]))

    def __getitem__(self, size):
        return self._launches(self._index(size))

    def __contains__(self, size):
        try:
            self._index(size)
        except (KeyError, TypeError):
            return False
        return True

    def common(self, other):
        """[(bytes, this side's launches, other's)] at the sizes both have."""
        if isinstance(other, PerSize) and other._sizes is self._sizes:
            return [(size, self._launches(i), other._launches(i))
                    for i, size in enumerate(self._sizes)]
        return [(size, e, launches_of(other[size])) for size, e in self.items()
                if size in other]


@dataclasses.dataclass
class CaseFigures:
    """A case's figures on one side: {variable: (unit, launches)} and
    {(series, column): (unit, {bytes: launches})}, each launches a tuple of
    Estimates; `kind` the reference it is to another side (SESSION,
    BASELINE)."""
    figures: dict
    sizes: dict
    kind: str = SESSION


@dataclasses.dataclass
class CaseComparison:
    """A case both sides have: its Changes are made when asked for (a
    comparison of 10,000 cases has half a million), from the two sides'
    figures."""
    key: str
    a: CaseFigures
    b: CaseFigures

    @property
    def figures(self):
        return [Change(var, unit, None, launches_of(ea), launches_of(self.b.figures[var][1]),
                       self.a.kind)
                for var, (unit, ea) in self.a.figures.items() if var in self.b.figures]

    @property
    def sizes(self):
        return [Change(label, unit, size, ea, eb, self.a.kind)
                for label, unit, pairs in common_sizes(self.a, self.b)
                for size, ea, eb in pairs]


def common_sizes(a, b):
    """[(figure label, unit, [(bytes, A's launches, B's)])] of the sizes two
    sides' CaseFigures both have, in the order of `a`; the label the
    column's name, with its series' when two series have that column."""
    found = []
    plain = len(a.sizes) == len({k[1] for k in a.sizes})
    for key, (unit, per_size) in a.sizes.items():
        if key not in b.sizes:
            continue
        other = b.sizes[key][1]
        pairs = per_size.common(other) if isinstance(per_size, PerSize) else \
            [(size, launches_of(e), launches_of(other[size])) for size, e in per_size.items()
             if size in other]
        found.append((key[1] if plain else f"{key[0]} {key[1]}", unit, pairs))
    return found


@dataclasses.dataclass
class Tally:
    """A comparison's changes counted in one pass: {call: count}, the `kept`
    worst changes [(case key, Change)], and per case {key, figures (its
    Changes), sizes ({call: count}), worst (its worst Change)}."""
    counts: dict
    worst: list
    cases: list


def tally(cases, kept):
    """The Tally of CaseComparisons, keeping the `kept` worst changes: the
    sizes are judged without a Change each (judged), a Change is made for
    the worst only."""
    counts, heap, summaries, seq = {}, [], [], 0
    for case in cases:
        figures = case.figures
        sizes = {}
        case_worst = None
        kind = case.a.kind
        candidates = [(c.call, c.factor, c.figure, c.unit, None, c.a_launches, c.b_launches)
                      for c in figures]
        for label, unit, pairs in common_sizes(case.a, case.b):
            side = better_side(unit)
            for size, ea, eb in pairs:
                direction, _, call, _ = judged(ea, eb, side, kind)
                sizes[call] = sizes.get(call, 0) + 1
                candidates.append((call, factor_of(best(ea, side), best(eb, side), direction),
                                   label, unit, size, ea, eb))
        for call, factor, label, unit, size, ea, eb in candidates:
            counts[call] = counts.get(call, 0) + 1
            key = (*rank_of(call, factor), seq)
            seq += 1
            if case_worst is None or key < case_worst[0]:
                case_worst = (key, (label, unit, size, ea, eb, kind))
            # the `kept` smallest keys, in a heap of the largest first
            entry = (tuple(-k for k in key), case.key, (label, unit, size, ea, eb, kind))
            if len(heap) < kept:
                heapq.heappush(heap, entry)
            elif entry[0] > heap[0][0]:
                heapq.heapreplace(heap, entry)
        summaries.append({"key": case.key, "figures": figures, "sizes": sizes,
                          "worst": Change(*case_worst[1]) if case_worst else None})
    worst = [(key, Change(*change)) for _, key, change in sorted(heap, reverse=True)]
    return Tally(counts, worst, summaries)


@dataclasses.dataclass
class Comparison:
    a: str
    b: str
    cases: list
    only_a: list
    only_b: list

    #: the worst changes a comparison keeps in its tally
    KEPT = 1000

    def changes(self):
        """Every Change, made now (a large comparison: Tally instead)."""
        return [c for case in self.cases for c in case.figures + case.sizes]

    @functools.cached_property
    def tally(self):
        return tally(self.cases, self.KEPT)

    def counts(self):
        """{call: how many changes}: worse, better, within noise, ..."""
        return dict(self.tally.counts)

    def worst(self, limit):
        """The `limit` worst changes, [(case key, Change)]: those worse
        beyond the noise first, the most times worse first, then those
        worse without an interval, the rest, and the better last."""
        if limit <= self.KEPT:
            return self.tally.worst[:limit]
        return tally(self.cases, limit).worst


def rank(change):
    """The sort key of a change, worst first (Comparison.worst)."""
    return rank_of(change.call, change.factor)


#: `netbench compare`'s exit when A and B have no figure in common: the
#: comparison can tell nothing (report/verdict.py's inconclusive)
EXIT_NOTHING_IN_COMMON = EXIT_INCONCLUSIVE


def exit_code(comparison):
    """`netbench compare`'s exit code from its own per-figure calls (the
    model's): 1 (a loss shown) when some figure of B is worse than A's, 3
    (EXIT_NOTHING_IN_COMMON) when A and B have no figure in common to
    compare, else 0.  A change worse in too few launches for the model to
    call, or without an interval (a record of version 1), is not a loss
    the comparison can show: it does not count."""
    counts = comparison.counts()
    if not counts:
        return EXIT_NOTHING_IN_COMMON
    if counts.get(WORSE):
        return EXIT_LOSS
    return EXIT_PASS


def case_key(tc):
    """A case across sessions: its label (no hash), environment, partition."""
    return f"{case_label(tc)} | {tc.get('environ')} | {tc.get('system')}:{tc.get('partition')}"


def finite(e):
    """Whether an Estimate's three figures are finite numbers."""
    try:
        return math.isfinite(e.value) and math.isfinite(e.lo) and math.isfinite(e.hi)
    except TypeError:
        return False


def size_figures(record):
    """{(series, column): (unit, {bytes: Estimate})} of a record: each
    size's best launch (size_launches)."""
    return {key: (unit, {size: best(launches, better_side(unit))
                         for size, launches in per_size.items()})
            for key, (unit, per_size) in size_launches(record).items()}


def size_launches(record):
    """{(series, column): (unit, {bytes: [Estimate of each launch]})} of a
    record: the launches of the series' run where the record has them,
    else the series' rows as one launch of points."""
    found = {}
    runs = record.get("runs") or {}
    for series in record.get("series", []):
        columns = [c for c in series["y"] if REPEATS.get(c["column"]) not in
                   {y["column"] for y in series["y"]}]
        point = series["name"] not in runs
        launches = [series["rows"]] if point else \
            [launch["rows"] for launch in runs[series["name"]]]
        for col in columns:
            column, unit = col["column"], col["unit"]
            per_size = {}
            for rows in launches:
                for row in rows:
                    if column not in row or "bytes" not in row:
                        continue
                    e = Estimate.point(row[column]) if point else row_estimate(row, column)
                    if finite(e):
                        per_size.setdefault(row["bytes"], []).append(e)
            found[(series["name"], column)] = (unit, dict(sorted(per_size.items())))
    return found


def variable_figures(tc, record):
    """{variable: (unit, (Estimate,))} of a case's performance variables:
    the interval of the launch its verdict rests on where the record has
    one, else a point (one launch: the record keeps no other's figure)."""
    found = {}
    verdicts = record.get("verdicts") or {}
    for key, entry in (tc.get("perfvalues") or {}).items():
        value, unit = entry[0], entry[4] or ""
        if value is None:
            continue
        var = key.split(":")[-1]
        decided = verdicts.get(var) or {}
        if all(isinstance(decided.get(k), (int, float)) for k in ("value", "lo", "hi")):
            e = Estimate(decided["value"], decided["lo"], decided["hi"])
        else:
            e = Estimate.point(value)
        if finite(e):
            found[var] = (unit, (e,))
    return found


def case_label(tc):
    """Display name without ReFrame's hash suffix: stable across sessions."""
    return re.sub(r"\s+/[0-9a-f]{8}$", "", tc.get("display_name", tc.get("name", "")))


def session_side(session):
    """{case key: CaseFigures} of a session (sessions.Session): the cases
    that measured something."""
    from .sections import case_record

    side = {}
    for tc in session.testcases:
        record = case_record(tc)
        sizes = {key: (unit, PerSize(per_size))
                 for key, (unit, per_size) in size_launches(record).items()}
        figures = CaseFigures(variable_figures(tc, record), sizes)
        if figures.figures or figures.sizes:
            side[case_key(tc)] = figures
    return side


def compare_cases(a, b):
    """The Changes between two sides' CaseFigures, in the order of `a`:
    (figures, sizes)."""
    case = CaseComparison("", a, b)
    return case.figures, case.sizes


def compare(a_side, b_side, a_name="A", b_name="B"):
    """The Comparison of two sides ({case key: CaseFigures}): the cases
    both have, and those only one has."""
    cases = [CaseComparison(key, a_side[key], b_side[key])
             for key in sorted(a_side) if key in b_side]
    return Comparison(a_name, b_name, cases, sorted(set(a_side) - set(b_side)),
                      sorted(set(b_side) - set(a_side)))


def compare_sessions(a, b):
    return compare(session_side(a), session_side(b), a.name, b.name)


def session_sides(load_a, load_b):
    """(A's name, A's side, B's name, B's side) of two sessions loaded one
    after the other (`load_a`, `load_b`: each returns a Session), for
    `netbench compare`: a 10,000-case session parsed is about 400 MB, its
    side about 30 MB of small objects.  A's side waits pickled while B
    loads: as objects made while A's report was in memory, they would keep
    the memory that report leaves (its allocator's arenas) from being
    returned, and B's report would come on top of it."""
    a = load_a()
    a_name, a_side = a.name, pickle.dumps(session_side(a), pickle.HIGHEST_PROTOCOL)
    del a
    b = load_b()
    b_name, b_side = b.name, session_side(b)
    del b
    return a_name, pickle.loads(a_side), b_name, b_side


def baseline_side(baselines):
    """{case key: CaseFigures} of learned baselines (judgement.baseline's
    loaded files), of kind BASELINE: each size's time per message as the
    band the runs are held to, Estimate(centre, fastest run, the bound a
    run fails beyond)."""
    side = {}
    for data in baselines:
        partition = f"{data['system']}:{data['partition']}"
        for case in data["cases"]:
            series = "tcp" if case.get("transport") == "raw" else "mpi"
            per_size = {s["bytes"]: (Estimate(s["centre"], s["low"], s["upper"]),)
                        for s in case["sizes"]}
            side[f"{case['case']} | {case['environ']} | {partition}"] = CaseFigures(
                {}, {(series, case["column"]): (case["unit"], per_size)}, BASELINE)
    return side


def compare_with_baseline(session, baselines):
    """A session against the baselines of its partitions (A: the baseline,
    B: the session), per size."""
    names = ", ".join(f"{d['system']}:{d['partition']}" for d in baselines)
    return compare(baseline_side(baselines), session_side(session),
                   f"baseline {names}", session.name)

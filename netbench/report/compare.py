"""What changed between two sessions (`netbench compare A B`): per case, per
figure and per message size, the change in %, whether it is better or worse
(by the unit: a time is better lower, a rate higher), and whether it is more
than noise.  Pure: sessions in, a Comparison out (cli.py prints it,
compare_page renders it).

Each side gives, per case, Estimates (netbench.judgement.rule): a figure
with the interval its launch's samples give it.

- per size: every launch of the record's runs (record version 2), each
  row's Estimate (judgement.figures.row_estimate); of a session's launches
  the best at each size, as the judging rule takes the best launch;
- per figure: the case's performance variables, with the interval its
  verdict rests on (record `verdicts`) where it has one.

A change is significant when the two intervals do not overlap, otherwise
within noise.  A record of version 1 (no `runs`), or a figure without a
verdict, has points only: its changes say "no interval".

A baseline (reframe_checks/references/baselines/) enters as a side like a
session's: `Side` {case key: CaseFigures}, its band at each size as the
Estimate (centre, band low, band high); `compare` takes any two sides.
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

from ..judgement.figures import row_estimate
from ..judgement.rule import Estimate
from .verdict import EXIT_INCONCLUSIVE, EXIT_LOSS, EXIT_PASS

BETTER, WORSE, SAME, CHANGED = "better", "worse", "same", "changed"
SIGNIFICANT, NOISE, NO_INTERVAL = "significant", "within noise", "no interval"

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
#: the order of the calls, worst first (Comparison.worst): worse beyond the
#: noise, worse without an interval, the rest, the better last
CALL_ORDER = {WORSE: 0, NO_INTERVAL_CALLS[WORSE]: 1, BETTER: 3, NO_INTERVAL_CALLS[BETTER]: 3}


def judged(a, b, side):
    """(direction, significance, call) of B's Estimate against A's, for a
    unit whose `side` is better (better_side): the direction by the unit;
    significant when the two intervals do not overlap, otherwise within
    noise; the call its direction when significant, `within noise`, or,
    without intervals, its direction and `no interval`."""
    if b.value == a.value:
        direction = SAME
    elif side is None:
        direction = CHANGED
    else:
        direction = BETTER if (b.value < a.value) == (side == "lower") else WORSE
    if is_point(a) or is_point(b):
        return direction, NO_INTERVAL, SAME if direction == SAME else \
            NO_INTERVAL_CALLS[direction]
    if a.hi < b.lo or b.hi < a.lo:
        return direction, SIGNIFICANT, direction
    return direction, NOISE, NOISE


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
    sessions."""
    figure: str
    unit: str
    bytes: float | None
    a: Estimate
    b: Estimate

    @functools.cached_property
    def pct(self):
        if not self.a.value:
            return None
        return 100 * (self.b.value - self.a.value) / abs(self.a.value)

    @functools.cached_property
    def _judged(self):
        return judged(self.a, self.b, better_side(self.unit))

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
    def factor(self):
        return factor_of(self.a, self.b, self.direction)


#: the tuples of sizes the PerSize in memory hold, each once (most curves
#: of a session sweep the same sizes)
_SIZES = {}


class PerSize(collections.abc.Mapping):
    """{bytes: Estimate} held as the sorted sizes (shared with the other
    curves of the same sizes) and their figures in one flat array, an
    Estimate made when asked for: a side of 10,000 cases keeps half a
    million, in a tenth of the memory."""
    __slots__ = ("_sizes", "_figures")

    def __init__(self, per_size):
        sizes = tuple(sorted(per_size))
        self._sizes = _SIZES.setdefault(sizes, sizes)
        self._figures = array("d", [x for size in sizes for e in (per_size[size],)
                                    for x in (e.value, e.lo, e.hi)])

    def __len__(self):
        return len(self._sizes)

    def __iter__(self):
        return iter(self._sizes)

    def _index(self, size):
        i = bisect.bisect_left(self._sizes, size)
        if i == len(self._sizes) or self._sizes[i] != size:
            raise KeyError(size)
        return i

    def _estimate(self, i):
        f = self._figures
        return Estimate(f[3 * i], f[3 * i + 1], f[3 * i + 2])

    def __getitem__(self, size):
        return self._estimate(self._index(size))

    def __contains__(self, size):
        try:
            self._index(size)
        except (KeyError, TypeError):
            return False
        return True

    def common(self, other):
        """[(bytes, this Estimate, other's)] at the sizes both have."""
        if isinstance(other, PerSize) and other._sizes is self._sizes:
            return [(size, self._estimate(i), other._estimate(i))
                    for i, size in enumerate(self._sizes)]
        return [(size, e, other[size]) for size, e in self.items() if size in other]


@dataclasses.dataclass
class CaseFigures:
    """A case's figures on one side: {variable: (unit, Estimate)} and
    {(series, column): (unit, {bytes: Estimate})}."""
    figures: dict
    sizes: dict


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
        return [Change(var, unit, None, ea, self.b.figures[var][1])
                for var, (unit, ea) in self.a.figures.items() if var in self.b.figures]

    @property
    def sizes(self):
        return [Change(label, unit, size, ea, eb)
                for label, unit, pairs in common_sizes(self.a, self.b)
                for size, ea, eb in pairs]


def common_sizes(a, b):
    """[(figure label, unit, [(bytes, A's Estimate, B's)])] of the sizes two
    sides' CaseFigures both have, in the order of `a`; the label the
    column's name, with its series' when two series have that column."""
    found = []
    plain = len(a.sizes) == len({k[1] for k in a.sizes})
    for key, (unit, per_size) in a.sizes.items():
        if key not in b.sizes:
            continue
        other = b.sizes[key][1]
        pairs = per_size.common(other) if isinstance(per_size, PerSize) else \
            [(size, e, other[size]) for size, e in per_size.items() if size in other]
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
        candidates = [(c.call, c.factor, c.figure, c.unit, None, c.a, c.b) for c in figures]
        for label, unit, pairs in common_sizes(case.a, case.b):
            side = better_side(unit)
            for size, ea, eb in pairs:
                direction, _, call = judged(ea, eb, side)
                sizes[call] = sizes.get(call, 0) + 1
                candidates.append((call, factor_of(ea, eb, direction), label, unit, size,
                                   ea, eb))
        for call, factor, label, unit, size, ea, eb in candidates:
            counts[call] = counts.get(call, 0) + 1
            key = (*rank_of(call, factor), seq)
            seq += 1
            if case_worst is None or key < case_worst[0]:
                case_worst = (key, (label, unit, size, ea, eb))
            # the `kept` smallest keys, in a heap of the largest first
            entry = (tuple(-k for k in key), case.key, (label, unit, size, ea, eb))
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
    """`netbench compare`'s exit code from its own per-figure calls: 1
    (a loss shown) when some figure of B is worse than A's beyond the
    noise, 3 (EXIT_NOTHING_IN_COMMON) when A and B have no figure in common
    to compare, else 0.  A change worse without an interval (a record of
    version 1) is not beyond the noise: it does not count."""
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
    size's best launch of the series' run where the record has its
    launches, else the series' rows as points."""
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
            side = better_side(unit)
            for rows in launches:
                for row in rows:
                    if column not in row or "bytes" not in row:
                        continue
                    e = Estimate.point(row[column]) if point else row_estimate(row, column)
                    if finite(e):
                        held = per_size.get(row["bytes"])
                        per_size[row["bytes"]] = e if held is None else best((held, e), side)
            found[(series["name"], column)] = (unit, dict(sorted(per_size.items())))
    return found


def variable_figures(tc, record):
    """{variable: (unit, Estimate)} of a case's performance variables: the
    interval of its verdict where the record has one, else a point."""
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
            found[var] = (unit, e)
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
                 for key, (unit, per_size) in size_figures(record).items()}
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
    loaded files): each size's time per message as the band the runs are
    held to, Estimate(centre, fastest run, the bound a run fails beyond)."""
    side = {}
    for data in baselines:
        partition = f"{data['system']}:{data['partition']}"
        for case in data["cases"]:
            series = "tcp" if case.get("transport") == "raw" else "mpi"
            per_size = {s["bytes"]: Estimate(s["centre"], s["low"], s["upper"])
                        for s in case["sizes"]}
            side[f"{case['case']} | {case['environ']} | {partition}"] = CaseFigures(
                {}, {(series, case["column"]): (case["unit"], per_size)})
    return side


def compare_with_baseline(session, baselines):
    """A session against the baselines of its partitions (A: the baseline,
    B: the session), per size."""
    names = ", ".join(f"{d['system']}:{d['partition']}" for d in baselines)
    return compare(baseline_side(baselines), session_side(session),
                   f"baseline {names}", session.name)

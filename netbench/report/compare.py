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

import dataclasses
import functools
import heapq
import math
import re

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
    def direction(self):
        if self.b.value == self.a.value:
            return SAME
        side = better_side(self.unit)
        if side is None:
            return CHANGED
        lower = self.b.value < self.a.value
        return BETTER if lower == (side == "lower") else WORSE

    @functools.cached_property
    def significance(self):
        if is_point(self.a) or is_point(self.b):
            return NO_INTERVAL
        apart = self.a.hi < self.b.lo or self.b.hi < self.a.lo
        return SIGNIFICANT if apart else NOISE

    @functools.cached_property
    def call(self):
        """What the change amounts to: its direction when significant
        (`worse`, `better`), `within noise`, or, without intervals, its
        direction and `no interval`."""
        significance = self.significance
        if significance == SIGNIFICANT:
            return self.direction
        if significance == NOISE:
            return NOISE
        return SAME if self.direction == SAME else f"{self.direction}, {NO_INTERVAL}"

    @functools.cached_property
    def factor(self):
        """How many times worse (or better) B is than A: a time's B/A, a
        rate's A/B, at least 1; 1 where the unit has no better side or a
        figure is not positive."""
        if self.direction not in (BETTER, WORSE) or self.a.value <= 0 or self.b.value <= 0:
            return 1.0
        return max(self.b.value / self.a.value, self.a.value / self.b.value)


@dataclasses.dataclass
class CaseFigures:
    """A case's figures on one side: {variable: (unit, Estimate)} and
    {(series, column): (unit, {bytes: Estimate})}."""
    figures: dict
    sizes: dict


@dataclasses.dataclass
class CaseComparison:
    key: str
    figures: list
    sizes: list


@dataclasses.dataclass
class Comparison:
    a: str
    b: str
    cases: list
    only_a: list
    only_b: list

    def changes(self):
        return [c for case in self.cases for c in case.figures + case.sizes]

    def counts(self):
        """{call: how many changes}: worse, better, within noise, ..."""
        found = {}
        for c in self.changes():
            found[c.call] = found.get(c.call, 0) + 1
        return found

    def worst(self, limit):
        """The `limit` worst changes, [(case key, Change)]: those worse
        beyond the noise first, the most times worse first, then those
        worse without an interval, the rest, and the better last."""
        ranked = ((rank(c), i, case.key, c) for case in self.cases
                  for i, c in enumerate(case.figures + case.sizes))
        return [(key, c) for _, _, key, c in heapq.nsmallest(limit, ranked,
                                                               key=lambda t: t[:2])]


def rank(change):
    """The sort key of a change, worst first (Comparison.worst)."""
    order = {WORSE: 0, f"{WORSE}, {NO_INTERVAL}": 1, BETTER: 3,
             f"{BETTER}, {NO_INTERVAL}": 3}.get(change.call, 2)
    return (order, -change.factor if order < 3 else change.factor)


#: `netbench compare`'s exit when A and B have no figure in common: the
#: comparison can tell nothing (report/verdict.py's inconclusive)
EXIT_NOTHING_IN_COMMON = EXIT_INCONCLUSIVE


def exit_code(comparison):
    """`netbench compare`'s exit code from its own per-figure calls: 1
    (a loss shown) when some figure of B is worse than A's beyond the
    noise, 3 (EXIT_NOTHING_IN_COMMON) when A and B have no figure in common
    to compare, else 0.  A change worse without an interval (a record of
    version 1) is not beyond the noise: it does not count."""
    changes = comparison.changes()
    if not changes:
        return EXIT_NOTHING_IN_COMMON
    if any(c.call == WORSE for c in changes):
        return EXIT_LOSS
    return EXIT_PASS


def case_key(tc):
    """A case across sessions: its label (no hash), environment, partition."""
    return f"{case_label(tc)} | {tc.get('environ')} | {tc.get('system')}:{tc.get('partition')}"


def finite(e):
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in (e.value, e.lo, e.hi))


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
            for rows in launches:
                for row in rows:
                    if column not in row or "bytes" not in row:
                        continue
                    e = Estimate.point(row[column]) if point else row_estimate(row, column)
                    if finite(e):
                        per_size.setdefault(row["bytes"], []).append(e)
            side = better_side(unit)
            found[(series["name"], column)] = (
                unit, {size: best(es, side) for size, es in sorted(per_size.items())})
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
        figures = CaseFigures(variable_figures(tc, record), size_figures(record))
        if figures.figures or figures.sizes:
            side[case_key(tc)] = figures
    return side


def compare_cases(a, b):
    """The Changes between two sides' CaseFigures, in the order of `a`."""
    figures = [Change(var, unit, None, ea, b.figures[var][1])
               for var, (unit, ea) in a.figures.items() if var in b.figures]
    sizes = []
    for key, (unit, per_size) in a.sizes.items():
        if key not in b.sizes:
            continue
        other = b.sizes[key][1]
        label = key[1] if len(a.sizes) == len({k[1] for k in a.sizes}) else f"{key[0]} {key[1]}"
        sizes.extend(Change(label, unit, size, e, other[size])
                     for size, e in per_size.items() if size in other)
    return figures, sizes


def compare(a_side, b_side, a_name="A", b_name="B"):
    """The Comparison of two sides ({case key: CaseFigures}): the cases
    both have, and those only one has."""
    cases = []
    for key in sorted(a_side):
        if key in b_side:
            figures, sizes = compare_cases(a_side[key], b_side[key])
            cases.append(CaseComparison(key, figures, sizes))
    return Comparison(a_name, b_name, cases, sorted(set(a_side) - set(b_side)),
                      sorted(set(b_side) - set(a_side)))


def compare_sessions(a, b):
    return compare(session_side(a), session_side(b), a.name, b.name)


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

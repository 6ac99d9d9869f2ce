"""Keep a tuning or revert it, from the sessions measured before and
after it in turns.  Pure: sessions' launches in, a Decision (a code and
its numbers; report/reasons.py says it in words) out.

loop.py measures the sides in turns (B AA BB AA B ...), so the i-th
session before the tuning and the i-th after it ran next to each other:
a **round**.  A round's two sessions share the host's load of their
moment, so the evidence is each round's ratio at each message size of
each case's curves (each session's best launch there: a busy host only
ever adds time), decided by the verdict model's paired form
(judgement.model.judge_paired, kind "paired", as container parity is):
the median ratio's order-statistic interval over the rounds against
1 + judging.yaml's min_change.paired.  At a size:

- worse   the paired verdict on the tuned side's slowdowns is a fail;
- better  the paired verdict on its speed-ups is a fail;
- neither otherwise (within the change that counts, or straddling it).

The limit is the knob's alone: it does not grow with the rounds' spread,
so the decision is monotone in the effect: a larger loss (or gain) in
every round is never "no change" (the bound that grew with the spread of
the very effect it measured once called a loss of 2-4.5x in every round
no change).  With `MIN_ROUNDS` (4) rounds the interval is the whole range
of the rounds' ratios, so every round must agree.

A loss or gain along a curve counts when judging.yaml's min_span
neighbouring sizes are beyond the change one after the other
(judgement.curve.curve_span, the baseline's rule too): a setting (a
socket buffer, the MTU) moves a range of sizes, a stall one; a size
beyond the change alone, or with only sizes too noisy to tell beside it,
is kept as noise, not counted.
The performance variables are read off the same curves, so they are shown
(compare), not counted again.  The tuning is kept when some curve
improved and none got worse; otherwise it is reverted, and the record
names the sizes.

Re-test before blame (ClusterKit): a tuning that made some curve better
and another worse is measured again before it is reverted (retest_wanted;
loop.py runs as many rounds again, once), and decided on all its rounds
together: the loss that costs a site a measured gain must hold in every
round of both sets.  A host that sits in one of its core modes for a whole
session moves all the small sizes of that session together, so four
rounds can agree on a loss the settings did not make (validation.md,
"netbench tune").  A loss with no gain beside it is reverted at once:
reverting it costs nothing measured.
"""

import dataclasses
import math
import statistics

from ..judgement import knobs as judging_knobs
from ..judgement import model
from ..judgement.curve import losses
from ..judgement.figures import row_estimate
from ..judgement.model import Estimate
from ..report import compare, sides

KEPT, REVERTED = "kept", "reverted"
#: the decision's codes (report/reasons.py renders them with their numbers)
WORSE, BETTER, NO_CHANGE, TOO_NOISY, FEW_ROUNDS, NOT_MEASURED = (
    "tune_worse", "tune_better", "tune_no_change", "tune_too_noisy", "tune_few_rounds",
    "tune_not_measured")


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One size (or figure) beyond the change that counts: which case,
    figure and size, its medians before and after, and the paired
    verdict's numbers (model.judge_paired) that called it."""
    case: str
    figure: str
    unit: str
    bytes: float | None
    before: float
    after: float
    pct: float | None
    call: str
    numbers: dict = dataclasses.field(default_factory=dict)

    def to_json(self):
        return {"case": self.case, "figure": self.figure, "unit": self.unit,
                "bytes": self.bytes, "before": self.before, "after": self.after,
                "pct": self.pct, "call": self.call, "numbers": self.numbers}


@dataclasses.dataclass(frozen=True)
class Decision:
    kept: bool
    overridden: bool
    #: why, as a code and its numbers (report/reasons.py renders them)
    code: str
    numbers: dict
    improved: tuple
    worse: tuple
    isolated: tuple = ()

    @property
    def outcome(self):
        return KEPT if self.kept else REVERTED


#: rounds (a session before beside one after, in turns) before a change
#: is called: with four, the median ratio's interval is the whole range of
#: the rounds' ratios (judgement.model.median_interval), so all must agree
MIN_ROUNDS = 4


@dataclasses.dataclass
class Launches:
    """A case's figures over a side's sessions: {variable: (unit, [Estimate
    per session])} and {(series, column): (unit, {bytes: [Estimate per
    launch]})}."""
    figures: dict
    sizes: dict


def launch_values(session):
    """{case key: Launches} of one session (sessions.Session): every
    launch's figure at every size with its samples' interval, not only the
    best launch's."""
    from ..report.sections import case_record

    found = {}
    for tc in session.testcases:
        record = case_record(tc)
        figures = {var: (unit, list(es)) for var, (unit, es) in
                   sides.variable_figures(tc, record).items()}
        sizes = {}
        for series in record.get("series", []):
            sizes.update(series_launches(series, record.get("runs") or {}))
        if figures or sizes:
            found[sides.case_key(tc)] = Launches(figures, sizes)
    return found


def series_launches(series, runs):
    """{(series, column): (unit, {bytes: [Estimate of each launch]})} of one
    series: its launches where the record has them (version 2), else its
    rows as one launch of points; a column repeating another in another
    unit (MB/s of Mbit/s) left out."""
    launched = series["name"] in runs
    launches = [launch["rows"] for launch in runs[series["name"]]] if launched \
        else [series["rows"]]
    shown = {y["column"] for y in series["y"]}
    found = {}
    for col in series["y"]:
        column = col["column"]
        if sides.REPEATS.get(column) in shown:
            continue
        per_size = {}
        for row in (row for rows in launches for row in rows):
            if column in row and "bytes" in row:
                e = row_estimate(row, column) if launched else Estimate.point(row[column])
                if sides.finite(e):
                    per_size.setdefault(row["bytes"], []).append(e)
        found[(series["name"], column)] = (col["unit"], per_size)
    return found


def merged_launches(sides):
    """Several sessions' Launches as one side's: the cases, figures and
    sizes every session has, their launches together."""
    common = set.intersection(*(set(side) for side in sides)) if sides else set()
    merged = {}
    for key in sorted(common):
        parts = [side[key] for side in sides]
        figures = {var: (unit, [v for p in parts for v in p.figures[var][1]])
                   for var, (unit, _) in parts[0].figures.items()
                   if all(var in p.figures for p in parts)}
        sizes = {}
        for series, (unit, per_size) in parts[0].sizes.items():
            if all(series in p.sizes for p in parts):
                sizes[series] = (unit, {b: [v for p in parts for v in p.sizes[series][1][b]]
                                        for b in per_size
                                        if all(b in p.sizes[series][1] for p in parts)})
        merged[key] = Launches(figures, sizes)
    return merged


def best_launch(estimates, unit):
    """The side's best launch (compare.best: the lowest time, the highest
    rate)."""
    return compare.best(estimates, compare.better_side(unit))


def pooled_side(sessions):
    """One side's {case key: CaseFigures} from its sessions' launch_values,
    as compare and the page show it: per size and per figure every launch
    of every session."""
    side = {}
    for key, launches in merged_launches(list(sessions)).items():
        variables = {var: (unit, tuple(es))
                     for var, (unit, es) in launches.figures.items() if es}
        sizes = {series: (unit, {b: tuple(es) for b, es in sorted(per_size.items()) if es})
                 for series, (unit, per_size) in launches.sizes.items()}
        side[key] = sides.CaseFigures(variables, sizes)
    return side


def round_values(before_sessions, after_sessions):
    """{case: {(series, column): (unit, {bytes: [(before, after) per
    round]})}}: the sides' sessions paired in the order they ran (loop.py's
    turns make the i-th of each neighbours in time), each session's best
    launch at each size that both have."""
    found = {}
    for before, after in zip(before_sessions, after_sessions):
        for key in sorted(set(before) & set(after)):
            for series, (unit, per_size) in before[key].sizes.items():
                if series not in after[key].sizes:
                    continue
                other = after[key].sizes[series][1]
                sizes = found.setdefault(key, {}).setdefault(series, (unit, {}))[1]
                for size in per_size:
                    if per_size[size] and other.get(size):
                        sizes.setdefault(size, []).append(
                            (best_launch(per_size[size], unit).value,
                             best_launch(other[size], unit).value))
    return found


def slowdowns(pairs, unit):
    """Each round's after over before, as how many times slower the tuned
    side was (a time's ratio, a rate's inverse); rounds without a figure
    left out."""
    side = compare.better_side(unit)
    ratios = []
    for before, after in pairs:
        if before > 0 and after > 0 and math.isfinite(before) and math.isfinite(after):
            ratios.append(after / before if side == "lower" else before / after)
    return ratios


def size_decisions(pairs, unit, knobs, min_rounds=MIN_ROUNDS):
    """(worse, better): model.judge_paired's Decisions at one size from its
    rounds' (before, after) figures, on the tuned side's slowdowns and on
    its speed-ups; None for a unit without a better side."""
    if compare.better_side(unit) is None:
        return None
    ratios = slowdowns(pairs, unit)
    rounds = max(min_rounds, len(ratios))
    return (model.judge_paired(ratios, knobs, min_rounds, rounds, kind="paired"),
            model.judge_paired([1 / r for r in ratios], knobs, min_rounds, rounds,
                               kind="paired"))


def size_call(pairs, unit, knobs=None, min_rounds=MIN_ROUNDS):
    """better, worse or None at one size (size_decisions): worse when the
    slowdowns' paired verdict fails, better when the speed-ups' does."""
    decided = size_decisions(pairs, unit, knobs or judging_knobs.load(), min_rounds)
    if decided is None:
        return None
    worse, better = decided
    if worse.verdict == model.FAIL:
        return compare.WORSE
    if better.verdict == model.FAIL:
        return compare.BETTER
    return None


def series_label(key, case_sizes):
    """The figure's name as compare shows it: the column, or "series
    column" where a case has several series with the column."""
    columns = [k[1] for k in case_sizes]
    return key[1] if len(columns) == len(set(columns)) else f"{key[0]} {key[1]}"


def curve_calls(per_size, unit, knobs, min_rounds=MIN_ROUNDS):
    """{bytes: (call, counted, the deciding Decision)} of one curve's
    sizes beyond the change: each way (worse, better) the sizes' paired
    verdicts in size order: a failing size counts where it is part of the
    curve's loss (judgement.curve.losses, on which curve_span fails it)."""
    sizes = sorted(per_size)
    decided = [size_decisions(per_size[s], unit, knobs, min_rounds) for s in sizes]
    if any(d is None for d in decided):
        return {}
    found = {}
    for way, call in ((0, compare.WORSE), (1, compare.BETTER)):
        verdicts = [d[way].verdict for d in decided]
        counted = set(losses(verdicts, knobs.min_span))
        for i, size in enumerate(sizes):
            if verdicts[i] == model.FAIL:
                found[size] = (call, i in counted, decided[i][way])
    return found


def evidence(rounds, knobs=None, min_rounds=MIN_ROUNDS):
    """(improved, worse, isolated) of the sides' rounds (round_values): the
    sizes called better or worse that decide their curve (curve_calls:
    counted), and those beyond the change alone (shown as noise).  Each
    size once per series: a size's rate repeats its time (the same
    samples), so its first column speaks for it."""
    knobs = knobs or judging_knobs.load()
    improved, worse, isolated = [], [], []
    for key, case_sizes in sorted(rounds.items()):
        seen = set()
        for series, (unit, per_size) in case_sizes.items():
            if series[0] in seen:
                continue
            seen.add(series[0])
            for size, (call, counted, decided) in sorted(
                    curve_calls(per_size, unit, knobs, min_rounds).items()):
                before = statistics.median(b for b, _ in per_size[size])
                after = statistics.median(a for _, a in per_size[size])
                found = Evidence(key, series_label(series, case_sizes), unit, size,
                                 before, after, pct(before, after), call,
                                 {**decided.numbers, "code": decided.code})
                if not counted:
                    isolated.append(found)
                else:
                    (improved if call == compare.BETTER else worse).append(found)
    return tuple(improved), tuple(worse), tuple(isolated)


def pct(before, after):
    return None if not before else 100 * (after - before) / abs(before)


def undecided_sizes(rounds, knobs, min_rounds=MIN_ROUNDS):
    """How many sizes' paired verdicts straddle the change either way (the
    host too noisy at them to tell), of how many judged."""
    straddling = judged = 0
    for case_sizes in rounds.values():
        seen = set()
        for series, (unit, per_size) in case_sizes.items():
            if series[0] in seen:
                continue
            seen.add(series[0])
            for pairs in per_size.values():
                decided = size_decisions(pairs, unit, knobs, min_rounds)
                if decided is None:
                    continue
                judged += 1
                straddling += any(d.verdict not in (model.PASS, model.FAIL) for d in decided)
    return straddling, judged


def retest_wanted(decided, keep=False):
    """Whether a Decision is measured again before it is acted on: a
    loss beside a gain, not yet measured again (and not kept by --keep
    anyway)."""
    return (decided.code == WORSE and bool(decided.improved) and not keep
            and "retested" not in decided.numbers)


def decide(before_sessions, after_sessions, keep=False, knobs=None, first=None):
    """The Decision on a tuning from the sessions' launch_values before and
    after it, each side in the order it ran; `keep` overrides a revert
    (and says so).  `knobs`: judging.yaml's (judgement.knobs.load()).
    `first`: the Decision on the rounds before they were measured again
    (retest_wanted), named in the numbers."""
    knobs = knobs or judging_knobs.load()
    before_sessions, after_sessions = list(before_sessions), list(after_sessions)
    measured = round_values(before_sessions, after_sessions)
    improved, worse, isolated = evidence(measured, knobs)
    rounds = min(len(before_sessions), len(after_sessions))
    numbers = {"rounds": rounds, "min_rounds": MIN_ROUNDS,
               "limit": 1 + knobs.min_change["paired"], "min_span": knobs.min_span,
               "worse": [e.to_json() for e in worse],
               "improved": [e.to_json() for e in improved],
               "isolated": [e.to_json() for e in isolated]}
    kept = False
    if not measured:
        code = NOT_MEASURED
    elif worse:
        code = WORSE
    elif improved:
        code, kept = BETTER, True
    elif rounds < MIN_ROUNDS:
        code = FEW_ROUNDS
    else:
        straddling, judged = undecided_sizes(measured, knobs)
        numbers.update(straddling=straddling, judged=judged)
        code = TOO_NOISY if straddling else NO_CHANGE
    overridden = keep and not kept
    numbers["overridden"] = overridden
    if first is not None:
        numbers["retested"] = {"rounds": first.numbers["rounds"],
                               "worse": [e.to_json() for e in first.worse]}
    return Decision(kept or keep, overridden, code, numbers, improved, worse, isolated)


def state_differences(before, after, where=()):
    """Every setting whose value differs between two read-backs of a host
    (readback.py's JSON), as "path: before -> after" lines."""
    lines = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            lines.extend(state_differences(a, b, (*where, key)))
        elif a != b:
            lines.append(f"{'.'.join(map(str, (*where, key)))}: {a!r} -> {b!r}")
    return lines

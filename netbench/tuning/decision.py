"""Keep a tuning or revert it, from the sessions measured before and
after it in turns.  Pure: sessions' launches in, a Decision out.

loop.py measures the sides in turns (B AA BB AA B ...), so the i-th
session before the tuning and the i-th after it ran next to each other:
a **round**.  A round's two sessions share the host's load of their
moment, so the evidence is each round's ratio at each message size of
each case's curves (each session's best launch there: a busy host only
ever adds time), judged by the project's paired rule
(judgement.rule.decide_paired, as container parity is): the median ratio's
order-statistic interval over the rounds.  At a size:

- worse   the whole interval of the tuned side's slowdown lies beyond
          1 + the rule's baseline.min_band (5 %): a change smaller than
          the narrowest band a baseline has is none a site engineer
          would act on; and beyond 1 + the rounds' disagreement with each
          other (disagreement());
- better  the same of its speed-up;
- neither otherwise: within the noise.

With `MIN_ROUNDS` (4) rounds the interval is the whole range of the
rounds' ratios, so every round must agree.  A scheduler's stall in one
round, or one lucky launch in the fast mode of a bimodal host, is one
round's ratio, not a change.  A change counts when it spans `MIN_RUN`
neighbouring sizes the same way: a setting (a socket buffer, the MTU)
moves a range of sizes, a stall one; a change at a single size is named
in the reason as noise, not counted.  The performance variables are read
off the same curves, so they are shown (compare), not counted again.
The tuning is kept when at least one size improved and none got worse;
otherwise it is reverted, and the reason names the sizes.

Measured on the rules before this one, on a 2-node virtual cluster with
emulated GigE links (README, "Does it help?"):

- the sides one after the other, each side's best launch as the other's
  bound: a profile that changed nothing (the MTU the nodes had) was
  called worse on a drift of the host's load between the blocks; and
  small sizes had to be left uncounted on emulated links, as a phase of
  minutes with every small message 2-7x slower could fall on one side;
- in turns, but the other side's best launch as the bound: the same
  no-op profile was kept, "better" at 1-16 B by 14 %, because one launch
  of 16 after it ran in the host's fast mode (6.9 against 8.0-8.3 us).
"""

import dataclasses
import math
import statistics

from ..judgement import rule as judging
from ..judgement.figures import row_estimate
from ..judgement.rule import Bound, Estimate
from ..report import compare

KEPT, REVERTED = "kept", "reverted"


@dataclasses.dataclass(frozen=True)
class Evidence:
    """One significant change: which case, figure and size, A and B."""
    case: str
    figure: str
    unit: str
    bytes: float | None
    before: float
    after: float
    pct: float | None
    call: str

    def text(self):
        where = self.figure if self.bytes is None else f"{self.figure} at {size(self.bytes)}"
        pct = "" if self.pct is None else f" ({self.pct:+.1f} %)"
        return f"{where}{pct}"


@dataclasses.dataclass(frozen=True)
class Decision:
    kept: bool
    overridden: bool
    reason: str
    improved: tuple
    worse: tuple
    isolated: tuple = ()

    @property
    def outcome(self):
        return KEPT if self.kept else REVERTED


def size(nbytes):
    """8 B, 64 KiB, 1 MiB: a message size as the report names it."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{int(nbytes // scale)} {unit}"
    return f"{nbytes:g} B"


#: rounds (a session before beside one after, in turns) before a change
#: is called: with four, the median ratio's interval is the whole range of
#: the rounds' ratios (judgement.rule.median_interval), so all must agree
MIN_ROUNDS = 4
#: a change is a tuning's when it spans neighbouring sizes: a socket buffer
#: or an MTU moves a range of sizes, a scheduler's stall on a tbf link one
#: size (measured: 6-16 ms at single sizes, in no other session)
MIN_RUN = 2


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
        figures = {var: (unit, [e]) for var, (unit, e) in
                   compare.variable_figures(tc, record).items()}
        sizes = {}
        for series in record.get("series", []):
            sizes.update(series_launches(series, record.get("runs") or {}))
        if figures or sizes:
            found[compare.case_key(tc)] = Launches(figures, sizes)
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
        if compare.REPEATS.get(column) in shown:
            continue
        per_size = {}
        for row in (row for rows in launches for row in rows):
            if column in row and "bytes" in row:
                e = row_estimate(row, column) if launched else Estimate.point(row[column])
                if compare.finite(e):
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
    as compare and the page show it: per size and per figure the best
    launch of every session."""
    side = {}
    for key, launches in merged_launches(list(sessions)).items():
        variables = {var: (unit, best_launch(es, unit))
                     for var, (unit, es) in launches.figures.items() if es}
        sizes = {series: (unit, {b: best_launch(es, unit) for b, es in sorted(per_size.items())
                                 if es})
                 for series, (unit, per_size) in launches.sizes.items()}
        side[key] = compare.CaseFigures(variables, sizes)
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


def disagreement(ratios):
    """How far the rounds' ratios disagree with each other: the largest
    over the smallest, less 1.  A change is called only beyond it: with
    four rounds the median's interval is their whole range (87.5 %
    coverage, not 95), and on a busy host a size's rounds can all lean one
    way by chance (measured, one core busy: 1-2 B "faster" in all four
    rounds by 1.35-3.3x under TCP buffers capped at 4 KiB), where a
    tuning's change moves every round alike (capped buffers, 8 MiB:
    1.59-1.80x; jumbo frames, 32 KiB: 0.82-0.88x)."""
    return max(ratios) / min(ratios) - 1


def size_call(pairs, unit, rule=None, min_rounds=MIN_ROUNDS):
    """better, worse or None at one size from its rounds' (before, after)
    figures: judgement.rule.decide_paired on the slowdowns (worse) and on
    the speed-ups (better), each against 1 + the larger of the rule's
    baseline.min_band and the rounds' disagreement."""
    rule = rule or judging.load_rule()
    if compare.better_side(unit) is None:
        return None
    ratios = slowdowns(pairs, unit)
    if len(ratios) < min_rounds:
        return None
    bound = Bound("upper", 1 + max(rule.baseline_min_band, disagreement(ratios)))
    if judging.decide_paired(ratios, bound, min_rounds, min_rounds).verdict == judging.FAIL:
        return compare.WORSE
    if judging.decide_paired([1 / r for r in ratios], bound, min_rounds,
                             min_rounds).verdict == judging.FAIL:
        return compare.BETTER
    return None


def series_label(key, case_sizes):
    """The figure's name as compare shows it: the column, or "series
    column" where a case has several series with the column."""
    columns = [k[1] for k in case_sizes]
    return key[1] if len(columns) == len(set(columns)) else f"{key[0]} {key[1]}"


def evidence(rounds, min_run=MIN_RUN, min_rounds=MIN_ROUNDS):
    """(improved, worse, isolated) of the sides' rounds (round_values): the
    sizes called better or worse that span at
    least `min_run` neighbouring sizes the same way (counted), and those
    called alone (shown as noise).  Each size once per series: a size's
    rate repeats its time (the same samples), so its first column speaks
    for it."""
    rule = judging.load_rule()
    improved, worse, isolated = [], [], []
    for key, case_sizes in sorted(rounds.items()):
        seen = set()
        for series, (unit, per_size) in case_sizes.items():
            if series[0] in seen:
                continue
            seen.add(series[0])
            sizes = sorted(per_size)
            calls = [size_call(per_size[s], unit, rule, min_rounds) for s in sizes]
            for i, size in enumerate(sizes):
                if calls[i] is None:
                    continue
                run = 1 + run_length(calls, i, -1) + run_length(calls, i, 1)
                before = statistics.median(b for b, _ in per_size[size])
                after = statistics.median(a for _, a in per_size[size])
                found = Evidence(key, series_label(series, case_sizes), unit, size,
                                 before, after, pct(before, after), calls[i])
                if run < min_run:
                    isolated.append(found)
                else:
                    (improved if calls[i] == compare.BETTER else worse).append(found)
    return tuple(improved), tuple(worse), tuple(isolated)


def run_length(calls, i, step):
    """How many neighbours of calls[i], going `step`, share its call."""
    n, j = 0, i + step
    while 0 <= j < len(calls) and calls[j] == calls[i]:
        n, j = n + 1, j + step
    return n


def pct(before, after):
    return None if not before else 100 * (after - before) / abs(before)


def named(found):
    """Every change named, grouped by case and figure: "peak_bw (-17.8 %),
    usec at 512 B (+620.0 %), 16 KiB (+452.2 %)"; the case first when
    there are several."""
    groups = {}
    for e in found:
        groups.setdefault((e.case, e.figure), []).append(e)
    cases = {case for case, _ in groups}
    texts = []
    for (case, figure), changes in groups.items():
        where = f"{case}: " if len(cases) > 1 else ""
        sized = [e for e in changes if e.bytes is not None]
        texts.extend(where + e.text() for e in changes if e.bytes is None)
        if sized:
            texts.append(where + f"{figure} at " + ", ".join(
                size(e.bytes) + ("" if e.pct is None else f" ({e.pct:+.1f} %)") for e in sized))
    return "; ".join(texts)


def decide(before_sessions, after_sessions, keep=False):
    """The Decision on a tuning from the sessions' launch_values before and
    after it, each side in the order it ran; `keep` overrides a revert
    (and says so)."""
    before_sessions, after_sessions = list(before_sessions), list(after_sessions)
    measured = round_values(before_sessions, after_sessions)
    improved, worse, isolated = evidence(measured)
    rounds = min(len(before_sessions), len(after_sessions))
    if not measured:
        reason = "no case was measured both before and after the tuning"
        kept = False
    elif worse:
        reason = f"worse beyond the noise: {named(worse)}"
        if improved:
            reason += f"; better beyond it: {named(improved)}"
        kept = False
    elif improved:
        reason = f"better beyond the noise: {named(improved)}; nothing worse"
        kept = True
    elif rounds < MIN_ROUNDS:
        reason = (f"{rounds} round(s) of a session before beside one after, fewer than the "
                  f"{MIN_ROUNDS} a change is called on")
        kept = False
    else:
        reason = "no figure changed beyond the noise"
        kept = False
    if isolated:
        reason += f"; single sizes beyond the noise, not counted: {named(isolated)}"
    overridden = keep and not kept
    if overridden:
        reason = f"kept by --keep, although the measurement says revert: {reason}"
    return Decision(kept or keep, overridden, reason, improved, worse, isolated)


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

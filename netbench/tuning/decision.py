"""Keep a tuning or revert it, from the comparison of the sessions before
and after it (netbench.report.compare).  Pure: sessions' launches in, a
Decision out.

The evidence is each message size of each case's curves.  A side is every
launch of every session measured on it (`launch_values`, `pooled_side`):
at each size the median of the launches' figures with the judging rule's
interval of that median (judgement.rule.median_interval: order
statistics, the whole range below nine launches).  A launch is the unit,
not a session's best launch with its own samples' interval: that interval
misses the noise between launches and sessions of a busy host (two
untuned sessions on an emulated GigE link differed "beyond their
intervals" at 25 of 48 sizes that way), and a scheduler's stall in one
launch at one size moves the median of several launches little and their
range not past the other side's.

A size's change is beyond the runs' noise when the two sides' intervals
do not overlap (compare's `significant`) and each side has at least
`MIN_LAUNCHES` launches there (loop.py measures more sessions, within its
budget, until it has).  It counts when it spans `MIN_RUN` neighbouring
sizes the same way: a setting (a socket buffer, the MTU) moves a range of
sizes, a stall one; a change at a single size is named in the reason as
noise, not counted.  The performance variables are read off the same
curves, so they are shown (compare), not counted again.  The tuning is
kept when at least one size improved beyond the noise and none got worse
beyond it; otherwise it is reverted, and the reason names the sizes.
"""

import dataclasses
import math
import statistics

from ..judgement.rule import Estimate, median_interval
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


#: launches a side needs at a size before its change is called.  With the
#: whole range as the interval (below nine launches), n launches a side lie
#: wholly apart by chance, when nothing changed, with probability
#: n! n! / (2n)! each way: 1/6 at two, 1/20 at three, 1/70 at four; and a
#: change must hold at two neighbouring sizes (MIN_RUN), so that on the
#: 24 sizes of a ping-pong four launches a side call a change by chance in
#: about 23/70**2 = 0.5 % of tunings each way (were the sizes independent)
MIN_LAUNCHES = 4
#: a change is a tuning's when it spans neighbouring sizes: a socket buffer
#: or an MTU moves a range of sizes, a scheduler's stall on a tbf link one
#: size of one launch (measured: 6-16 ms at single sizes, in no other session)
MIN_RUN = 2


@dataclasses.dataclass
class Launches:
    """A case's figures over a side's sessions: {variable: (unit, [value
    per session])} and {(series, column): (unit, {bytes: [value per
    launch]})}."""
    figures: dict
    sizes: dict


def launch_values(session):
    """{case key: Launches} of one session (sessions.Session): every
    launch's figure at every size, not only the best launch's."""
    from ..report.sections import case_record

    found = {}
    for tc in session.testcases:
        record = case_record(tc)
        figures = {var: (unit, [e.value]) for var, (unit, e) in
                   compare.variable_figures(tc, record).items()}
        sizes = {}
        runs = record.get("runs") or {}
        for series in record.get("series", []):
            launches = [launch["rows"] for launch in runs.get(series["name"], [])] \
                or [series["rows"]]
            shown = {y["column"] for y in series["y"]}
            for col in series["y"]:
                if compare.REPEATS.get(col["column"]) in shown:
                    continue
                per_size = {}
                for rows in launches:
                    for row in rows:
                        value = row.get(col["column"])
                        if "bytes" in row and isinstance(value, (int, float)) \
                                and math.isfinite(value):
                            per_size.setdefault(row["bytes"], []).append(value)
                sizes[(series["name"], col["column"])] = (col["unit"], per_size)
        if figures or sizes:
            found[compare.case_key(tc)] = Launches(figures, sizes)
    return found


def merged_launches(sides):
    """Several sessions' Launches as one side's: the cases, figures and
    sizes every session has, their values together."""
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


def median_estimate(values, min_values=MIN_LAUNCHES):
    """The judging rule's interval of the median of a side's launches
    (rule.median_interval: order statistics, the whole range below nine
    values); a point, which is never called a change, below `min_values`."""
    if len(values) < min_values:
        return Estimate.point(statistics.median(values))
    return median_interval(values)


def pooled_side(sessions, min_values=MIN_LAUNCHES):
    """One side's {case key: CaseFigures} from its sessions' launch_values:
    per size the median of every launch of every session with its
    interval.  A launch, not a session's best, is the unit: the best of a
    session's launches with its own samples' interval misses the noise
    between launches and sessions (two untuned sessions on an emulated GigE
    link differed "beyond their intervals" at 25 of 48 sizes that way), and
    a stall in one launch moves a median of several launches little."""
    side = {}
    for key, launches in merged_launches(list(sessions)).items():
        variables = {var: (unit, median_estimate(values, min_values))
                     for var, (unit, values) in launches.figures.items() if values}
        sizes = {series: (unit, {b: median_estimate(v, min_values)
                                 for b, v in sorted(per_size.items()) if v})
                 for series, (unit, per_size) in launches.sizes.items()}
        side[key] = compare.CaseFigures(variables, sizes)
    return side


def launch_counts(sessions):
    """The fewest launches any case of the sessions has at any size: the
    evidence a side has gathered so far (0 with no case)."""
    counts = [len(values) for launches in merged_launches(list(sessions)).values()
              for _, per_size in launches.sizes.values() for values in per_size.values()]
    return min(counts) if counts else 0


def sized_changes(case):
    """{series figure: [Change at each size, by size]}, each size once per
    series (a size's rate repeats its time: the same samples, so its first
    column speaks for it)."""
    found, seen = {}, set()
    for change in case.sizes:
        series = change.figure.rpartition(" ")[0]     # "usec" or "SERIES usec"
        if (series, change.bytes) in seen:
            continue
        seen.add((series, change.bytes))
        found.setdefault(change.figure, []).append(change)
    return {figure: sorted(changes, key=lambda c: c.bytes) for figure, changes in found.items()}


def called(change):
    """better or worse when beyond the noise, else None."""
    if change.significance != compare.SIGNIFICANT:
        return None
    return change.direction if change.direction in (compare.BETTER, compare.WORSE) else None


def as_evidence(case, change):
    return Evidence(case.key, change.figure, change.unit, change.bytes,
                    change.a.value, change.b.value, change.pct, called(change))


def evidence(comparison, min_run=MIN_RUN):
    """(improved, worse, isolated): the sizes whose change is beyond the
    noise and spans at least `min_run` neighbouring sizes the same way
    (counted), and those beyond it alone (shown as noise, not counted).
    The performance variables are read off the same curves (a size's
    time, the peak of its rates), so they are shown, never counted twice."""
    improved, worse, isolated = [], [], []
    for case in comparison.cases:
        for changes in sized_changes(case).values():
            calls = [called(c) for c in changes]
            for i, change in enumerate(changes):
                if calls[i] is None:
                    continue
                run = 1
                j = i - 1
                while j >= 0 and calls[j] == calls[i]:
                    run, j = run + 1, j - 1
                j = i + 1
                while j < len(calls) and calls[j] == calls[i]:
                    run, j = run + 1, j + 1
                found = as_evidence(case, change)
                if run < min_run:
                    isolated.append(found)
                else:
                    (improved if calls[i] == compare.BETTER else worse).append(found)
    return tuple(improved), tuple(worse), tuple(isolated)


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


def decide(comparison, keep=False):
    """The Decision on a tuning from the Comparison of the sides before
    (A) and after it (B) (pooled_side); `keep` overrides a revert (and
    says so)."""
    improved, worse, isolated = evidence(comparison)
    if not comparison.cases:
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

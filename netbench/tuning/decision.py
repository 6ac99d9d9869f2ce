"""Keep a tuning or revert it, from the comparison of the sessions before
and after it (netbench.report.compare).  Pure: a Comparison in, a Decision
out.

The evidence is every change whose two sides have intervals: each judged
performance variable (the interval its verdict rests on) and each message
size of each case's curves (its best launch's order-statistic interval).
Each side may pool several sessions (`pooled_side`): a figure's interval
is then the hull of the sessions' intervals around their median, because
one launch's interval misses the session-to-session noise of a busy host
(two untuned sessions on an emulated GigE link differed "beyond their
intervals" at 25 of 48 sizes).  A change counts when the intervals do not
overlap (compare's `significant`): beyond the runs' noise.  The tuning is kept when at least
one figure improved beyond the noise and none got worse beyond it;
otherwise it is reverted, and the reason names the figures and sizes.
Changes without intervals (a figure not judged) are shown, never counted.
"""

import dataclasses
import statistics

from ..judgement.rule import Estimate
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

    @property
    def outcome(self):
        return KEPT if self.kept else REVERTED


def size(nbytes):
    """8 B, 64 KiB, 1 MiB: a message size as the report names it."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{int(nbytes // scale)} {unit}"
    return f"{nbytes:g} B"


def pooled(estimates):
    """One Estimate of several sessions': their median value, the lowest
    low and the highest high; a point where any is a point (a figure
    without an interval stays without one)."""
    if any(compare.is_point(e) for e in estimates):
        return Estimate.point(statistics.median(e.value for e in estimates))
    return Estimate(statistics.median(e.value for e in estimates),
                    min(e.lo for e in estimates), max(e.hi for e in estimates))


def pooled_side(sides):
    """Several sessions' sides ({case key: CaseFigures}, compare.session_side)
    as one: the cases and figures every session has, each pooled."""
    common = set.intersection(*(set(side) for side in sides)) if sides else set()
    merged = {}
    for key in sorted(common):
        figures = [side[key] for side in sides]
        variables = {}
        for var, (unit, _) in figures[0].figures.items():
            if all(var in f.figures for f in figures):
                variables[var] = (unit, pooled([f.figures[var][1] for f in figures]))
        sizes = {}
        for series, (unit, per_size) in figures[0].sizes.items():
            if not all(series in f.sizes for f in figures):
                continue
            shared = [b for b in per_size if all(b in f.sizes[series][1] for f in figures)]
            sizes[series] = (unit, {b: pooled([f.sizes[series][1][b] for f in figures])
                                    for b in shared})
        merged[key] = compare.CaseFigures(variables, sizes)
    return merged


def evidence(comparison):
    """(improved, worse): every change beyond the noise, as Evidence.  A
    size's rate repeats its time (the same samples), so each size counts
    once, by its first column."""
    improved, worse = [], []
    for case in comparison.cases:
        seen_sizes = set()
        for change in case.figures + case.sizes:
            if change.significance != compare.SIGNIFICANT:
                continue
            if change.bytes is not None:
                # "usec", or "SERIES usec" where a case has several series
                series = change.figure.rpartition(" ")[0]
                if (series, change.bytes) in seen_sizes:
                    continue
                seen_sizes.add((series, change.bytes))
            if change.direction not in (compare.BETTER, compare.WORSE):
                continue
            found = Evidence(case.key, change.figure, change.unit, change.bytes,
                             change.a.value, change.b.value, change.pct, change.direction)
            (improved if change.direction == compare.BETTER else worse).append(found)
    return tuple(improved), tuple(worse)


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
    """The Decision on a tuning from the Comparison of the session before
    (A) and after it (B); `keep` overrides a revert (and says so)."""
    improved, worse = evidence(comparison)
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
    overridden = keep and not kept
    if overridden:
        reason = f"kept by --keep, although the measurement says revert: {reason}"
    return Decision(kept or keep, overridden, reason, improved, worse)


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

"""Keep a tuning or revert it, from the launches of the sessions before
and after it.  Pure: sessions' launches in, a Decision out.

The evidence is each message size of each case's curves, judged by the
project's rule (judgement.rule.decide) with the other side's best launch
as the bound.  A busy host only ever adds time (judging.yaml): a launch
cannot look better than the system is, so a side's best launch, of every
launch of every session measured on it, is what that side showed it can
do.  At a size:

- worse   the tuned side fails against the untuned side's best launch:
          at least `min_launches_to_fail` of its launches, and every one,
          lie wholly beyond that launch's interval (rule.decide: FAIL);
- better  the untuned side fails the same way against the tuned side's
          best launch;
- neither otherwise: within the noise.

A scheduler's stall in some launches at one size leaves a side's best
launch where it was, so it is no loss; a side whose every launch is
slower is.  On a link that emulates only its rate (tbf), sizes whose wire
time is below the host scheduler's stalls are shown, not counted
(SCHEDULER_STALL_US), as the verdicts do not judge latency there.  A change is called only when each side has at least
`MIN_LAUNCHES` launches at the size (loop.py measures more sessions,
within its budget, until it has), and counted when it spans `MIN_RUN`
neighbouring sizes the same way: a setting (a socket buffer, the MTU)
moves a range of sizes, a stall one; a change at a single size is named
in the reason as noise, not counted.  The performance variables are read
off the same curves, so they are shown (compare), not counted again.
The tuning is kept when at least one size improved and none got worse;
otherwise it is reverted, and the reason names the sizes.

Measured against the earlier rule (each session's best launch with its
own samples' interval, sessions pooled by the hull around their median,
two sessions a side): that kept ethernet_1g on an emulated GigE link with
jumbo frames in 4 of 8 runs, reverting on single small sizes that stalled
(README, "Does it help?").
"""

import dataclasses

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


#: launches a side needs at a size before its change is called: a side's
#: best of four is where the host let it run freely at least once
MIN_LAUNCHES = 4
#: a change is a tuning's when it spans neighbouring sizes: a socket buffer
#: or an MTU moves a range of sizes, a scheduler's stall on a tbf link one
#: size (measured: 6-16 ms at single sizes, in no other session)
MIN_RUN = 2
#: on a link that emulates only its rate (a token bucket on a veth), a
#: message whose time on the wire is shorter than this host's scheduler's
#: stalls (measured 6-16 ms; whole phases of minutes with every launch's
#: small messages 2-7x slower, both sides) is timed by the scheduler, not
#: the link, as judging.py already says of latency there ("reported, not
#: judged"): such sizes are shown, not counted
SCHEDULER_STALL_US = 6000


@dataclasses.dataclass
class Launches:
    """A case's figures over a side's sessions: {variable: (unit, [Estimate
    per session])} and {(series, column): (unit, {bytes: [Estimate per
    launch]})}."""
    figures: dict
    sizes: dict
    #: the smallest size the decision counts (0: every size)
    counted_from: float = 0


def counted_from(provenance):
    """The smallest message the link, not the host's scheduler, times: on
    an emulated (tbf) link, the size whose wire time at the line rate is
    SCHEDULER_STALL_US (1 Gbit/s: 750 kB, so 1 MiB up); else 0."""
    rate = provenance.get("line_rate_mbps")
    if provenance.get("line_rate_source") == "tbf" and rate:
        return SCHEDULER_STALL_US * rate / 8
    return 0


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
            found[compare.case_key(tc)] = Launches(
                figures, sizes, counted_from(record.get("provenance") or {}))
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
        merged[key] = Launches(figures, sizes, max(p.counted_from for p in parts))
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


def launch_counts(sessions):
    """The fewest launches any case of the sessions has at any size it
    counts: the evidence a side has gathered so far (0 with no case)."""
    counts = [len(values) for launches in merged_launches(list(sessions)).values()
              for _, per_size in launches.sizes.values()
              for size, values in per_size.items() if size >= launches.counted_from]
    return min(counts) if counts else 0


def fails_against(launches, other_best, unit, rule, min_launches):
    """Whether `launches` fail against the other side's best launch by the
    judging rule: at least `min_launches`, every one wholly beyond it."""
    side = compare.better_side(unit)
    if side is None or len(launches) < min_launches or compare.is_point(other_best):
        return False
    bound = Bound("upper", other_best.hi) if side == "lower" else Bound("lower", other_best.lo)
    return judging.decide(launches, bound, rule).verdict == judging.FAIL


def size_call(before, after, unit, rule=None, min_launches=MIN_LAUNCHES):
    """better, worse or None at one size from the two sides' launches."""
    rule = rule or judging.load_rule()
    if fails_against(after, best_launch(before, unit), unit, rule, min_launches):
        return compare.WORSE
    if fails_against(before, best_launch(after, unit), unit, rule, min_launches):
        return compare.BETTER
    return None


def series_label(key, case_sizes):
    """The figure's name as compare shows it: the column, or "series
    column" where a case has several series with the column."""
    columns = [k[1] for k in case_sizes]
    return key[1] if len(columns) == len(set(columns)) else f"{key[0]} {key[1]}"


def evidence(before, after, min_run=MIN_RUN, min_launches=MIN_LAUNCHES):
    """(improved, worse, isolated) of two sides' merged Launches: the sizes
    called better or worse that span at least `min_run` neighbouring sizes
    the same way (counted), and those called alone (shown as noise).  Each
    size once per series: a size's rate repeats its time (the same
    samples), so its first column speaks for it."""
    rule = judging.load_rule()
    improved, worse, isolated = [], [], []
    for key in sorted(set(before) & set(after)):
        a, b = before[key].sizes, after[key].sizes
        seen = set()
        for series, (unit, per_size) in a.items():
            if series not in b or series[0] in seen:
                continue
            seen.add(series[0])
            other = b[series][1]
            sizes = [s for s in sorted(per_size) if s in other and per_size[s] and other[s]
                     and s >= max(before[key].counted_from, after[key].counted_from)]
            calls = [size_call(per_size[s], other[s], unit, rule, min_launches) for s in sizes]
            for i, size in enumerate(sizes):
                if calls[i] is None:
                    continue
                run = 1 + run_length(calls, i, -1) + run_length(calls, i, 1)
                found = Evidence(key, series_label(series, a), unit, size,
                                 best_launch(per_size[size], unit).value,
                                 best_launch(other[size], unit).value,
                                 pct(best_launch(per_size[size], unit).value,
                                     best_launch(other[size], unit).value), calls[i])
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
    after it; `keep` overrides a revert (and says so)."""
    before = merged_launches(list(before_sessions))
    after = merged_launches(list(after_sessions))
    improved, worse, isolated = evidence(before, after)
    if not set(before) & set(after):
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

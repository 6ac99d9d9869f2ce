"""What changed between two sessions (`netbench compare A B`): per case, per
figure and per message size, the change in %, and whether it is better or
worse (by the unit: a time is better lower, a rate higher) by the verdict
model, as a check decides.  Pure: sessions in, a Comparison out (cli.py
prints it, compare_page renders it).

Its parts: each side's figures per case (report/sides.py), one figure in
both and its call (report/change.py), and here the cases paired, their
changes tallied and the comparison's exit code.
"""

import dataclasses
import functools
import heapq

from ..judgement import conditions as host_conditions
from .change import (BASELINE, BETTER, CHANGED, FEW_LAUNCHES, FEW_LAUNCHES_CALLS,
                     HOSTS_DIFFERED, HOSTS_DIFFERED_CALLS, NO_INTERVAL, NO_INTERVAL_CALLS,
                     NOISE, SAME, SESSION, SIGNIFICANT, WORSE, Change, Hosts, best,
                     better_side, factor_of, is_point, judged, rank_of)
from .sides import CaseFigures, PerSize, baseline_side, launches_of, session_side
from .verdict import EXIT_INCONCLUSIVE, EXIT_LOSS, EXIT_PASS

#: a comparison's words and its calls on one figure (change.py), named as
#: its callers name them (compare.WORSE), beside what this module defines
__all__ = ["BASELINE", "BETTER", "CHANGED", "FEW_LAUNCHES", "FEW_LAUNCHES_CALLS",
           "HOSTS_DIFFERED", "HOSTS_DIFFERED_CALLS", "NO_INTERVAL", "NO_INTERVAL_CALLS", "NOISE", "SAME", "SESSION", "SIGNIFICANT",
           "WORSE", "Change", "best", "better_side", "is_point", "judged", "session_side",
           "CaseComparison", "Comparison", "EXIT_NOTHING_IN_COMMON", "Tally", "common_sizes",
           "compare", "compare_cases", "compare_sessions", "compare_with_baseline",
           "exit_code", "rank", "tally"]


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
        return [Change(label, unit, size, ea, eb, self.a.kind, hosts(self.a, self.b, series, size))
                for label, unit, pairs, series in common_sizes(self.a, self.b)
                for size, ea, eb in pairs]


def hosts(a, b, series, size):
    """The Hosts of a size of `series` in two sides' CaseFigures: each
    side's launch conditions, and whether the CPUs bound the size on B's
    placement and link (A's where B does not say)."""
    placement = b.placement or a.placement
    return Hosts(a.hosts.get(series, ()), b.hosts.get(series, ()),
                 host_conditions.cpu_bound(placement, b.link_emulated or a.link_emulated, size))


def common_sizes(a, b):
    """[(figure label, unit, [(bytes, A's launches, B's)], series)] of the
    sizes two sides' CaseFigures both have, in the order of `a`; the label
    the column's name, with its series' when two series have that column."""
    found = []
    plain = len(a.sizes) == len({k[1] for k in a.sizes})
    for key, (unit, per_size) in a.sizes.items():
        if key not in b.sizes:
            continue
        other = b.sizes[key][1]
        pairs = per_size.common(other) if isinstance(per_size, PerSize) else \
            [(size, launches_of(e), launches_of(other[size])) for size, e in per_size.items()
             if size in other]
        found.append((key[1] if plain else f"{key[0]} {key[1]}", unit, pairs, key[0]))
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
        candidates = [(c.call, c.factor, c.figure, c.unit, None, c.a_launches, c.b_launches,
                       c.hosts) for c in figures]
        for label, unit, pairs, series in common_sizes(case.a, case.b):
            side = better_side(unit)
            for size, ea, eb in pairs:
                size_hosts = hosts(case.a, case.b, series, size)
                direction, _, call, _ = judged(ea, eb, side, kind, hosts=size_hosts)
                sizes[call] = sizes.get(call, 0) + 1
                candidates.append((call, factor_of(best(ea, side), best(eb, side), direction),
                                   label, unit, size, ea, eb, size_hosts))
        for call, factor, label, unit, size, ea, eb, size_hosts in candidates:
            counts[call] = counts.get(call, 0) + 1
            key = (*rank_of(call, factor), seq)
            seq += 1
            if case_worst is None or key < case_worst[0]:
                case_worst = (key, (label, unit, size, ea, eb, kind, size_hosts))
            # the `kept` smallest keys, in a heap of the largest first
            entry = (tuple(-k for k in key), case.key,
                     (label, unit, size, ea, eb, kind, size_hosts))
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
    (inconclusive) when A and B have no figure in common to compare or
    when a figure worse in every launch ran each under host conditions
    that explain it (as the check would say), else 0.  A change worse in
    too few launches for the model to call, or without an interval (a
    record of version 1), is not a loss the comparison can show: it does
    not count."""
    counts = comparison.counts()
    if not counts:
        return EXIT_NOTHING_IN_COMMON
    if counts.get(WORSE):
        return EXIT_LOSS
    if counts.get(HOSTS_DIFFERED_CALLS[WORSE]):
        return EXIT_INCONCLUSIVE
    return EXIT_PASS



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



def compare_with_baseline(session, baselines):
    """A session against the baselines of its partitions (A: the baseline,
    B: the session), per size."""
    names = ", ".join(f"{d['system']}:{d['partition']}" for d in baselines)
    return compare(baseline_side(baselines), session_side(session),
                   f"baseline {names}", session.name)

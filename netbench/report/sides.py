"""Each side of a comparison (report/compare.py): per case, the figures a
session's records or a learned baseline give.

Each side gives, per case, every launch's Estimate (netbench.judgement.model)
of each figure: a figure with the interval its launch's samples give it.

- per size: every launch of the record's runs (record version 2), each
  row's Estimate (judgement.figures.row_estimate);
- per figure: the case's performance variables, with the interval of the
  launch its verdict rests on (record `verdicts`) where it has one.

A baseline (reframe_checks/references/baselines/) enters as a side like a
session's (kind "baseline"): `Side` {case key: CaseFigures}, its band at
each size as one Estimate (centre, band low, band high), the band's end the
bound a session's launches are held to, as the check holds them.
"""

import bisect
import collections.abc
import dataclasses
import math
import pickle
import re
from array import array

from ..judgement import conditions as host_conditions
from ..judgement.figures import row_estimate
from ..judgement.model import Estimate
from .change import BASELINE, SESSION, best, better_side

#: columns that repeat another column of the same series in another unit
#: (the table shows one)
REPEATS = {"MBps": "Mbps"}


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
    BASELINE); `hosts` {series: what the hosts did during each of its
    launches, in order (conditions.of_launch)}, and what bounds its figures
    (`placement`, `link_emulated`: conditions.cpu_bound)."""
    figures: dict
    sizes: dict
    kind: str = SESSION
    hosts: dict = dataclasses.field(default_factory=dict)
    placement: str = ""
    link_emulated: bool = False



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


def placement_of(case_name):
    """The placement parameter of a case's name (`... %placement=intranode`)."""
    found = re.search(r"%placement=(\S+)", case_name)
    return found.group(1) if found else ""


def launch_conditions(record):
    """{series: (conditions of each launch of its run)} of a record
    (conditions.of_launch); a record without runs has none."""
    return {name: tuple(host_conditions.of_launch(launch) for launch in launches)
            for name, launches in (record.get("runs") or {}).items()}


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
        provenance = record.get("provenance") or {}
        figures = CaseFigures(variable_figures(tc, record), sizes, SESSION,
                              launch_conditions(record), provenance.get("placement", ""),
                              bool(provenance.get("link_emulated")))
        if figures.figures or figures.sizes:
            side[case_key(tc)] = figures
    return side



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
            learned_under = {k: case.get(k) for k in ("cpu_pressure", "core_round_trip_ns")}
            side[f"{case['case']} | {case['environ']} | {partition}"] = CaseFigures(
                {}, {(series, case["column"]): (case["unit"], per_size)}, BASELINE,
                {series: (learned_under,)}, placement_of(case["case"]))
    return side

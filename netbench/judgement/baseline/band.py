"""A baseline's band per message size, built from accepted runs, and a
later run's curve judged against it (a loss spans min_span sizes:
judgement.curve)."""

import datetime
import math
import statistics

from .. import curve, figures, knobs as judging_knobs
from ..model import FAIL, INCONCLUSIVE, PASS, UNDECIDED, Decision
from .files import COLUMN, UNIT, VERSION, check_partition_name


def band(values, min_band, noise=1.0):
    """A size's band from the runs' figures (see the module's docstring);
    `noise`: the run-to-run spread pooled around the size (pooled_noise)."""
    centre = statistics.median(values)
    return {"centre": centre, "low": min(values), "high": max(values),
            "upper": max(max(values), centre * (1 + min_band), centre * noise)}


#: sizes on either side of a size whose runs' spreads are pooled with its own
NOISE_NEIGHBOURS = 2


def pooled_noise(runs, sizes):
    """{size: the run-to-run noise there}: the median, over the size and
    its NOISE_NEIGHBOURS neighbours on either side, of the slowest run's
    figure over the fastest's (1: none).  Three runs at one size say little
    of its noise; its neighbours share its regime (latency sizes the
    scheduler's, bandwidth sizes the link's), so five sizes' spreads
    estimate it from 15 figures."""
    spreads = [max(t[size] for t in runs) / min(t[size] for t in runs) for size in sizes]
    k = NOISE_NEIGHBOURS
    return {size: statistics.median(spreads[max(0, i - k):i + k + 1])
            for i, size in enumerate(sizes)}


def build(partition, sessions, knobs=None):
    """The baseline of `partition` from `sessions` (Accepted, oldest
    first); DataError-free: ValueError saying what is missing."""
    knobs = knobs or judging_knobs.load()
    min_band = knobs.min_change["baseline"]
    per_case = {}
    for session in sessions:
        for key, run in session.partitions.get(partition, {}).items():
            per_case.setdefault(key, []).append(run)
    cases = []
    for (name, environ), runs in sorted(per_case.items()):
        if len(runs) < knobs.baseline_min_runs:
            continue
        sizes = sorted(set.intersection(*(set(r.times) for r in runs)))
        if not sizes:
            raise ValueError(f"{name} @ {environ}: its {len(runs)} runs share no message size")
        prov = runs[-1].provenance
        times = [r.times for r in runs]
        noise = pooled_noise(times, sizes)
        pressures = [r.cpu_pressure for r in runs if r.cpu_pressure is not None]
        trips = [r.core_round_trip_ns for r in runs if r.core_round_trip_ns is not None]
        cases.append({
            "case": name, "environ": environ, "column": COLUMN, "unit": UNIT,
            "runs": len(runs),
            "mpi": " ".join(str(prov.get(k, "")) for k in ("mpi_family", "mpi_version",
                                                           "mpi_source")).strip(),
            "transport": str(prov.get("transport", "")),
            **({"cpu_pressure": round(statistics.median(pressures), 2)} if pressures else {}),
            **({"core_round_trip_ns": round(max(trips), 1)} if trips else {}),
            "sizes": [{"bytes": size, **band([t[size] for t in times],
                                             min_band, noise[size])}
                      for size in sizes]})
    if not cases:
        raise ValueError(f"no case of {partition} passed in {knobs.baseline_min_runs} or more "
                         f"of the {len(sessions)} sessions given")
    system, part = check_partition_name(partition)
    return {"version": VERSION, "system": system, "partition": part,
            "accepted": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ"),
            "min_band": min_band,
            "sessions": [s.provenance for s in sessions],
            "cases": cases}


def figure_spec(nbytes):
    return {"figure": "at", "column": COLUMN, "bytes": nbytes}


def variable(nbytes):
    """The judged variable of one size: `usec@<bytes>`."""
    return f"{COLUMN}@{int(nbytes)}"


def estimates_at(launch_rows, nbytes):
    return figures.estimates(launch_rows, figure_spec(nbytes))


#: the performance variable a case's per-size baseline verdict is reported by:
#: its worst size's figure over the band's bound (above 1: slower)
RATIO = "vs_baseline"


def combine(size_decisions, bounds, source, min_span):
    """One Decision on a case's curve from its per-size ones ({`usec@N`:
    Decision}, with their Bounds): the curve's verdict by judgement.curve
    (a loss spans at least `min_span` neighbouring sizes), reported as the
    ratio of a size's figure to its bound (the worst deciding size's),
    and the per-size list for the record.  A size of the baseline that no
    launch measured (the run never sent it) is not judged: the numbers
    name it missing."""
    missing = sorted(float(var.split("@", 1)[1]) for var, d in size_decisions.items()
                     if not measured(d))
    size_decisions = {var: d for var, d in size_decisions.items() if measured(d)}
    if not size_decisions:
        return Decision(INCONCLUSIVE, 0.0, 0.0, 0.0, 0, "curve_unmeasured",
                        {"source": source, "missing": missing}), []
    return judged_curve(size_decisions, bounds, source, min_span, missing)


def measured(decision):
    """Whether a size's decision rests on a figure some launch measured."""
    return decision.launches > 0 and all(
        isinstance(x, (int, float)) and math.isfinite(x)
        for x in (decision.value, decision.lo, decision.hi))


def size_entry(var, decision, bound):
    return {"bytes": float(var.split("@", 1)[1]), "verdict": decision.verdict,
            "value": decision.value, "lo": decision.lo, "hi": decision.hi,
            "upper": bound, "launches": decision.launches, "code": decision.code,
            **({"conditions": decision.numbers["conditions"]}
               if decision.numbers.get("conditions") else {})}


def judged_curve(size_decisions, bounds, source, min_span, missing):
    """combine's judgement of the sizes measured."""
    sizes = [size_entry(var, d, bounds[var].value)
             for var, d in sorted(size_decisions.items(), key=lambda kv: float(kv[0][5:]))]
    verdict, aside = curve.curve_span([s["verdict"] for s in sizes], min_span)
    for i in aside:
        sizes[i]["alone"] = True
    deciding = [s for i, s in enumerate(sizes) if i not in aside]
    pick = [s for s in deciding if s["verdict"] == verdict] or sizes
    worst = max(pick, key=lambda s: s["value"] / s["upper"])
    conditions = []
    for s in pick:
        for d in s.get("conditions", []):
            if d not in conditions:
                conditions.append(d)
    numbers = {"source": source, "sizes": len(sizes), "min_span": min_span,
               "named": [{"bytes": s["bytes"], "value": s["value"], "upper": s["upper"]}
                         for s in pick if s["verdict"] == verdict and verdict != PASS],
               "aside": [sizes[i]["bytes"] for i in aside], "missing": missing,
               **({"conditions": conditions} if conditions else {})}
    code = {FAIL: "curve_beyond", INCONCLUSIVE: "curve_inconclusive",
            UNDECIDED: "curve_undecided", PASS: "curve_within"}[verdict]
    launches = max(s["launches"] for s in sizes)
    return Decision(verdict, worst["value"] / worst["upper"], worst["lo"] / worst["upper"],
                    worst["hi"] / worst["upper"], launches, code, numbers), sizes

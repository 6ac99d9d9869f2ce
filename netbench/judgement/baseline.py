"""Learned baselines: what this system's own accepted runs measured, per
message size, as the band a later run is held to.

`accept` builds one baseline file per system:partition from at least
`baseline.min_runs` (judging.yaml) accepted sessions.  For every case (its
check and parameters, on one environment) and every message size, each
run gives the time per message of its best launch (the judging rule's
pick: a busy host only adds time).  The band keeps all of them, the fast
and the slow mode of a bimodal host alike:

    centre   the median of the runs' figures
    low      the fastest run's figure
    high     the slowest run's figure
    upper    the bound a later run fails beyond: the slowest run, and never
             less than judging.yaml's min_change.baseline above the centre, nor than the
             run-to-run noise pooled over the size and its neighbours
             (three runs understate a host's noise at any one size)

A case also keeps the conditions its accepted runs were measured under:
the median of their jobs' highest CPU pressure (PSI), and where ranks 0
and 1 shared a host the slowest core round trip of its runs.  A later
run is compared with them (judgement.conditions): a band learned on a
contended host already holds what contention does.

Judging time per message at every size covers latency and bandwidth
alike: at one size, bandwidth is the message over its time.

A baseline file, `reframe_checks/references/baselines/<system>-<partition>
.yaml` (`<system>+<partition>.yaml` when the system's name holds a `-`:
file_for), names its system and partition and judges no other; it carries
its provenance (sessions, commits, MPI builds, tuning state,
date) and is data a site commits.  Pure: reads records and files.
"""

import dataclasses
import datetime
import hashlib
import math
import re
import statistics
from pathlib import Path

import yaml

from .. import datafiles, paths, safefile
from ..datafiles import DataError
from ..results.record import finite_numbers, plain_rows
from ..probe.discovery import ENVIRONMENT_NAME
from . import figures
from . import curve, knobs as judging_knobs
from .model import FAIL, INCONCLUSIVE, PASS, UNDECIDED, Bound, Decision

BASELINES = paths.BASELINES
VERSION = 1
#: the column a baseline holds: time per message (usec), and its unit
COLUMN, UNIT = "usec", "us"

#: what ReFrame allows a system's or a partition's name to be (its
#: configuration schema's alphanum_ext_string, as for an environment's): a
#: baseline's file name is built from them, so nothing else is accepted
NAME = re.compile(ENVIRONMENT_NAME)
_NAME = {"type": "string", "pattern": f"^{NAME.pattern}$",
         "description": "expected a ReFrame system or partition name (letters, digits, _ and -)"}
_NUMBER = {"type": "number", "exclusiveMinimum": 0}
SIZE_SCHEMA = {
    "type": "object", "required": ["bytes", "centre", "low", "high", "upper"],
    "additionalProperties": False,
    "properties": {"bytes": {"type": "number", "minimum": 0}, "centre": _NUMBER,
                   "low": _NUMBER, "high": _NUMBER, "upper": _NUMBER}}
SCHEMA = {
    "type": "object", "required": ["version", "system", "partition", "accepted", "cases"],
    "additionalProperties": False,
    "properties": {
        "version": {"type": "integer", "minimum": 1, "maximum": VERSION,
                    "description": f"expected a baseline version up to {VERSION}"},
        "system": _NAME, "partition": _NAME,
        "accepted": {"type": "string"},
        "min_band": {"type": "number", "minimum": 0, "maximum": 1},
        "sessions": {"type": "array", "items": {"type": "object"}},
        "cases": {"type": "array", "items": {
            "type": "object", "required": ["case", "environ", "column", "unit", "runs",
                                           "sizes"],
            "additionalProperties": False,
            "properties": {
                "case": {"type": "string"}, "environ": {"type": "string"},
                "column": {"enum": [COLUMN]}, "unit": {"enum": [UNIT]},
                "runs": {"type": "integer", "minimum": 1},
                "cpu_pressure": {"type": "number", "minimum": 0, "maximum": 100},
                "core_round_trip_ns": {"type": "number", "exclusiveMinimum": 0},
                "mpi": {"type": "string"}, "transport": {"type": "string"},
                "sizes": {"type": "array", "minItems": 1, "items": SIZE_SCHEMA}}}},
    },
}


def case_name(tc):
    """A case as a baseline names it: its display name without ReFrame's
    hash (`PingPong %variant=blocking %transport=shm %placement=intranode`)."""
    return re.sub(r"\s*/[0-9a-f]{8}$", "", tc.get("display_name") or tc.get("name", ""))


def partition_of(tc):
    return f"{tc.get('system')}:{tc.get('partition')}"


def check_partition_name(partition):
    """`partition` (`system:partition`) as two ReFrame names; ValueError
    saying what is wrong otherwise."""
    system, _, part = str(partition).partition(":")
    for what, name in (("system", system), ("partition", part)):
        if not NAME.fullmatch(name):
            raise ValueError(f"{what} {name!r} of {partition!r} is not a ReFrame {what} name "
                             f"(letters, digits, _ and -, not starting with a digit or -)")
    return system, part


def file_for(partition, folder=BASELINES):
    """The baseline file of `partition` inside `folder`: `<system>-<partition>
    .yaml`, or `<system>+<partition>.yaml` when the system's name holds a
    `-`, so that no two partitions share a file (`a-b:c` and `a:b-c` would
    both be `a-b-c`; ReFrame's names never hold a `+`).  ValueError for a
    name ReFrame would not allow (a path, `..`, a control character)."""
    system, part = check_partition_name(partition)
    joint = "+" if "-" in system else "-"
    return safefile.child(folder, f"{system}{joint}{part}.yaml")


def best_launch_times(record):
    """{bytes: usec} of a case's record: at each size the best (fastest)
    launch of its own run (the first series), or {} without launches.
    ValueError naming the key (inside the record) of a row with a time but
    no message size."""
    series = record.get("series") or []
    runs = record.get("runs") or {}
    launches = runs.get(series[0]["name"]) if series else None
    if not launches:
        return {}
    best = {}
    for i, launch in enumerate(launches):
        for j, row in enumerate(launch["rows"]):
            if COLUMN in row and row[COLUMN] > 0:
                if "bytes" not in row:
                    raise ValueError(datafiles.dotted(("runs", series[0]["name"], i, "rows", j,
                                                       "bytes")))
                size = row["bytes"]
                best[size] = min(best.get(size, row[COLUMN]), row[COLUMN])
    return best


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


def slowest_core_round_trip(record):
    """The slowest mode a case's record ran its launches in, as a core
    round trip (ns), over its own run's launches (the first series), or
    None where none was measured.  A launch's mode is the faster of its
    readings before and after: one reading alone can catch a spike (2487
    ns after a launch whose 64-byte latency was the fast mode's 0.28 us,
    with 114 ns before it), and a baseline that kept it would take every
    later slow-mode run for a loss."""
    series = record.get("series") or []
    launches = (record.get("runs") or {}).get(series[0]["name"]) if series else None
    seen = [min(launch["core_round_trip_ns"]) for launch in launches or []
            if launch.get("core_round_trip_ns")]
    return max(seen) if seen else None


def accepted_pressure(records):
    """The median CPU pressure (PSI some avg10, %) the accepted runs' jobs
    saw, or None where none recorded it."""
    seen = [r["host"]["cpu_pressure"] for r in records
            if isinstance((r.get("host") or {}).get("cpu_pressure"), (int, float))]
    return statistics.median(seen) if seen else None


@dataclasses.dataclass
class CaseRun:
    """What a baseline keeps of one case's passed run in one session."""
    #: {bytes: usec}: best_launch_times
    times: dict
    #: the record's provenance (its MPI and transport)
    provenance: dict
    #: the CPU pressure its job read (PSI some avg10, %), or None
    cpu_pressure: object
    #: slowest_core_round_trip, or None
    core_round_trip_ns: object


class Unfit(DataError):
    """A baseline built that could not judge (check): not written."""


@dataclasses.dataclass
class Accepted:
    """A session as a baseline reads it, without the rest of its run
    report (a 10,000-case report takes hundreds of MB parsed): its
    provenance and, per system:partition, its passed cases' runs."""
    provenance: dict
    #: {system:partition: {(case name, environ): CaseRun}}
    partitions: dict
    #: what the session measured, whatever its session_info says:
    #: two sessions with one fingerprint are copies of one run
    fingerprint: str


def testcases_with_keys(report):
    """(key path, case) of the last run of every case (ReFrame reruns
    failed ones), as report.sessions.Session.testcases picks them."""
    cases = {}
    for i, run in enumerate(report.get("runs", [])):
        for j, tc in enumerate(run.get("testcases", [])):
            cases[(tc.get("unique_name"), tc.get("system"), tc.get("partition"),
                   tc.get("environ"))] = (("runs", i, "testcases", j), tc)
    return list(cases.values())


#: what a baseline reads of a record (results.record.SCHEMA's parts):
#: checked where it is read, not the whole record (read_of_record)
RECORD_READ_SCHEMA = {"type": "object", "properties": {
    "series": {"type": "array", "items": {"type": "object", "required": ["name"],
                                          "properties": {"name": {"type": "string"}}}},
    "runs": {"type": "object", "additionalProperties": {"type": "array", "items": {
        "type": "object", "required": ["rows"], "properties": {
            "rows": {"type": "array", "items": {"type": "object",
                                                "additionalProperties": {"type": "number"}}},
            "core_round_trip_ns": {"type": "array", "items": {"type": "number"}}}}}},
    "provenance": {"type": "object"},
    "host": {"type": "object", "additionalProperties": {"type": ["number", "null"]}},
}}


#: what a baseline reads of a run report's case (report.sessions._TESTCASE's)
CASE_READ_SCHEMA = {"type": "object", "properties": {
    **{key: {"type": "string"} for key in ("name", "display_name", "unique_name", "system",
                                           "partition", "environ", "result")},
    "record": {"type": ["object", "null"]}}}


def plain_case(tc):
    """True only for a case CASE_READ_SCHEMA accepts."""
    return type(tc) is dict and all(type(tc[key]) is str for key in CASE_READ_SCHEMA[
        "properties"] if key in tc and key != "record") \
        and type(tc.get("record")) in (dict, type(None))


def read_of_record(record):
    """The parts of a record a baseline reads (its first series' name, that
    run's launches, its provenance and host), as a record of its own."""
    series = record.get("series")
    name = series[0].get("name") if isinstance(series, list) and series \
        and isinstance(series[0], dict) else None
    runs = record.get("runs")
    read = {key: record[key] for key in ("series", "provenance", "host") if key in record}
    if isinstance(runs, dict) and isinstance(name, str) and name in runs:
        read["runs"] = {name: runs[name]}
    elif "runs" in record:
        read["runs"] = runs if not isinstance(runs, dict) else {}
    return read


def plain_read(read):
    """True only for a read_of_record that RECORD_READ_SCHEMA accepts,
    decided by plain Python (tens of thousands of records); anything else
    is left to jsonschema, to name."""
    series, runs = read.get("series", []), read.get("runs", {})
    if type(series) is not list or not all(type(s) is dict and type(s.get("name")) is str
                                           for s in series[:1]) or type(runs) is not dict:
        return False
    if type(read.get("provenance", {})) is not dict or type(read.get("host", {})) is not dict:
        return False
    host = [v for v in read.get("host", {}).values() if v is not None]
    if not finite_numbers(host):
        return False
    for launches in runs.values():
        if type(launches) is not list or not all(
                type(launch) is dict and type(launch.get("rows")) is list
                and plain_rows(launch["rows"])
                and type(launch.get("core_round_trip_ns", [])) is list
                and finite_numbers(launch.get("core_round_trip_ns", []))
                for launch in launches):
            return False
    return True


def accepted_runs(session):
    """The Accepted of a session (report.sessions.Session): its passed
    cases with launches.  What it reads of a record is checked there
    (RECORD_READ_SCHEMA).  DataError naming the run report and the key of
    a system or partition ReFrame would not name so (it becomes a file
    name), of a launch row without its message size, or of a figure that
    is no number."""
    partitions = {}
    for i, run in enumerate(session.report["runs"]):
        for j, tc in enumerate(run.get("testcases") or []):
            if not plain_case(tc):
                datafiles.validate(tc, CASE_READ_SCHEMA, session.source,
                                   ("runs", i, "testcases", j))
    for where, tc in testcases_with_keys(session.report):
        if tc.get("result") != "pass":
            continue
        record = read_of_record(tc.get("record") or {})
        if not plain_read(record):
            datafiles.validate(record, RECORD_READ_SCHEMA, session.source, (*where, "record"))
        try:
            times = best_launch_times(record)
        except ValueError as err:
            raise DataError(session.source, datafiles.dotted((*where, "record")) + f".{err}",
                            "missing: a launch row with a time needs its message size") from err
        if not times:
            continue
        for field in ("system", "partition"):
            if not isinstance(tc.get(field), str) or not NAME.fullmatch(tc[field]):
                raise DataError(session.source, datafiles.dotted((*where, field)),
                                f"{tc.get(field)!r} is not a ReFrame {field} name (letters, "
                                f"digits, _ and -): a baseline's file is named after it")
        host = record.get("host") or {}
        pressure = host.get("cpu_pressure")
        runs = partitions.setdefault(partition_of(tc), {})
        runs[(case_name(tc), tc.get("environ", ""))] = CaseRun(
            times, record.get("provenance") or {},
            pressure if isinstance(pressure, (int, float)) else None,
            slowest_core_round_trip(record))
    digest = hashlib.sha256(repr(sorted(
        (part, sorted((key, sorted(run.times.items())) for key, run in runs.items()))
        for part, runs in partitions.items())).encode()).hexdigest()
    return Accepted(session_provenance(session), partitions, digest)


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


def session_provenance(session):
    prov = session.provenance or {}
    return {"uuid": session.uuid, "name": session.name,
            "commit": prov.get("netbench_commit"),
            "spack_lock_sha256": prov.get("spack_lock_sha256"),
            "tuning_state": prov.get("tuning_state"),
            "mpis": sorted(f"{name} {info.get('version', '')}".strip()
                           for name, info in (prov.get("mpis") or {}).items())}


#: the YAML dumper: libyaml's where PyYAML has it, the same output either way
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
HEADER = ("# netbench baseline (netbench baseline accept): what this partition's own\n"
          "# accepted runs measured; a site commits it.  netbench/judgement/baseline.py\n")
#: a case's empty sizes as dumped (dumped), and where its sizes go instead
_EMPTY_SIZES = re.compile(r"^( *)sizes: \[\]$", re.MULTILINE)


def yaml_number(value):
    """A checked (finite) number as PyYAML's SafeRepresenter writes it: a
    float keeps a `.` before its exponent (YAML 1.1 reads `1e-05` as text)."""
    if type(value) is int:
        return str(value)
    text = repr(value).lower()
    return text.replace("e", ".0e", 1) if "." not in text and "e" in text else text


def dumped(baseline):
    """The YAML of a checked baseline.  PyYAML represents 240,000 sizes in
    pure Python (18 s for a 10,000-case session): the cases are dumped by
    PyYAML without their sizes, and each size, numbers only, is written as
    the flow mapping PyYAML would write.  A case whose text made the dump
    ambiguous (a line that reads like an empty `sizes`) is dumped whole by
    PyYAML."""
    def dump(data):
        return yaml.dump(data, Dumper=DUMPER, sort_keys=False, default_flow_style=None,
                         width=100)
    cases = baseline["cases"]
    text = dump({**baseline, "cases": [{**case, "sizes": []} for case in cases]})
    found = list(_EMPTY_SIZES.finditer(text))
    if len(found) != len(cases):
        return HEADER + dump(baseline)
    out, last = [HEADER], 0
    for match, case in zip(found, cases):
        indent = match.group(1)
        out += [text[last:match.start()], f"{indent}sizes:\n"]
        out += [f"{indent}- {{" + ", ".join(f"{key}: {yaml_number(value)}"
                                            for key, value in size.items()) + "}\n"
                for size in case["sizes"]]
        last = match.end() + 1
    out.append(text[last:])
    return "".join(out)


def write(baseline, folder=BASELINES):
    """Write the baseline file, checked first as `load` checks one (check):
    a baseline that could not judge is refused (DataError naming the key)
    and the file there is left as it was.  Written by safefile.atomic_write
    (a file created exclusively beside it, renamed: never through a link
    planted there).  `folder` is made if its parent exists; a folder that
    cannot be made or written is a DataError naming it.  Its path."""
    try:
        path = file_for(f"{baseline['system']}:{baseline['partition']}", folder)
    except ValueError as err:
        raise DataError(folder, None, str(err)) from err
    try:
        check(baseline, path)
    except DataError as err:
        raise Unfit(err.path, err.key, err.problem) from err
    text = dumped(baseline)
    try:
        Path(folder).mkdir(exist_ok=True)        # no tree from a typo: its parent must exist
        safefile.atomic_write(path, text)
    except OSError as err:
        raise DataError(err.filename or folder, None,
                        f"cannot write the baseline: {err.strerror}") from err
    return path


def load(path):
    """A baseline file, checked (check): DataError naming the file and key."""
    return check(datafiles.load_yaml(path), Path(path))


#: SCHEMA less its sizes, which check_sizes checks (a 10,000-case baseline
#: holds 240,000 of them: jsonschema would take most of a minute)
_CASES_SCHEMA = {**SCHEMA, "properties": {**SCHEMA["properties"], "cases": {
    **SCHEMA["properties"]["cases"], "items": {
        **SCHEMA["properties"]["cases"]["items"], "properties": {
            **SCHEMA["properties"]["cases"]["items"]["properties"],
            "sizes": {"type": "array", "minItems": 1}}}}}}
_SIZE_KEYS = frozenset(SIZE_SCHEMA["properties"])


def check(data, path):
    """A baseline (read from, or to be written to, `path`) as one that can
    judge: SCHEMA, every figure finite, a band's low <= centre <= high <=
    upper, and the system and partition it names those of its file's name
    (file_for): a baseline renamed or copied to another partition's name
    judges nothing.  DataError naming the file and key; `data` otherwise."""
    datafiles.validate(data, _CASES_SCHEMA, path)
    for i, case in enumerate(data["cases"]):
        check_sizes(case["sizes"], path, ("cases", i, "sizes"))
    named = f"{data['system']}:{data['partition']}"
    if file_for(named, path.parent).name != path.name:
        raise DataError(path, "system", f"holds the baseline of {named}, whose file is "
                                        f"{file_for(named, path.parent).name}: a baseline "
                                        f"judges only the partition it names")
    return data


def plain_size(size):
    """True only for a size SIZE_SCHEMA accepts whose figures are finite."""
    return type(size) is dict and size.keys() == _SIZE_KEYS \
        and all(type(v) in (int, float) and math.isfinite(v) and v > 0
                for k, v in size.items() if k != "bytes") \
        and type(size["bytes"]) in (int, float) and 0 <= size["bytes"] < math.inf


def check_sizes(sizes, path, where):
    for j, size in enumerate(sizes):
        key = (*where, j)
        if not plain_size(size):
            datafiles.validate(size, SIZE_SCHEMA, path, key)
            bad = next((k for k, v in size.items() if not math.isfinite(v)), None)
            raise DataError(path, datafiles.dotted((*key, bad) if bad else key),
                            f"not a finite number: {size[bad]}" if bad else
                            "expected finite numbers")
        if not size["low"] <= size["centre"] <= size["high"] <= size["upper"]:
            raise DataError(path, datafiles.dotted(key),
                            "a band needs low <= centre <= high <= upper")


def for_partition(partition, folder=BASELINES):
    """The loaded baseline of `partition`, or None when it has none."""
    try:
        path = file_for(partition, folder)
    except ValueError:
        return None     # no baseline is ever written for a name ReFrame would not allow
    return load(path) if path.exists() else None


def case_of(baseline, name, environ):
    """The baseline's entry of case `name` on `environ`, or None."""
    for case in (baseline or {}).get("cases", []):
        if case["case"] == name and case["environ"] == environ:
            return case
    return None


def case_bounds(case):
    """{bytes: Bound} a case's entry (case_of) holds it to; {} for None."""
    return {s["bytes"]: Bound("upper", s["upper"]) for s in (case or {}).get("sizes", [])}


def figure_spec(nbytes):
    return {"figure": "at", "column": COLUMN, "bytes": nbytes}


def variable(nbytes):
    """The judged variable of one size: `usec@<bytes>`."""
    return f"{COLUMN}@{int(nbytes)}"


def estimates_at(launch_rows, nbytes):
    return figures.estimates(launch_rows, figure_spec(nbytes))


def show(baseline):
    """Lines for `netbench baseline show`."""
    lines = [f"{baseline['system']}:{baseline['partition']}: accepted {baseline['accepted']} "
             f"from {len(baseline.get('sessions', []))} sessions "
             f"({', '.join(s.get('name', '') for s in baseline.get('sessions', []))})"]
    for case in baseline["cases"]:
        pressure = (f"; CPU pressure {case['cpu_pressure']:g} %"
                    if case.get("cpu_pressure") is not None else "")
        trip = (f"; core round trip up to {case['core_round_trip_ns']:g} ns"
                if case.get("core_round_trip_ns") is not None else "")
        lines.append(f"  {case['case']} @ {case['environ']} ({case.get('mpi', '')}; "
                     f"{case['runs']} runs{pressure}{trip})")
        for s in case["sizes"]:
            lines.append(f"    {int(s['bytes']):>9} B  {s['centre']:.4g} {case['unit']}  "
                         f"band {s['low']:.4g}-{s['high']:.4g}, fails above {s['upper']:.4g}")
    return lines


#: the performance variable a case's per-size baseline verdict is reported by:
#: its worst size's figure over the band's bound (above 1: slower)
RATIO = "vs_baseline"


def size_words(nbytes):
    for factor, unit in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if nbytes >= factor:
            return f"{nbytes / factor:g} {unit}"
    return f"{nbytes:g} B"


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

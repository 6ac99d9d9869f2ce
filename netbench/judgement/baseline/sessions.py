"""What a baseline reads of the sessions it accepts: each passed case's
best launch per size and the conditions its runs were measured under,
checked where it is read (a run report of 10,000 cases is not validated
whole)."""

import dataclasses
import hashlib
import statistics

from ... import datafiles
from ...datafiles import DataError
from ...results.record import finite_numbers, plain_rows
from .files import COLUMN, NAME, case_name, partition_of


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
    """The median CPU pressure (PSI, % of a launch's time) the accepted runs' jobs
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
    #: the CPU pressure its job read (PSI, % of a launch's time), or None
    cpu_pressure: object
    #: slowest_core_round_trip, or None
    core_round_trip_ns: object


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


def session_provenance(session):
    prov = session.provenance or {}
    return {"uuid": session.uuid, "name": session.name,
            "commit": prov.get("netbench_commit"),
            "spack_lock_sha256": prov.get("spack_lock_sha256"),
            "tuning_state": prov.get("tuning_state"),
            "mpis": sorted(f"{name} {info.get('version', '')}".strip()
                           for name, info in (prov.get("mpis") or {}).items())}

"""The record each test case writes: everything the report needs to draw
and judge the case again, years later, without the checks or today's
reference files.

    version      the record format (VERSION); a reader refuses newer ones
    section      the report section that draws the case (SECTIONS)
    label        the legend label of its curves
    group        the line of the scaling plot the case is one point of
                 (throughput and scaling sections; "" elsewhere)
    series       what it measured: [{name, x: {column, unit},
                 y: [{column, unit}], rows: [{column: number}]}]
    references   what it was judged by, per performance variable: the
                 value as judged (the figure scaled to the partition),
                 lower and upper bounds as ReFrame's fractions of it, unit,
                 figure key and citation (none for a rule of netbench's
                 own), interconnect class, and optionally where the figure
                 is drawn (`at`: series, y column, message size)
    provenance   where and how it ran: MPI family, version, source,
                 transport, placement, ranks, ranks per node, partition,
                 interconnect class, line rate and its source
    runs         (version 2) every launch of every run of the job, as the
                 benchmark's output was parsed once: {run name: [{columns,
                 rows (every column), summary (the `@` lines), placements,
                 failure (the launcher's), host_load, cpu_pressure,
                 core_round_trip_ns (before and after, ranks 0 and 1 on
                 one host), nodes ({host: cpu_pressure, ranks, cpus,
                 rank_wait (newer benchmarks)}, every
                 node of the launch), path (what its MPI library said it
                 used: transport, provider, device, evidence;
                 results.datapath)}]}; the
                 first launch of a run is its series, the later ones are
                 the re-measurements the judging rule asked for
    verdicts     (version 2) per judged variable, the rule's decision
                 (netbench.judgement.model): verdict, value, lo, hi,
                 launches, its reason's code and numbers, their words
                 (reason), and the bound it was held to
    verdict      (version 2) the case's: pass, fail or inconclusive
    host         (version 2, judged cases) the job's load after the launches,
                 the highest CPU pressure any node read in any launch, and
                 the slowest core round trip of its launches (ranks 0 and
                 1 on one host)
    layers       (optional) the layers below the MPI measured beside it in
                 the same job: per layer its figures, why a layer was not
                 run, where the loss is (netbench.judgement.layers: reason
                 code and numbers) and the MPI's transport settings
    path         (version 2, MPI runs) the path the case's library said
                 it used in its first launch (transport, provider,
                 device, evidence) and the path verdict of all its launches
                 (netbench.judgement.path: verdict, code, asked, used,
                 launch, launches, evidence)
    node_state   (version 2) per host, the settings the tuning profiles touch
                 as the node had them when the job ran (netbench.probe.nodestate);
                 provenance also carries netbench's commit and spack.lock's
                 hash as the run had them

Pure data: built by the checks (netbench.checks), read by the report.
"""

import copy
import math

from ..datafiles import DataError, dotted, validate
from .suspects import SUSPECT_SCHEMA

#: the format of the record; readers refuse a newer one
VERSION = 2

#: every section the report draws, and what it draws of a case there
SECTIONS = {
    "pingpong": "latency and bandwidth curves, reference points, Hockney fit",
    "mpi_vs_tcp": "MPI's bandwidth loss against raw TCP (series `mpi` and `tcp`)",
    "throughput": "throughput per process per message size, and the peak per "
                  "process count (scaling plot)",
    "scaling": "the peak per process count only (scaling plot)",
    "tcp_tuning": "raw TCP bandwidth per message size (socket buffers, streams)",
    "mtu": "bandwidth and throughput per message size at each MTU",
    "container": "the same sweep natively and inside the container image (series "
                 "`native` and `container`), side by side per transport",
    "figures_only": "no curve: the case's figures in the table only",
    "sweep": "every pair of nodes: heat maps of latency and bandwidth, the suspects "
             "(record field `fleet`)",
}

#: a judged figure's and a case's verdicts (netbench.judgement.model)
VERDICTS = ("pass", "fail", "undecided", "inconclusive")

#: the sections whose cases are points of the scaling plot, on the line
#: their `group` names
SCALING_SECTIONS = ("throughput", "scaling")

#: the series of a `container` record: the sweep on the host, then in the image
CONTAINER_SERIES = ("native", "container")

_STRING = {"type": "string"}
_NUMBER = {"type": "number"}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}
#: the path a launch's MPI library said it used (results.datapath)
_PATH = {"type": "object", "required": ["transport", "provider", "device", "evidence"],
         "properties": {"transport": {"type": "string"}, "provider": {"type": "string"},
                        "device": {"type": "string"}, "evidence": {"type": "string"}}}
_COLUMN = {"type": "object", "required": ["column", "unit"], "additionalProperties": False,
           "properties": {"column": _STRING, "unit": _STRING}}

SCHEMA = {
    "type": "object",
    "required": ["version", "section", "label", "series", "references", "provenance"],
    "additionalProperties": False,
    "properties": {
        "version": {"type": "integer", "minimum": 1, "maximum": VERSION,
                    "description": f"expected a record version up to {VERSION}"},
        "section": {"enum": list(SECTIONS)},
        "label": _STRING,
        "group": _STRING,
        "series": {"type": "array", "items": {
            "type": "object", "required": ["name", "x", "y", "rows"],
            "additionalProperties": False,
            "properties": {
                "name": _STRING, "x": _COLUMN, "y": {"type": "array", "items": _COLUMN},
                "rows": {"type": "array", "items": {
                    "type": "object", "additionalProperties": _NUMBER}},
            }}},
        "references": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["value", "lower", "upper", "unit"],
            "additionalProperties": False,
            "properties": {
                "value": _NUMBER, "lower": _NUMBER_OR_NULL, "upper": _NUMBER_OR_NULL,
                "unit": _STRING, "figure": _STRING_OR_NULL, "citation": _STRING_OR_NULL,
                "interconnect": _STRING_OR_NULL,
                "at": {"type": "object", "required": ["series", "y", "bytes"],
                       "additionalProperties": False,
                       "properties": {"series": _STRING, "y": _STRING, "bytes": _NUMBER}},
            }}},
        # a fabric sweep's pair matrix and what it found (checks: LinkSweep)
        "fleet": {"type": "object", "required": ["hosts", "pairs", "suspects"], "properties": {
            "hosts": {"type": "array", "items": _STRING},
            "pairs": {"type": "array", "items": {
                "type": "object", "required": ["src", "dst"],
                "properties": {"src": _STRING, "dst": _STRING,
                               "latency_us": _NUMBER_OR_NULL,
                               "bw_Mbps": {"type": "object",
                                           "additionalProperties": _NUMBER}}}},
            # as suspects.json holds them: publish writes drain.sh from them
            "suspects": {"type": "array", "items": SUSPECT_SCHEMA},
            # left undecided: measured in one pass of a sweep cut short,
            # outside the band on a host too contended to tell, or within
            # the band the fleet's spread widened: listed, not drained
            "unconfirmed": {"type": "array", "items": SUSPECT_SCHEMA},
            # why (LinkSweep.undecided_reason), also when a node is named
            "unconfirmed_why": _STRING_OR_NULL,
            "findings": {"type": "array", "items": _STRING},
            "remeasured": {"type": "array", "items": {"type": "array", "items": _STRING}},
            "sweep_seconds": _NUMBER_OR_NULL,
            # the job's time limit (LinkSweep derives it: checks/sweeptime.py),
            # and the directions a first pass cut short by it did not reach
            "time_limit_s": {"type": ["integer", "null"]},
            "not_measured": {"type": "array", "items": _STRING},
            # node -> its leaf switch, in the topology's order (a partition
            # with extras `topology`)
            "leaves": {"type": "object", "additionalProperties": _STRING},
            # the rounds it measured and how: concurrent (a round's pairs
            # at once) or sequential (one pair at a time)
            "rounds": {"type": "integer"},
            "order": {"enum": ["concurrent", "sequential", None]},
            # why a sweep that named nobody is not whole (verdict fail, no answer)
            "no_answer": _STRING_OR_NULL,
        }},
        # variable -> [first sweep, re-measurement]: a judged figure out of
        # bounds is swept again before it fails (checks/netbench_run.py)
        "remeasured": {"type": "object", "additionalProperties": {
            "type": "array", "items": _NUMBER, "minItems": 2}},
        # variable -> why it was measured but deliberately not judged
        "unjudged": {"type": "object", "additionalProperties": _STRING},
        "runs": {"type": "object", "additionalProperties": {"type": "array", "items": {
            "type": "object", "required": ["columns", "rows", "summary"],
            "properties": {
                "columns": {"type": "array", "items": _STRING},
                "rows": {"type": "array", "items": {
                    "type": "object", "additionalProperties": _NUMBER}},
                "summary": {"type": "object", "additionalProperties": _NUMBER},
                "placements": {"type": "object", "additionalProperties": {"type": "object"}},
                "failure": _STRING_OR_NULL,
                "host_load": _NUMBER_OR_NULL, "cpu_pressure": _NUMBER_OR_NULL,
                "core_round_trip_ns": {"type": "array", "items": _NUMBER},
                "nodes": {"type": "object", "additionalProperties": {
                    "type": "object", "additionalProperties": _NUMBER}},
                "path": _PATH}}}},
        "path": {"type": "object", "required": ["transport", "provider", "device", "evidence"],
                 "properties": {**_PATH["properties"], "verdict": {"type": "object"}}},
        "verdicts": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["verdict", "value", "lo", "hi", "launches", "reason"],
            "properties": {
                "verdict": {"enum": list(VERDICTS)},
                "value": _NUMBER_OR_NULL, "lo": _NUMBER_OR_NULL, "hi": _NUMBER_OR_NULL,
                "launches": {"type": "integer"}, "reason": _STRING,
                "code": _STRING, "numbers": {"type": "object"},
                "bound": {"type": "object"}, "sizes": {"type": "array"}}}},
        "verdict": {"enum": list(VERDICTS)},
        # the layers below the MPI measured beside it in the same job
        # (reframe_checks/mpi_vs_tcp.py): each layer's figures, why a layer
        # was not run, where the loss is (netbench.judgement.layers) and
        # the MPI's transport settings (mpi_families.yaml) and any the run
        # added
        "layers": {"type": "object", "required": ["figures", "attributions"],
                   "additionalProperties": False, "properties": {
            "figures": {"type": "object", "additionalProperties": {
                "type": "object", "additionalProperties": _NUMBER_OR_NULL}},
            "not_run": {"type": "object", "additionalProperties": _STRING},
            "attributions": {"type": "array", "items": {
                "type": "object", "required": ["code", "layer"],
                "properties": {"code": _STRING, "layer": _STRING}}},
            "mpi_env": {"type": "object", "additionalProperties": _STRING},
            "added_env": {"type": "object", "additionalProperties": _STRING}}},
        "host": {"type": "object", "additionalProperties": _NUMBER_OR_NULL},
        # host -> the tuning-relevant settings it ran under (netbench.probe.nodestate)
        "node_state": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["host"], "properties": {
                "host": _STRING, "sysctl": {"type": "object"}, "interfaces": {"type": "object"},
                "modules": {"type": "object"}, "governor": _STRING_OR_NULL,
                "ucx": {"type": "object"}}}},
        "provenance": {"type": "object", "additionalProperties": False, "properties": {
            "mpi_family": _STRING, "mpi_version": _STRING, "mpi_source": _STRING,
            "transport": _STRING, "placement": _STRING,
            "ranks": {"type": "integer"}, "ranks_per_node": {"type": "integer"},
            "partition": _STRING, "interconnect": _STRING,
            "line_rate_mbps": _NUMBER_OR_NULL,
            "netbench_commit": _STRING, "spack_lock_sha256": _STRING_OR_NULL,
            # where the line rate came from (netbench/probe/linerate.py SOURCES)
            "line_rate_source": _STRING,
            # ranks across nodes joined by links that emulate only a rate
            # (the host's CPUs forward them): every figure is CPU-bound
            "link_emulated": {"type": "boolean"},
        }},
    },
}


#: SCHEMA with the items of its bulk arrays left open: a curve's rows (24
#: per series, hundreds of thousands in a large session), each launch's
#: rows (as many again per launch) and a fleet's pairs (a million for 1024
#: nodes) are checked by plain Python, and by jsonschema only where that
#: finds a fault, to name it
_SHALLOW = copy.deepcopy(SCHEMA)
del _SHALLOW["properties"]["series"]["items"]["properties"]["rows"]["items"]
del _SHALLOW["properties"]["runs"]["additionalProperties"]["items"]["properties"]["rows"][
    "items"]
del _SHALLOW["properties"]["fleet"]["properties"]["pairs"]["items"]
_ROWS = SCHEMA["properties"]["series"]["items"]["properties"]["rows"]
_LAUNCH_ROWS = SCHEMA["properties"]["runs"]["additionalProperties"]["items"]["properties"][
    "rows"]
_PAIRS = SCHEMA["properties"]["fleet"]["properties"]["pairs"]


def check(record, path, where=()):
    """`record` if it is one (SCHEMA, and every row has its series' x and y
    columns); else DataError naming `path` and the key under `where`."""
    validate(record, _SHALLOW, path, tuple(where))
    for i, series in enumerate(record["series"]):
        if not plain_rows(series["rows"]):
            validate(series["rows"], _ROWS, path, (*where, "series", i, "rows"))
        needed = [series["x"]["column"]] + [c["column"] for c in series["y"]]
        for j, row in enumerate(series["rows"]):
            missing = [c for c in needed if c not in row]
            if missing:
                key = (*where, "series", i, "rows", j, missing[0])
                raise DataError(path, dotted(key), f"missing: the series names column "
                                                   f"{missing[0]!r}")
    for name, launches in (record.get("runs") or {}).items():
        for i, launch in enumerate(launches):
            if not plain_rows(launch["rows"]):
                validate(launch["rows"], _LAUNCH_ROWS, path, (*where, "runs", name, i, "rows"))
    pairs = (record.get("fleet") or {}).get("pairs", [])
    if not plain_pairs(pairs):
        validate(pairs, _PAIRS, path, (*where, "fleet", "pairs"))
    return record


def finite_numbers(values):
    """True when every value is an int or float (no bool) and finite: what
    SCHEMA's `number` allows, decided at C speed."""
    values = list(values)
    try:
        return set(map(type, values)) <= {int, float} and all(map(math.isfinite, values))
    except OverflowError:            # an int too large for a float
        return False


def plain_rows(rows):
    """True only for rows SCHEMA accepts (objects of finite numbers); False
    for anything else, which jsonschema then names."""
    return all(type(row) is dict for row in rows) and \
        finite_numbers(value for row in rows for value in row.values())


def plain_pairs(pairs):
    """True only for fleet pairs SCHEMA accepts: src and dst strings, a
    latency that is a finite number or null, bandwidths by size."""
    if not all(type(p) is dict and type(p.get("src")) is str and type(p.get("dst")) is str
               and type(p.get("bw_Mbps", {})) is dict for p in pairs):
        return False
    latencies = [p["latency_us"] for p in pairs if p.get("latency_us") is not None]
    return finite_numbers(latencies) and \
        finite_numbers(value for p in pairs for value in p.get("bw_Mbps", {}).values())


def reference(value, lower, upper, unit, figure=None, citation=None, interconnect=None,
              at=None):
    """One judged variable of a record (see the module's docstring)."""
    entry = {"value": float(value), "lower": lower, "upper": upper, "unit": unit,
             "figure": figure, "citation": citation, "interconnect": interconnect}
    if at:
        entry["at"] = at
    return entry


def make(section, label, series, provenance, references=None, group="", runs=None,
         node_state=None, layers=None):
    """A record, checked against SCHEMA (a check that writes a malformed one
    fails at once, naming the key)."""
    record = {"version": VERSION, "section": section, "label": label, "group": group,
              "series": list(series), "references": dict(references or {}),
              "provenance": {k: v for k, v in provenance.items() if v is not None}}
    if runs:
        record["runs"] = {name: [finite_run(launch) for launch in launches]
                          for name, launches in runs.items()}
    if node_state:
        record["node_state"] = node_state
    if layers:
        record["layers"] = layers
    return check(record, "<record>")


def finite_run(launch):
    """A parsed launch without NaN or infinite figures (a dying run can
    print them; JSON cannot hold them)."""
    def finite(mapping):
        return {k: v for k, v in mapping.items() if math.isfinite(v)}
    return {**launch, "rows": [finite(r) for r in launch["rows"]],
            "summary": finite(launch["summary"])}


def make_series(name, rows, y_columns, units):
    """One series: `rows` against message size (`bytes`), with those of
    `y_columns` that every row has, and only those columns of each row (the
    record states the unit of every number it holds); `units`: {column: unit}."""
    present = [c for c in y_columns if rows and all(c in r for r in rows)]
    kept = ["bytes", *present]
    return {"name": name, "x": {"column": "bytes", "unit": units.get("bytes", "B")},
            "y": [{"column": c, "unit": units.get(c, "")} for c in present],
            "rows": [{c: r[c] for c in kept if c in r} for r in rows]}


def series_named(record, name):
    """The series `name` of a record, None when it has none."""
    return next((s for s in record["series"] if s["name"] == name), None)


def y_columns(series):
    return [c["column"] for c in series["y"]]

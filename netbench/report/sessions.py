"""A session as the report reads it: ReFrame's run report, and the
provenance.json and stored findings beside it, validated where they are read.

Inputs are validated with JSON Schema (`datafiles`): a bad run report or
provenance.json is a DataError, one line naming the file and key.  A
session's folder name is built from parsed values, never taken from input,
because it becomes a folder of reports/ (publish).
"""

import dataclasses
import datetime
import functools
import hashlib
import json
import os
import re
from pathlib import Path

from .. import datafiles, paths
from ..datafiles import DataError
from ..judgement import session_end
from ..results import record as results_record
from . import findings as source_findings
from .sections import legacy_drawn_columns

_NUMBER = {"type": "number"}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}


def curve_schema(*columns):
    """Rows of a legacy curve (a case's `curve`, `tcp_curve` before records):
    `bytes` and the `columns` a section draws, numbers where present."""
    return {"type": ["array", "null"], "items": {
        "type": "object", "required": ["bytes", *columns],
        "properties": {c: _NUMBER for c in ("bytes", "usec", "Mbps", "MBps")}}}


_CURVE = curve_schema()

#: an MPI as discovery describes it (a case's mpi_info, provenance's mpis)
_MPI_INFO = {"type": "object", "properties": {
    "transports": {"type": ["object", "null"],
                   "additionalProperties": {"type": ["object", "null"]}}}}

#: ReFrame's perfvalues entry: [value, reference, lower, upper, unit, result]
_PERFVALUE = {"type": "array", "minItems": 6, "prefixItems": [
    _NUMBER_OR_NULL, _NUMBER_OR_NULL, _NUMBER_OR_NULL, _NUMBER_OR_NULL,
    _STRING_OR_NULL, _STRING_OR_NULL]}

_TESTCASE = {"type": "object", "properties": {
    **{key: {"type": "string"} for key in (
        "name", "display_name", "unique_name", "system", "partition", "environ",
        "result", "report_section", "transport")},
    "fail_reason": _STRING_OR_NULL,
    "ranks": {"type": ["integer", "null"]},
    # each entry: _PERFVALUE (check_perfvalues: plain Python, jsonschema to name a fault)
    "perfvalues": {"type": ["object", "null"]},
    "curve": _CURVE, "tcp_curve": _CURVE,
    # checked by results.record.check (load_session)
    "record": {"type": "object"},
    "partition_info": {"type": ["object", "null"], "properties": {
        "interconnect": {"type": "string"}, "line_rate_mbps": _NUMBER_OR_NULL}},
    "mpi_info": {"anyOf": [_MPI_INFO, {"type": "null"}]},
}}

#: the parts of ReFrame's run report (data_version 4.x) netbench reads
RUN_REPORT_SCHEMA = {"type": "object", "required": ["session_info", "runs"], "properties": {
    "session_info": {"type": "object", "required": ["time_start", "time_start_unix", "uuid"],
                     "properties": {
        "data_version": {"type": "string", "pattern": r"^4\.",
                         "description": "expected ReFrame's run report format 4.x"},
        "time_start": {"type": "string", "pattern": r"^[0-9]{8}T[0-9]{6}[+-][0-9]{4}$",
                       "description": "expected ReFrame's start time YYYYMMDDTHHMMSS+ZZZZ"},
        "time_start_unix": _NUMBER,
        "uuid": {"type": "string", "pattern": "^[0-9a-fA-F]{8}[-0-9a-fA-F]*$",
                 "description": "expected ReFrame's session uuid (hex digits and dashes)"},
        # how the session ended (rfm.patches.record_how_the_session_ended)
        **session_end.SESSION_INFO_SCHEMA,
    }},
    "runs": {"type": "array", "items": {"type": "object", "properties": {
        "testcases": {"type": "array", "items": _TESTCASE}}}},
}}

#: provenance.json as provenance.collect_provenance writes it (what the page shows)
PROVENANCE_SCHEMA = {"type": "object", "properties": {
    "cpus": {"type": ["integer", "null"]},
    "mpis": {"type": "object", "additionalProperties": _MPI_INFO},
    "tuning_state": {"type": ["object", "null"]},
}}

#: a session folder's name: its start time and the first 8 hex digits of its uuid
SESSION_NAME = re.compile(r"[0-9]{8}T[0-9]{6}-[0-9a-f]{8}")
START_FORMAT = "%Y%m%dT%H%M%S%z"


def session_folder_name(info, path):
    """`YYYYMMDDTHHMMSS-<8 hex>` built from the parsed start time and uuid,
    never from their raw text: the name becomes a folder of reports/."""
    try:
        start = datetime.datetime.strptime(info["time_start"], START_FORMAT)
    except (TypeError, ValueError) as err:
        raise DataError(path, "session_info.time_start",
                        f"not a date ({err}): {info['time_start']!r}") from err
    prefix = str(info["uuid"])[:8].lower()
    if not re.fullmatch("[0-9a-f]{8}", prefix):
        raise DataError(path, "session_info.uuid", f"expected ReFrame's session uuid, got "
                                                   f"{info['uuid']!r}")
    return f"{start:%Y%m%dT%H%M%S}-{prefix}"


@dataclasses.dataclass
class Session:
    report: dict
    provenance: dict
    source: str
    #: the findings stored beside the run report (findings.Judged), None
    #: for a run report from before run-time findings
    findings: object = None

    @property
    def info(self):
        return self.report["session_info"]

    @property
    def uuid(self):
        return self.info["uuid"]

    @property
    def name(self):
        return session_folder_name(self.info, self.source)

    @property
    def started(self):
        return self.info["time_start_unix"]

    @functools.cached_property
    def testcases(self):
        """Every case, the last run of each (ReFrame reruns failed ones)."""
        cases = {}
        for run in self.report.get("runs", []):
            for tc in run.get("testcases", []):
                cases[(tc.get("unique_name"), tc.get("system"), tc.get("partition"),
                       tc.get("environ"))] = tc
        return list(cases.values())

    @property
    def systems(self):
        return sorted({tc.get("system", "") for tc in self.testcases})


def load_session(path):
    """A run report, and the provenance.json and stored findings
    (findings.stored_beside) beside it, validated where they are read:
    DataError naming the file and key of the first problem."""
    path = Path(path)
    report = validated_report(path)
    provenance = provenance_beside(path)
    judged = source_findings.load_stored(source_findings.stored_beside(path))
    return Session(report, provenance, str(path), judged)


def provenance_beside(path):
    """The provenance.json beside a run report, validated; {} without one."""
    prov_file = Path(path).parent / "provenance.json"
    if not os.path.lexists(prov_file):
        return {}
    return datafiles.validate(datafiles.load_json(prov_file, kind="record"), PROVENANCE_SCHEMA, prov_file)


#: the SHA-256 of the run reports validated in this process: publish reads
#: a session it has just checked again from reports/ (the index, `latest`),
#: and a 10,000-case report takes seconds to check.  The bytes hashed are
#: the bytes parsed.
_VALIDATED = set()


def validated_report(path):
    """The run report in `path`, parsed and validated (DataError naming the
    file and key otherwise); the same bytes are validated once per process."""
    raw = datafiles.read_bytes(path, "run-report")
    digest = hashlib.sha256(raw).digest()
    # the text replaces the bytes before the parse: a large report's bytes,
    # text and parsed objects at once were the peak of `netbench compare`
    raw = datafiles.text_of(path, raw)
    report = datafiles.load_json(path, raw=raw)
    del raw
    if digest not in _VALIDATED:
        datafiles.validate(report, RUN_REPORT_SCHEMA, path)
        session_folder_name(report["session_info"], path)     # a real date
        check_perfvalues(report, path)
        check_records(report, path)
        _VALIDATED.add(digest)
    return report


def plain_perfvalue(entry):
    """True only for an entry _PERFVALUE accepts: a list of 6 or more, four
    finite numbers or nulls, then two strings or nulls.  Anything else is
    left to jsonschema, to name."""
    return type(entry) is list and len(entry) >= 6 \
        and all(v is None or results_record.finite_numbers([v]) for v in entry[:4]) \
        and all(v is None or type(v) is str for v in entry[4:6])


def check_perfvalues(report, path):
    """Every case's perfvalues hold to _PERFVALUE: tens of thousands of
    entries in a large session, checked by plain Python, by jsonschema only
    where that finds a fault (DataError naming the file and key)."""
    for i, run in enumerate(report["runs"]):
        for j, tc in enumerate(run.get("testcases", [])):
            for key, entry in (tc.get("perfvalues") or {}).items():
                if not plain_perfvalue(entry):
                    datafiles.validate(entry, _PERFVALUE, path,
                                       ("runs", i, "testcases", j, "perfvalues", key))


def check_records(report, path):
    """Every case's record holds to results.record.SCHEMA; a case from a run
    report written before checks wrote records has, in its legacy curves,
    the columns its section draws (sections.legacy_record)."""
    for i, run in enumerate(report["runs"]):
        for j, tc in enumerate(run.get("testcases", [])):
            where = ("runs", i, "testcases", j)
            if tc.get("record"):
                results_record.check(tc["record"], path, (*where, "record"))
                continue
            for key, columns in legacy_drawn_columns(tc).items():
                datafiles.validate(tc.get(key), curve_schema(*sorted(columns)), path,
                                   (*where, key))


#: what the index reads of a published session (and a page's trends
#: need): its session_info, and each case's names and perfvalues
SUMMARY_KEYS = ("name", "display_name", "unique_name", "system", "partition", "environ",
                "perfvalues")
_SUMMARY_CASE = {"type": "object", "properties": {
    key: _TESTCASE["properties"][key] for key in SUMMARY_KEYS}}
#: SUMMARY_SCHEMA's cases are checked by plain_summary_case (jsonschema to
#: name a fault), their perfvalues by check_perfvalues
SUMMARY_SCHEMA = {"type": "object", "required": ["session_info", "runs"], "properties": {
    "session_info": RUN_REPORT_SCHEMA["properties"]["session_info"],
    "runs": {"type": "array", "items": {"type": "object", "properties": {
        "testcases": {"type": "array"}}}},
}}
#: summaries read in this process, by the identity of their file (a
#: published run report is never rewritten in place: publish renames a new
#: folder in), so a process that lists reports/ twice parses each once
_SUMMARIES = {}
#: a published session's summary, beside its run report (publish writes it):
#: the index reads this instead of the whole run report, a fiftieth of its
#: size, as long as the run report has the size and mtime it was made from
SUMMARY_FILE = "summary.json"


def plain_summary_case(tc):
    """True only for a case _SUMMARY_CASE accepts."""
    return type(tc) is dict and all(type(tc[key]) is str for key in SUMMARY_KEYS
                                    if key in tc and key != "perfvalues") \
        and type(tc.get("perfvalues", {})) in (dict, type(None))


def load_summary(path):
    """A published session as the index reads it: its session_info and
    each case's SUMMARY_KEYS, checked against SUMMARY_SCHEMA; the rest of
    the run report (curves, records, a fleet's million pairs) is neither
    checked nor kept, so reading many large
    sessions costs their parsing, not their validation or their memory."""
    path = Path(path)
    try:
        stat = os.stat(path)
    except OSError:
        return read_summary(path)         # DataError, naming the file
    identity = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if identity not in _SUMMARIES:
        _SUMMARIES[identity] = stored_summary(path, stat) or read_summary(path)
    return _SUMMARIES[identity]


def summary_text(path, report):
    """SUMMARY_FILE's text for the run report `path`, whose parsed content is
    `report`: the file's size and mtime now, and checked_summary's slim form."""
    stat = os.stat(path)
    return json.dumps({"run_report": file_identity(stat),
                       "summary": checked_summary(report, path).report}, separators=(",", ":"))


def file_identity(stat):
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def stored_summary(path, stat):
    """The summary SUMMARY_FILE beside the run report `path` holds, checked
    as read_summary checks a run report's; None where there is none (a
    session an older netbench published), where it was made from another
    version of the run report, or where it is not netbench's form: the run
    report is read then."""
    try:
        raw = datafiles.read_bytes(Path(path).with_name(SUMMARY_FILE), "record", follow=False)
        entry = datafiles.load_json(path, raw=raw)
    except DataError:
        return None
    if entry.get("run_report") != file_identity(stat):
        return None
    try:
        return checked_summary(entry.get("summary"), path)
    except DataError:
        return None


def read_summary(path):
    """load_summary's reading and checking."""
    return checked_summary(datafiles.load_json(path, kind="run-report"), path)


def checked_summary(report, path):
    """A run report, or a summary of one, checked against SUMMARY_SCHEMA and
    kept as its session_info and cases' SUMMARY_KEYS."""
    report = datafiles.validate(report, SUMMARY_SCHEMA, path)
    session_folder_name(report["session_info"], path)     # a real date
    for i, run in enumerate(report["runs"]):
        for j, tc in enumerate(run.get("testcases", [])):
            if not plain_summary_case(tc):
                datafiles.validate(tc, _SUMMARY_CASE, path, ("runs", i, "testcases", j))
    check_perfvalues(report, path)
    slim = {"session_info": report["session_info"],
            "runs": [{"testcases": [{k: tc[k] for k in SUMMARY_KEYS if k in tc}
                                    for tc in run.get("testcases", [])]}
                     for run in report["runs"]]}
    return Session(slim, {}, str(path))


#: the file publish writes into each session folder: its place in the
#: order sessions were published on this machine (1, 2, ...)
PUBLISHED_AS = "published"


def publication_number(folder):
    """The number publish gave `folder` (PUBLISHED_AS), or 0 for a session
    an older netbench published, or one whose number is not netbench's."""
    path = Path(folder) / PUBLISHED_AS
    if path.is_symlink() or not path.is_file():
        return 0
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return 0
    return int(text) if text.isdigit() and len(text) < 16 else 0


def next_publication_number(reports_dir):
    """The number of the next session published into `reports_dir`: one
    more than any there.  Under publish's reports_lock."""
    return 1 + max((publication_number(f) for f in published_folders(reports_dir)), default=0)


def published_folders(reports_dir=paths.REPORTS):
    """The folders of reports/ named like a session (real folders holding a
    run report; nothing is parsed), in the order they were published on
    this machine: by the number publish wrote into each (PUBLISHED_AS),
    which no run report can set (a date a run report claims can lie years
    ahead) and which a copy of reports/ or a chmod keeps.  Sessions an
    older netbench published have none and come first, by the time their
    inode last changed (ctime, which publish's rename set)."""
    found = []
    for folder in Path(reports_dir).iterdir() if Path(reports_dir).is_dir() else ():
        if not SESSION_NAME.fullmatch(folder.name) or folder.is_symlink() \
                or not folder.is_dir() or not (folder / "run-report.json").is_file():
            continue
        found.append((publication_number(folder), folder.lstat().st_ctime_ns, folder.name,
                      folder))
    return [folder for *_, folder in sorted(found)]


def published_sessions(reports_dir=paths.REPORTS, summary=False):
    """The sessions on disk, oldest first: real folders named like a session
    whose run report loads and names that folder.  Anything else in
    reports/ (latest, tune-demo/, a half-published staging folder, a broken
    session) is not a session and is left alone.  summary: each as
    load_summary reads it (the index: their parsing, not their validation
    or their memory)."""
    found = []
    for folder in Path(reports_dir).iterdir() if Path(reports_dir).is_dir() else ():
        if not SESSION_NAME.fullmatch(folder.name) or folder.is_symlink() \
                or not folder.is_dir():
            continue
        try:
            session = (load_summary if summary else load_session)(folder / "run-report.json")
        except DataError:
            continue
        if session.name == folder.name:
            found.append(session)
    return sorted(found, key=lambda s: (s.started, s.name))

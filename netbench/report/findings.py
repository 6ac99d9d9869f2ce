"""The source documents' findings beside a run (issue #16): what each
source found, where it says so, and whether the run's measurements agree.

The claims and their bounds are data (reframe_checks/references/
findings.yaml, FINDINGS_FILE), each naming its source's reference file and
the rule (below) that turns the cases' records into comparisons, one per
MPI, transport or layout.  Every figure comes from the records in the run
report (sections.case_record, which also reads run reports written before
records).

A comparison is one percentage (a loss, a gain or a change) held to the
claim's bounds.  A finding holds when every comparison does, does not hold
when any fails, and is "not measured here" (with what to run) when the run
has no case to compare.

The findings are judged once, at the end of the ReFrame session
(publish._after_session), and stored beside its run report with the claims
they were judged by (stored_beside: run-report-N.findings.json); the page
renders the stored verdicts, so a session re-published after findings.yaml
changed keeps its own.  A run report from before has none: it is judged
when published, and the page says so.
"""

import dataclasses
import json
import re
from pathlib import Path

from .. import paths
from ..datafiles import DataError, load_json, load_yaml, validate
from ..results import record as results_record
from .reasons import readable
from .sections import case_record

HOLDS, FAILS, UNMEASURED = "holds", "does not hold", "not measured here"
#: the page's classes for the verdicts (base.css.j2: pass, fail, skip)
CSS = {HOLDS: "pass", FAILS: "fail", UNMEASURED: "skip"}

#: the claims, in the references folder
FINDINGS_FILE = "findings.yaml"
#: when a session's findings were judged (the stored file's `judged`)
AT_RUN, AT_PUBLISH, AT_DRAWING = "run", "published", "drawn"
#: what the page says of findings not judged at the end of their run
NOTES = {AT_RUN: "",
         AT_PUBLISH: "judged when published: the run report predates run-time findings",
         AT_DRAWING: "judged when this page was drawn: the run report predates run-time "
                     "findings"}
#: the stored file's format (STORED_SCHEMA)
STORED_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Source:
    title: str
    file: str       # under ../shared/seeds/ (README, reframe_checks/references)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A finding of a source: what it says (in netbench's words), where,
    the percentage a run is judged by and its bounds (inclusive; None:
    open), and the rule below that computes it."""
    key: str
    claim: str
    source: Source
    passage: str
    measure: str
    bounds: tuple
    rule: str

    @property
    def criterion(self):
        low, high = self.bounds
        if low is not None and high is not None:
            return f"holds when {self.measure} is {low:g} to {high:g} %"
        if low is not None:
            return f"holds when {self.measure} is at least {low:+g} %"
        return f"holds when {self.measure} is at most {high:+g} %"


_STRING = {"type": "string", "minLength": 1}
_BOUND = {"type": "number"}

#: findings.yaml (the rule names are checked against RULES in load_claims)
CLAIMS_SCHEMA = {
    "type": "object", "required": ["findings"], "additionalProperties": False,
    "properties": {"findings": {
        "type": "object", "minProperties": 1,
        "propertyNames": {"pattern": "^[a-z0-9][a-z0-9-]*$",
                          "description": "expected a key of lower-case letters, digits, dashes"},
        "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "required": ["claim", "source", "passage", "measure", "rule"],
            "properties": {
                "claim": _STRING, "passage": _STRING, "measure": _STRING, "rule": _STRING,
                "source": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+\.yaml$",
                           "description": "expected the name of a reference file "
                                          "(e.g. seed000_e325_netpipe.yaml)"},
                "at_least": _BOUND, "at_most": _BOUND,
            }}}},
}


def load_claims(folder=paths.REFERENCES):
    """The claims of `folder`/findings.yaml, in the file's order; DataError
    naming the file and key of the first problem.  A claim's source is the
    title and text file its reference file's `source:` gives."""
    path = Path(folder) / FINDINGS_FILE
    data = validate(load_yaml(path), CLAIMS_SCHEMA, path)
    claims = []
    for key, entry in data["findings"].items():
        where = f"findings.{key}"
        if entry["rule"] not in RULES:
            raise DataError(path, f"{where}.rule", f"no rule {entry['rule']!r} "
                                                   f"(rules: {', '.join(sorted(RULES))})")
        low, high = entry.get("at_least"), entry.get("at_most")
        if low is None and high is None:
            raise DataError(path, where, "no bound: give at_least, at_most or both")
        if low is not None and high is not None and low > high:
            raise DataError(path, f"{where}.at_most", f"{high:g} is below at_least {low:g}")
        claims.append(Claim(key, entry["claim"], cited_source(folder, entry["source"], path,
                                                              f"{where}.source"),
                            entry["passage"], entry["measure"], (low, high), entry["rule"]))
    return claims


def cited_source(folder, name, path, where):
    """The title and text file of the reference file `name` in `folder`."""
    ref = Path(folder) / name
    if not ref.is_file():
        raise DataError(path, where, f"no reference file {name!r} in {folder}")
    source = load_yaml(ref).get("source")
    if not isinstance(source, dict) or not source.get("title") or not source.get("file"):
        raise DataError(path, where, f"{name} gives no source title and file "
                                     f"(its `source:` needs both)")
    return Source(str(source["title"]), str(source["file"]))


@dataclasses.dataclass
class Comparison:
    """One figure of this run behind a finding."""
    what: str           # environment, transport or layout, partition
    text: str           # the measured figures
    value: float        # the percentage held to the claim's bounds
    verdict: str

    @property
    def css(self):
        return CSS[self.verdict]


@dataclasses.dataclass
class Finding:
    claim: Claim
    verdict: str
    summary: str        # why not measured, or how many comparisons hold
    comparisons: list

    @property
    def css(self):
        return CSS[self.verdict]


@dataclasses.dataclass(frozen=True)
class Case:
    """A case's record and who ran it: environment, partition and, on a
    comparison page, the session."""
    who: str
    tc: dict
    record: dict

    @property
    def provenance(self):
        return self.record["provenance"]


def evaluate(sessions, claims):
    """The findings of `claims` (load_claims) against the cases of `sessions`."""
    cases = list(measured_cases(sessions))
    return [judge(claim, RULES[claim.rule](cases)) for claim in claims]


def judge(claim, outcome):
    """A Finding from a rule's outcome: (comparisons as (what, text, value)),
    or the reason none could be made."""
    rows, reason = outcome
    if not rows:
        return Finding(claim, UNMEASURED, reason, [])
    comparisons = [Comparison(what, text, value, HOLDS if within(value, claim.bounds) else FAILS)
                   for what, text, value in rows]
    held = sum(c.verdict == HOLDS for c in comparisons)
    verdict = HOLDS if held == len(comparisons) else FAILS
    return Finding(claim, verdict, f"holds in {held} of {len(comparisons)}", comparisons)


def within(value, bounds):
    low, high = bounds
    return (low is None or value >= low) and (high is None or value <= high)


# ---- stored verdicts: judged once, rendered ever after ----

@dataclasses.dataclass
class Judged:
    """A session's findings and when they were judged (AT_RUN, AT_PUBLISH,
    AT_DRAWING)."""
    when: str
    findings: list

    @property
    def note(self):
        return NOTES[self.when]


def judge_session(session, when, folder=paths.REFERENCES):
    """The findings of `folder`'s claims against one session."""
    return Judged(when, evaluate([session], load_claims(folder)))


def stored_beside(run_report):
    """Where a run report's findings are stored: `run-report-7.json` ->
    `run-report-7.findings.json` (in a session folder, `run-report.json` ->
    `run-report.findings.json`)."""
    run_report = Path(run_report)
    return run_report.with_name(run_report.name.removesuffix(".json") + ".findings.json")


def dumps(judged):
    """The stored file's text: the verdicts with the claims they were judged
    by, so the page needs nothing else."""
    findings = [{"key": f.claim.key, "claim": f.claim.claim,
                 "source": dataclasses.asdict(f.claim.source), "passage": f.claim.passage,
                 "measure": f.claim.measure, "bounds": list(f.claim.bounds),
                 "rule": f.claim.rule, "verdict": f.verdict, "summary": f.summary,
                 "comparisons": [dataclasses.asdict(c) for c in f.comparisons]}
                for f in judged.findings]
    return json.dumps({"version": STORED_VERSION, "judged": judged.when, "findings": findings},
                      indent=2, allow_nan=False) + "\n"


_VERDICT = {"enum": [HOLDS, FAILS, UNMEASURED],
            "description": f"expected one of {HOLDS!r}, {FAILS!r}, {UNMEASURED!r}"}
_BOUND_OR_NULL = {"type": ["number", "null"]}

#: a stored findings file (dumps)
STORED_SCHEMA = {
    "type": "object", "required": ["version", "judged", "findings"],
    "properties": {
        "version": {"const": STORED_VERSION,
                    "description": f"expected format version {STORED_VERSION}"},
        "judged": {"enum": [AT_RUN, AT_PUBLISH],
                   "description": f"expected {AT_RUN!r} or {AT_PUBLISH!r}"},
        "findings": {"type": "array", "items": {
            "type": "object",
            "required": ["key", "claim", "source", "passage", "measure", "bounds", "rule",
                         "verdict", "summary", "comparisons"],
            "properties": {
                **{k: {"type": "string"} for k in ("key", "claim", "passage", "measure",
                                                   "rule", "summary")},
                "source": {"type": "object", "required": ["title", "file"],
                           "additionalProperties": False, "properties": {
                    "title": {"type": "string"}, "file": {"type": "string"}}},
                "bounds": {"type": "array", "minItems": 2, "maxItems": 2,
                           "items": _BOUND_OR_NULL},
                "verdict": _VERDICT,
                "comparisons": {"type": "array", "items": {
                    "type": "object", "required": ["what", "text", "value", "verdict"],
                    "additionalProperties": False,
                    "properties": {"what": {"type": "string"}, "text": {"type": "string"},
                                   "value": {"type": "number"}, "verdict": _VERDICT}}},
            }}},
    },
}


def load_stored(path):
    """The Judged stored in `path`, None when there is none; DataError
    naming the file and key when it is malformed, or not a plain file."""
    path = Path(path)
    if path.is_symlink():
        raise DataError(path, None, "is a symlink, not the file netbench stores there")
    if not path.exists():
        return None
    data = validate(load_json(path, kind="record"), STORED_SCHEMA, path)
    findings = []
    for f in data["findings"]:
        claim = Claim(f["key"], f["claim"], Source(**f["source"]), f["passage"], f["measure"],
                      tuple(f["bounds"]), f["rule"])
        findings.append(Finding(claim, f["verdict"], f["summary"],
                                [Comparison(**c) for c in f["comparisons"]]))
    return Judged(data["judged"], findings)


def page_tables(sessions):
    """The page's findings: per session, its stored verdicts, or, for a run
    report from before run-time findings that was not published, judged
    now (the note says when); a comparison names each table's session."""
    tables = []
    for s in sessions:
        judged = s.findings or judge_session(s, AT_DRAWING)
        tables.append({"session": s.name if len(sessions) > 1 else "", "note": judged.note,
                       "findings": judged.findings})
    return tables


def measured_cases(sessions):
    """Cases whose measurement can be trusted: passed, or failed only their
    references (a case that failed its sanity, e.g. its traffic took another
    path than the one named, measured something else)."""
    several = len(sessions) > 1
    for s in sessions:
        for tc in s.testcases:
            if tc.get("result") == "pass" or (tc.get("result") == "fail"
                                              and tc.get("fail_phase") == "performance"):
                record = case_record(tc)
                who = f"{tc.get('environ')} on {tc.get('system')}:{tc.get('partition')}"
                yield Case(f"{s.name}: {who}" if several else who, tc, record)


# ---- the rules: cases -> ([(what, text, value)], reason when none) ----

def is_network(transport):
    """An MPI transport over the network stack: not shared memory, not the
    benchmark's own sockets (raw)."""
    return transport not in ("", "shm", "raw")


def rows_by_size(series, column):
    return {r["bytes"]: r[column] for r in series["rows"]
            if r.get("bytes", 0) > 0 and r.get(column)}


def mpi_tcp_loss(cases, placement):
    """MPI's loss against raw TCP on MpiVsTcp cases at `placement` over a
    network transport, at the largest size both series measured (shared
    memory bypasses TCP, which is not the finding)."""
    section = [c for c in cases if c.record["section"] == "mpi_vs_tcp"]
    wanted = [c for c in section if c.provenance.get("placement") == placement
              and is_network(c.provenance.get("transport", ""))]
    rows = []
    for c in wanted:
        mpi, tcp = (results_record.series_named(c.record, n) for n in ("mpi", "tcp"))
        if not mpi or not tcp:
            continue
        mpi_bw, tcp_bw = rows_by_size(mpi, "Mbps"), rows_by_size(tcp, "Mbps")
        common = set(mpi_bw) & set(tcp_bw)
        if not common:
            continue
        size = max(common)
        loss = 100 * (1 - mpi_bw[size] / tcp_bw[size])
        how = f"{loss:.0f} % less" if loss >= 0 else f"{-loss:.0f} % more"
        rows.append((f"{c.who}, {c.provenance.get('transport')}",
                     f"MPI {readable(mpi_bw[size], 'Mbit/s')} against TCP "
                     f"{readable(tcp_bw[size], 'Mbit/s')} at {readable(size, 'B')}: {how}",
                     loss))
    if rows:
        return rows, ""
    if not section:
        return [], ("no MpiVsTcp case in this run: run it (`-n MpiVsTcp`)"
                    + (" on a partition of 2+ nodes, e.g. a virtual cluster"
                       if placement == "internode" else ""))
    if placement == "internode":
        return [], ("no internode MpiVsTcp case over a network transport (no partition of 2+ "
                    "nodes: run `-n MpiVsTcp` on a virtual cluster)")
    return [], "no intranode MpiVsTcp case over a network transport (only shared memory ran)"


def mpi_tcp_internode(cases):
    return mpi_tcp_loss(cases, "internode")


def mpi_tcp_intranode(cases):
    return mpi_tcp_loss(cases, "intranode")


def parameter_of(record, name):
    """A numeric parameter of the case from its label (`connections=16`,
    `mtu=9000`: checks.recording.parameter_labels), None when absent."""
    found = re.search(rf"\b{name}=(\d+)\b", record["label"])
    return int(found.group(1)) if found else None


def label_without(record, name):
    return re.sub(rf"\s*\b{name}=\d+\b", "", record["label"]).strip()


def without_environ(label, tc):
    """A label without its leading environment name (`who` names it)."""
    env = tc.get("environ") or ""
    return label[len(env):].strip() if env and label.startswith(env) else label


def tcp_streams(cases):
    """TcpStreams between two nodes: the mean bandwidth over the application
    buffer sizes both measured (seed 003 swept 60-68 KB), many connections
    against one.  Within one node the streams share loopback, not the wire
    the source measured."""
    streams = [c for c in cases if c.record["section"] == "tcp_tuning"
               and parameter_of(c.record, "connections") is not None]
    between = [c for c in streams if c.provenance.get("placement") == "internode"]
    by_who = {}
    for c in between:
        by_who.setdefault(c.who, {})[parameter_of(c.record, "connections")] = c
    rows = []
    for who, runs in sorted(by_who.items()):
        if 1 not in runs:
            continue
        for n in sorted(k for k in runs if k > 1):
            single, many = mean_stream_bandwidth(runs[1], runs[n])
            if single and many:
                gain = 100 * (many / single - 1)
                rows.append((who, f"{n} connections {many:.4g} MB/s against 1 connection "
                                  f"{single:.4g} MB/s: {gain:+.0f} %", gain))
    if rows:
        return rows, ""
    if not streams:
        return [], "no TcpStreams case in this run: run `-t seeds` on a partition of 2+ nodes"
    if not between:
        return [], ("TcpStreams ran within one node only; the source measured between two "
                    "nodes (run `-t seeds` on a virtual cluster)")
    return [], "no single-connection TcpStreams case to compare the others with"


def mean_stream_bandwidth(single, many):
    """(one connection, many) mean MB/s over the buffer sizes both have."""
    a, b = (series_rows(c.record, "MBps_mean") for c in (single, many))
    common = sorted(set(a) & set(b))
    if not common:
        return None, None
    return (sum(a[n] for n in common) / len(common), sum(b[n] for n in common) / len(common))


def series_rows(record, column):
    """{message size: value} of `column` over every series of a record."""
    out = {}
    for s in record["series"]:
        if column in results_record.y_columns(s):
            out.update(rows_by_size(s, column))
    return out


def two_per_node(cases):
    """ThroughputPerNode (section scaling): the peak throughput per process
    at 2 processes per node against 1, at the same process count, per
    environment and pattern (the group without its per-node words)."""
    section = [c for c in cases if c.record["section"] == "scaling"]
    pairs = {}
    for c in section:
        ppn, ranks = c.provenance.get("ranks_per_node"), c.provenance.get("ranks")
        peak = max(series_rows(c.record, "MBps").values(), default=None)
        if ppn in (1, 2) and ranks and peak:
            line = re.sub(r"\s*\d+ per node$", "", c.record.get("group") or c.record["label"])
            line = without_environ(line, c.tc)
            pairs.setdefault((c.who, line, ranks), {})[ppn] = peak
    rows = []
    for (who, line, ranks), peaks in sorted(pairs.items()):
        if 1 in peaks and 2 in peaks:
            change = 100 * (peaks[2] / peaks[1] - 1)
            rows.append((f"{who}, {line or 'chain'}",
                         f"{ranks} processes: {peaks[2]:.4g} MB/s per process at 2 per node "
                         f"against {peaks[1]:.4g} at 1 per node: {change:+.0f} %", change))
    if rows:
        return rows, ""
    if not section:
        return [], ("no ThroughputPerNode case in this run: run `-t seeds` on a partition of "
                    "2+ nodes, e.g. a virtual cluster")
    return [], "no process count ran at both one and two processes per node"


#: seed 004: jumbo frames pay off above this message size
JUMBO_ABOVE = 16 * 1024


def jumbo_frames(cases):
    """MtuPingPong and MtuRing (section mtu): the peak bandwidth on messages
    above 16 KiB at MTU 9000 against 1500, per case label without its MTU."""
    section = [c for c in cases if c.record["section"] == "mtu"]
    peaks = {}
    for c in section:
        mtu = parameter_of(c.record, "mtu")
        large = [v for n, v in series_rows(c.record, "Mbps").items() if n > JUMBO_ABOVE]
        if mtu and large:
            label = without_environ(label_without(c.record, "mtu"), c.tc)
            peaks.setdefault((c.who, label), {})[mtu] = max(large)
    rows = []
    for (who, label), by_mtu in sorted(peaks.items()):
        if 1500 in by_mtu and 9000 in by_mtu:
            gain = 100 * (by_mtu[9000] / by_mtu[1500] - 1)
            rows.append((f"{who}, {label or 'ring'}",
                         f"MTU 9000 {readable(by_mtu[9000], 'Mbit/s')} against 1500 "
                         f"{readable(by_mtu[1500], 'Mbit/s')}: {gain:+.0f} %", gain))
    if rows:
        return rows, ""
    if not section:
        return [], ("no MTU sweep in this run: run `-t seeds` as root on a virtual cluster "
                    "(its partitions name the set_mtu command)")
    return [], "MTU 1500 and 9000 were not both measured above 16 KiB"


#: Claim.rule -> the function computing its comparisons
RULES = {"mpi_tcp_internode": mpi_tcp_internode, "mpi_tcp_intranode": mpi_tcp_intranode,
         "tcp_streams": tcp_streams, "two_per_node": two_per_node,
         "jumbo_frames": jumbo_frames}

"""`netbench drain`: the sweep's suspects taken out of Slurm (issue #36),
and the Slurm clients `netbench resume` (netbench.slurmresume) shares.

drain: the suspect nodes of a published session, as its own run report
names them (a suspects.json given must be what that run report gives, by
its sha256; each sweep's suspects only its own nodes, fewer than half of
them: read_report), are drained through
`scontrol update nodename=N state=drain reason="netbench: <session>: ..."`
(netbench.fleet.drain decides which: a node someone else drained or took
down keeps its state and reason, a link suspect drains nothing, a report
naming hosts this cluster does not have drains nothing at all).

Slurm's clients find their cluster the usual way (SLURM_CONF, or the
system's configuration).  Nothing here runs through a shell: each scontrol
argument is one argv element.
"""

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

from . import exitcodes
from .datafiles import DataError, read_bytes, validate
from .fleet import drain as plan_of
from .results.suspects import SUSPECT_SCHEMA, strict_json, suspect_from_json
from .textsafe import printable

#: a session's suspects.json (netbench.report.sweep.session_suspects)
SESSION_SUSPECTS_SCHEMA = {
    "type": "object", "required": ["session", "sweeps"], "additionalProperties": False,
    "properties": {
        "session": {"type": "string"},
        "sweeps": {"type": "array", "items": {
            "type": "object", "required": ["nodes", "suspects"], "additionalProperties": False,
            "properties": {"partition": {"type": "string"}, "environ": {"type": "string"},
                           "label": {"type": "string"},
                           "nodes": {"type": "array", "items": {"type": "string"}},
                           "suspects": {"type": "array", "items": SUSPECT_SCHEMA}}}}},
}
#: the metric families a sweep judges apart (latency; bandwidth at any
#: size): each can name a node or a pair of its own
METRIC_FAMILIES = 2
SCONTROL_TIMEOUT_S = 30


class SlurmError(Exception):
    """A Slurm client failed (one line: the command and what it said)."""


def report_file(report):
    """suspects.json of a report: REPORT is the file or its session folder."""
    path = Path(report)
    return path / "suspects.json" if path.is_dir() else path


def read_report(report):
    """(session name, [Suspect]) of a published session: REPORT is its
    folder under reports/ (or reports/latest), or its suspects.json.  The
    suspects are the session's own record's (its run-report.json, the
    page's source: netbench.report.sweep.session_suspects); a suspects.json
    given is drained only when it is, byte for byte (sha256), what that
    record gives.  Then every sweep's suspects are held to what a sweep can
    name (sweep_bounds).  DataError, one line naming the file, otherwise."""
    path = Path(report)
    given = None if path.is_dir() else path
    folder = path if given is None else path.parent
    # the file given is read first, bounded: /dev/zero or a FIFO is refused
    # before anything else is looked at
    raw = given_suspects(given, folder) if given else None
    found = recorded_suspects(folder, given or folder)
    text = strict_json(found)
    if raw is not None and hashlib.sha256(raw).digest() != \
            hashlib.sha256(text.encode()).digest():
        raise DataError(given, None, f"is not the suspects of its session's run report "
                                     f"({folder / RUN_REPORT}): a suspects file is drained "
                                     f"only as the session published it")
    where = given or folder / "suspects.json"
    data = validate(found, SESSION_SUSPECTS_SCHEMA, where)
    sweep_bounds(data, where)
    return data["session"], [suspect_from_json(s) for sw in data["sweeps"]
                             for s in sw["suspects"]]


def given_suspects(path, folder):
    """The bytes of a suspects.json given (bounded, a regular file); a
    session that swept nothing has none, and says so."""
    try:
        return read_bytes(path, "suspects", follow=False)
    except DataError:
        if not os.path.lexists(path) and os.path.lexists(Path(folder) / RUN_REPORT):
            recorded_suspects(folder, path)         # "this session swept nothing"
        raise


#: the session's own record, in its folder under reports/
RUN_REPORT = "run-report.json"


def recorded_suspects(folder, named):
    """suspects.json's content as the run report of the session in
    `folder` gives it; DataError naming `named` (what the user gave) when
    there is no published session there, or it swept nothing."""
    from .report.sessions import load_session
    from .report.sweep import session_suspects
    run_report = Path(folder) / RUN_REPORT
    if not os.path.lexists(run_report):
        raise DataError(named, None, f"no {RUN_REPORT} beside it: netbench drain takes a "
                                     f"session published under reports/ (its folder)")
    found = session_suspects(load_session(run_report))
    if found is None:
        raise DataError(named, None, "this session swept nothing: no suspects to drain")
    return found


def sweep_bounds(data, path):
    """Each sweep's suspects within what the sweep could name: its node
    and pair suspects name only the sweep's own nodes; fewer distinct
    suspect nodes than half of them (the judgement names a node that is
    the odd one out among its partners, netbench.fleet.judge: a majority
    cannot be); and no more suspects than its metric families could name
    (a node or a directed pair each).  DataError naming the sweep."""
    for i, sweep in enumerate(data["sweeps"]):
        nodes = set(sweep["nodes"])
        most = METRIC_FAMILIES * len(nodes) ** 2
        if len(sweep["suspects"]) > most:
            raise DataError(path, f"sweeps[{i}].suspects", f"{len(sweep['suspects'])} "
                            f"suspects: more than a sweep of {len(nodes)} nodes can name "
                            f"({most})")
        named = set()
        for j, suspect in enumerate(sweep["suspects"]):
            if suspect["kind"] not in ("node", "pair"):
                continue                    # switches: not nodes, never drained
            for name in suspect["names"]:
                if name not in nodes:
                    raise DataError(path, f"sweeps[{i}].suspects[{j}].names",
                                    printable(f"{name!r} is not one of the sweep's "
                                              f"{len(nodes)} nodes"))
            if suspect["kind"] == "node":
                named.update(suspect["names"])
        if 2 * len(named) >= len(nodes) and named:
            raise DataError(path, f"sweeps[{i}].suspects", f"names {len(named)} of the "
                            f"sweep's {len(nodes)} nodes: a sweep names fewer than half "
                            f"(a majority of nodes cannot be the odd ones out)")


# -- Slurm ---------------------------------------------------------------------

def slurm(*argv):
    """The stdout of a Slurm client; SlurmError with its words on failure."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, errors="replace",
                              timeout=SCONTROL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SlurmError(f"{argv[0]}: {err}") from err
    if proc.returncode:
        said = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise SlurmError(printable(f"{' '.join(argv[:3])}: {said}"))
    return proc.stdout


def slurm_nodes():
    """{name: SlurmNode} of every node of the cluster, from sinfo (one line
    per node and partition: a node in two partitions is one node)."""
    nodes = {}
    for line in slurm("sinfo", "-a", "-h", "-N", "-o", "%N|%T|%E").splitlines():
        name, state, reason = (line.split("|", 2) + ["", ""])[:3]
        reason = "" if reason.strip() == "none" else reason.strip()
        # sinfo marks a node not responding (*) and others with a suffix
        nodes[name.strip()] = plan_of.SlurmNode(name.strip(), state.strip().rstrip("*~#!%$@^-"),
                                                reason)
    return nodes


def scontrol_update(node, state, reason=None):
    argv = ["scontrol", "update", f"nodename={node}", f"state={state}"]
    if reason is not None:
        argv.append(f"reason={reason}")
    return argv


def run_or_show(argv, dry_run, out):
    """Run `argv` (scontrol), or with `dry_run` print it as it would run."""
    if dry_run:
        print(printable(f"would run: {shlex.join(argv)}"), file=out)
        return
    slurm(*argv)
    print(printable(f"ran: {shlex.join(argv)}"), file=out)


# -- netbench drain -------------------------------------------------------------

def drain(report, dry_run=False, out=None):
    """Drain the suspect nodes of `report`; the exit code."""
    out = out or sys.stdout
    session, suspects = read_report(report)
    plan = plan_of.drain_plan(session, suspects, slurm_nodes())
    for text in plan.links:
        print(printable(text), file=out)
    for text in plan.refused:
        print(printable(f"not drained: {text}"), file=out)
    if plan.unknown:
        print(printable(f"netbench drain: {report_file(report)}: the suspects name hosts this "
                        f"cluster does not have: {', '.join(plan.unknown)}; nothing drained"),
              file=sys.stderr)
        return exitcodes.INVALID_INPUT
    for node in plan.already:
        print(printable(f"already drained by netbench: {node.name} ({node.reason})"), file=out)
    for node in plan.left_alone:
        print(printable(f"left alone: {node.name} is {node.state} by someone else "
                        f"({node.reason})"), file=out)
    for host, reason in plan.drain:
        run_or_show(scontrol_update(host, "drain", reason), dry_run, out)
    if not plan.drain:
        print("nothing to drain", file=out)
    return exitcodes.OK

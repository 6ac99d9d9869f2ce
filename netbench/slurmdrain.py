"""`netbench drain` and `netbench resume`: the sweep's suspects taken out of
Slurm, and back only once they pass again (issue #36).

drain: the suspect nodes of a published session, as its own run report
names them (a suspects.json given must be what that run report gives, by
its sha256; each sweep's suspects only its own nodes, fewer than half of
them: read_report), are drained through
`scontrol update nodename=N state=drain reason="netbench: <session>: ..."`
(netbench.fleet.drain decides which: a node someone else drained or took
down keeps its state and reason, a link suspect drains nothing, a report
naming hosts this cluster does not have drains nothing at all).

resume: every node drained with netbench's reason is measured again
against partners that are in service (idle), outside Slurm, over the
ssh launch of a netbench partition (`--system`: its hostfile, ssh agent
and head namespace, as LinkSweep's job launches): the benchmark's sweep
mode on the node and its partners, judged as the sweep judges
(netbench.fleet.judge).  A node that passes is returned to service
(`state=resume`); one that fails, or cannot be reached, stays drained.
The evidence, every node's pairs and verdict, goes into a JSON report.

Slurm's clients find their cluster the usual way (SLURM_CONF, or the
system's configuration).  Nothing here runs through a shell: each scontrol
argument is one argv element.
"""

import dataclasses
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import benchspec, exitcodes, paths
from .datafiles import DataError, read_bytes, validate
from .fleet import drain as plan_of
from .fleet import judge as fleet
from .fleet.figures import hosts_of
from .results.suspects import SUSPECT_SCHEMA, strict_json, suspect_from_json
from .results.sweep import parse_sweep
from .safefile import atomic_write
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
#: partners each node is measured against when it is re-tested
PARTNERS = 2
#: the re-test's message size: large enough that a slow link shows, small
#: enough that a node and its partners are measured in seconds
RETEST_SIZES = [1 << 20]
RETEST_TIME_LIMIT_S = 300


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


# -- netbench resume -----------------------------------------------------------

@dataclasses.dataclass
class Launch:
    """What a re-test launch needs: a netbench ssh partition's environment,
    the MPI the benchmark is built with, and the partition's line rate."""
    env: dict
    hostfile: str
    line_rate_mbps: float = None


def ssh_partition(system):
    """(env_vars, extras) of the netbench-ssh partition of ReFrame system
    `system` (netbench's configuration); DataError otherwise."""
    from .rfm import config
    for found in config.site_configuration()["systems"]:
        if found["name"] != system:
            continue
        for part in found["partitions"]:
            if part.get("launcher") == "netbench-ssh":
                return dict(part.get("env_vars", [])), part.get("extras", {})
    raise DataError("--system", system, "no such system with a netbench-ssh partition "
                                        "(e.g. vcluster-NAME of a virtual cluster that is up)")


def hostfile_entry(names_by_address, node):
    """How the partition's hostfile names `node`: its address on a virtual
    cluster, else the name itself."""
    return next((address for address, name in names_by_address.items() if name == node), node)


def retest(node, partners, system_env, extras, mpi, families, binary):
    """The benchmark's sweep of `node` and `partners`, launched over ssh as
    the partition launches; returns the evidence (dict) with its verdict."""
    from .rfm import launch, supervise
    from .tools.benchrun import job_environment
    transport = next(t for t in mpi.transports if t != "shm")
    names = supervise.node_names(system_env.get("NETBENCH_HOSTFILE"))
    hosts = [node, *partners]
    with tempfile.TemporaryDirectory(prefix="netbench-resume-") as folder:
        hostfile = Path(folder) / "hostfile"
        hostfile.write_text("".join(hostfile_entry(names, h) + "\n" for h in hosts))
        env = {**job_environment(mpi, families, transport), **system_env,
               "NETBENCH_HOSTFILE": str(hostfile)}
        program = [str(binary), *benchspec.command_line("sweep", sizes=RETEST_SIZES,
                                                          min_samples=3)]
        argv = launch.command(len(hosts), 1, program, env=env, families=families)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  env=env, timeout=RETEST_TIME_LIMIT_S)
            output, said = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            output, said = "", f"no answer in {RETEST_TIME_LIMIT_S} s"
    return judged_retest(node, partners, output, said,
                         latency_judged=extras.get("emulates") != "rate")


def judged_retest(node, partners, output, said, latency_judged=True):
    """The evidence of one re-test from the benchmark's output: its pairs,
    whom the sweep's rule names, and the verdict (pass only when every
    pair was measured and nothing names the node).  On links that emulate
    only their rate latency is the host scheduler's, not judged (as
    LinkSweep does)."""
    evidence = {"node": node, "partners": list(partners), "pairs": [], "suspects": []}
    sweep = parse_sweep(output) if output else None
    if sweep is None or not sweep.finished:
        lines = [line for line in (said or "").splitlines() if line.strip()]
        evidence.update(verdict="fail", why="the re-test did not finish: "
                        + printable(lines[-1][:300] if lines else "no output"))
        return evidence
    measurements = sweep.measurements()
    judged = measurements if latency_judged else \
        {pair: {**figs, fleet.LATENCY: None} for pair, figs in measurements.items()}
    try:
        verdict = fleet.judge(judged)
    except ValueError as err:
        # ranks on one host, a figure that is no number: no evidence for
        # the node, so it stays drained, and the report says why
        evidence.update(verdict="fail", why=f"the re-test cannot be judged: {err}")
        return evidence
    evidence["pairs"] = [{"src": a, "dst": b, "latency_us": f["latency_us"],
                          "bw_Mbps": {str(k): v for k, v in f["bw_Mbps"].items()}}
                         for (a, b), f in sorted(measurements.items())]
    evidence["suspects"] = json.loads(verdict.to_json())["suspects"]
    hosts = set(hosts_of(measurements))
    wanted = {node, *partners}
    if hosts != wanted or len(measurements) != len(wanted) * (len(wanted) - 1):
        evidence.update(verdict="fail", why=f"measured {len(measurements)} directed pairs of "
                                            f"{', '.join(sorted(hosts))}, not every pair")
    elif any(node in s.names for s in verdict.suspects):
        evidence.update(verdict="fail", why="; ".join(
            printable(f"{s.kind} {'-'.join(s.names)}: {s.metric} {s.value:.4g} vs fleet "
                      f"median {s.fleet_median:.4g}") for s in verdict.suspects))
    else:
        evidence.update(verdict="pass", why="no suspect among the node and its partners")
    return evidence


def chosen_partners(nodes, node, count):
    """`count` nodes in service (idle, drained by nobody), not `node`."""
    return sorted(n.name for n in nodes.values()
                  if n.in_service and not n.reason and n.name != node)[:count]


def resume(system=None, dry_run=False, partners=PARTNERS, output=None, out=None):
    """Re-test every node netbench drained and resume those that pass; the
    exit code."""
    out = out or sys.stdout
    nodes = slurm_nodes()
    ours = [n for n in nodes.values() if n.drained_by_netbench]
    others = [n for n in nodes.values() if n.drained and not n.drained_by_netbench]
    for node in others:
        print(printable(f"left alone: {node.name} is {node.state} by someone else "
                        f"({node.reason})"), file=out)
    if not ours:
        print("no node drained by netbench: nothing to resume", file=out)
        return exitcodes.OK
    if dry_run:
        for node in ours:
            print(printable(f"would re-test {node.name} ({node.reason}) against "
                            f"{', '.join(chosen_partners(nodes, node.name, partners)) or 'nobody'}"
                            f" and resume it if it passes"), file=out)
        return exitcodes.OK
    if system is None:
        raise DataError("--system", None, "resume re-tests over a netbench-ssh partition: "
                                          "name its system (e.g. vcluster-NAME)")
    system_env, extras = ssh_partition(system)
    mpi, families, binary, folder = built_benchmark()
    results = []
    try:
        for node in ours:
            chosen = chosen_partners(nodes, node.name, partners)
            if len(chosen) < 1:
                evidence = {"node": node.name, "partners": [], "verdict": "fail",
                            "why": "no node in service to measure it against"}
            else:
                evidence = retest(node.name, chosen, system_env, extras, mpi, families, binary)
            evidence["drained_reason"] = node.reason
            if evidence["verdict"] == "pass":
                slurm(*scontrol_update(node.name, "resume"))
                evidence["action"] = "resumed"
            else:
                evidence["action"] = "stays drained"
            results.append(evidence)
            print(printable(f"{node.name}: {evidence['verdict']} against "
                            f"{', '.join(evidence['partners']) or 'nobody'} "
                            f"({evidence['why']}): {evidence['action']}"), file=out)
    finally:
        folder.cleanup()
    path = write_evidence(results, output)
    print(f"evidence: {path}", file=out)
    return exitcodes.OK if all(r["verdict"] == "pass" for r in results) else exitcodes.LOSS


def built_benchmark():
    """(MPI, families, benchmark binary, its temporary folder): the
    benchmark built with the first MPICH-family MPI found (else the first)."""
    from .probe import discovery
    from .tools.benchrun import Benchmark
    families = discovery.load_families()
    mpis = discovery.discover(families=families)
    if not mpis:
        raise DataError("discovery", None, "no MPI found to re-test with")
    mpi = next((m for m in mpis if m.family == "mpich"), mpis[0])
    folder = tempfile.TemporaryDirectory(prefix="netbench-resume-build-")
    bench = Benchmark.build(mpi, families, folder.name)
    return mpi, families, bench.binary, folder


def write_evidence(results, output=None):
    """The re-tests' evidence as JSON: `output`, else
    reports/resume/resume-<UTC time>.json."""
    stamp = time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime())
    path = Path(output) if output else paths.REPORTS / "resume" / f"resume-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"when": stamp, "nodes": results}, indent=2,
                                  allow_nan=False) + "\n")
    return path

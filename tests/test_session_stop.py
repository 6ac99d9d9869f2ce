"""A ReFrame session stopped from Python (a timeout, Ctrl-C, a benchmark
killed) leaves no benchmark running: netbench.rfm.session asks ReFrame to
stop (SIGTERM), and ReFrame cancels its jobs; a SIGKILL would leave the
ranks of a running launch spinning on the host's CPUs."""

import subprocess
import time

import pytest

from netbench import paths
from netbench.rfm import session

TCP = "^PingPong%variant=blocking%transport=tcp%placement=intranode$"


def benchmarks_running():
    """This checkout's benchmark processes (built in its stage folder)."""
    proc = subprocess.run(["pgrep", "-f", f"{paths.STATE}/stage/.*/netbench "],
                          capture_output=True, text=True)
    return proc.stdout.split()


def test_a_session_stopped_mid_run_leaves_no_benchmark_running():
    assert not benchmarks_running(), "a benchmark of this checkout already runs"
    # the build takes 1-2 s, the case's launches several more: stopped while
    # a launch runs (or, on a slow host, before; nothing may be left either way)
    with pytest.raises(subprocess.TimeoutExpired):
        session.run_reframe("local", "-n", TCP, "-p", "^openmpi$", "-S", "budget=2.0",
                            timeout=8)
    deadline = time.monotonic() + 10
    while benchmarks_running() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not benchmarks_running()

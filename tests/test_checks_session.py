"""ReFrame sessions of netbench's checks (issue #14, 13): filters that match
no test case are an error, not `PASSED 0/0`; every session writes a log file
of its own, even when two start in the same second."""

import os
import re
import subprocess

import pytest

from netbench import paths
from netbench.rfm import session

EMPTY_RUN = "netbench: no test case matched the filters"


def clean_environment():
    """The caller's environment without ReFrame, netbench or Slurm settings."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("RFM_", "NETBENCH_", "SLURM_CONF", "VIRTUAL_ENV"))}


@pytest.mark.parametrize("selection", [["-n", "DoesNotExist"], ["-t", "nosuchtag"],
                                       ["-n", "PingPong", "-x", "PingPong"]])
def test_filters_that_match_nothing_fail_with_one_line(tmp_path, selection):
    """`reframe -c reframe_checks -n DoesNotExist -r` with netbench's
    configuration (what the venv's activate exports, given here with -C)."""
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        [str(session.BIN / "reframe"), "-C", str(paths.CONFIG), "-c", "reframe_checks",
         *selection, "-r"],
        cwd=paths.REPO, capture_output=True, text=True, timeout=600,
        env={**clean_environment(), "HOME": str(home)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]         # nothing measured: not a loss (1)
    assert proc.stderr.strip().splitlines()[-1] == EMPTY_RUN, out[-3000:]
    assert "0/0" not in out and "PASSED" not in out, out[-3000:]


def test_a_selection_that_matches_still_runs():
    """The guard looks at what the filters leave, not at the filters."""
    proc = session.run_reframe("local", "-n", "^PingPong%variant=blocking%transport=shm",
                               "-p", "^mpich$", action="--dry-run", timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert EMPTY_RUN not in out


def log_file(stdout):
    return re.search(r"^  log files:\s+'([^']+)'", stdout, re.M).group(1)


def test_two_sessions_started_together_write_a_log_each():
    """Started in the same second, both sessions used to write (and
    truncate) `reframe_<second>.log`: each now has its own, named after
    its ReFrame process."""
    cmd = [str(session.BIN / "reframe"), "-C", str(paths.CONFIG), "-c", str(paths.CHECKS),
           "--system", "local"]
    env = clean_environment()
    procs = [subprocess.Popen([*cmd, "-n", name, "-l"], cwd=paths.REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name in ("PingPong", "MpiVsTcp")]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-2000:] + err[-2000:]
    logs = [log_file(out) for out, _ in outs]
    assert logs[0] != logs[1]
    for p, path, mine, theirs in zip(procs, logs, ("PingPong", "MpiVsTcp"),
                                     ("MpiVsTcp", "PingPong")):
        assert path.endswith(f"-{p.pid}.log"), path
        text = open(path).read()
        assert f"-n {mine} -l" in text and f"-n {theirs} -l" not in text, path

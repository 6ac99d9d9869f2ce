"""Ctrl-C (SIGINT) and SIGTERM stop every `netbench` command alike: one
line on stderr, exit code 130, and nothing it had made left behind.  Found
when a Ctrl-C during `netbench publish` printed a KeyboardInterrupt
traceback, and SIGTERM ended it where it stood, its staging folder left in
reports/.  Each test sends a real signal to a real process at a point
where it has made something, found by polling for that state (bounded),
never by a sleep."""

import contextlib
import fcntl
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netbench import paths

#: the command as users run it: the venv's script, and `python -m`
COMMANDS = [[str(Path(sys.executable).parent / "netbench")],
            [sys.executable, "-m", "netbench.cli"]]
#: a real session's run report (tests/data/compare/README.md)
RECORDED = paths.REPO / "tests" / "data" / "compare" / "pingpong-shm-openmpi.json"
#: how long a command may take to reach the state a test waits for
READY_SECONDS = 120


@contextlib.contextmanager
def reports_locked(reports):
    """reports/.lock held, as another publisher holds it: publish waits for
    it with its session staged in reports/."""
    fd = os.open(reports / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def staged(reports):
    """The staging folders publish made in `reports`, finished (publish
    makes a staging folder readable by all as its last step: it waits for
    the lock from then on)."""
    return [p for p in reports.glob(".session-*")
            if stat.S_IMODE(p.stat().st_mode) == 0o755]


def wait_for(ready, proc, what):
    deadline = time.monotonic() + READY_SECONDS
    while not ready():
        assert proc.poll() is None, f"ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} in {READY_SECONDS} s"
        time.sleep(0.01)


def signalled_when(ready, proc, what, signum, before=lambda: None):
    """Once `ready()` holds, `proc` sent `signum`; its stderr.  A proc
    still running after is killed, so no test leaves one behind."""
    try:
        wait_for(ready, proc, what)
        before()
        proc.send_signal(signum)
        return proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("command", COMMANDS, ids=["script", "python-m"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_publish_stopped_with_its_session_staged_removes_it(tmp_path, signum, command):
    reports = tmp_path / "reports"
    reports.mkdir()
    raw = tmp_path / "run-report.json"
    raw.write_text(RECORDED.read_text())
    with reports_locked(reports):
        proc = subprocess.Popen(command + ["publish", str(raw), "-o", str(reports)],
                                cwd=paths.REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        err = signalled_when(lambda: staged(reports), proc, "staged session", signum)
    assert err.splitlines() == [f"netbench publish: interrupted by "
                                f"{signal.Signals(signum).name}"], err
    assert proc.returncode == 130
    # nothing of it is left: no staging folder, no session, no `latest`
    assert sorted(p.name for p in reports.iterdir()) == [".lock"]


def test_sigterm_before_the_command_begins_is_one_line():
    """SIGTERM while netbench.cli imports, before main: nothing is done yet;
    one line and 130, as for Ctrl-C.  The process is the command (its
    argv[0] `netbench`) and stops itself right after the import."""
    code = ("import os, signal, sys; sys.argv = ['netbench', 'discover'];"
            "import netbench.cli;"
            "os.kill(os.getpid(), signal.SIGTERM);"
            "print('not reached', flush=True)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=paths.REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and "not reached" not in proc.stdout, proc
    assert proc.stderr.splitlines() == ["netbench: interrupted before anything was done"]


#: a sitecustomize that holds netbench's atomic writes until the test has
#: signalled: the command has made its output folder and is writing its
#: page into it (READY appears) when the signal comes.  Only the moment is
#: arranged; the command, its folder and the signal are real
HOLD_WRITES = '''
import os, time
from pathlib import Path
import netbench.safefile

_write = netbench.safefile.atomic_write
READY = Path(os.environ["NETBENCH_TEST_READY"])

def atomic_write(path, data, mode=0o644):
    READY.write_text(str(path))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)
    return _write(path, data, mode)

netbench.safefile.atomic_write = atomic_write
'''


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("action", ["report", "compare"])
def test_a_page_stopped_while_written_leaves_no_folder(tmp_path, action, signum):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(HOLD_WRITES)
    ready = tmp_path / "ready"
    out = tmp_path / "page"
    args = {"report": ["report", str(RECORDED), "-o", str(out)],
            "compare": ["compare", str(RECORDED), str(RECORDED), "-o", str(out)]}[action]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"),
           "NETBENCH_TEST_READY": str(ready)}
    proc = subprocess.Popen(COMMANDS[0] + args, cwd=paths.REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the folder is made by the command, for its page
    err = signalled_when(ready.exists, proc, "page being written", signum,
                         before=lambda: out.is_dir() or pytest.fail(f"{out} not made"))
    assert err.splitlines() == [f"netbench {action}: interrupted by "
                                f"{signal.Signals(signum).name}"], err
    assert proc.returncode == 130
    assert not out.exists()

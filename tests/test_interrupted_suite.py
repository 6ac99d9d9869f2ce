"""A test suite ended by SIGTERM (`timeout`, a CI runner) still takes down
what its tests made: conftest.py turns the signal into an interrupt, so
with-blocks and fixtures unwind.  Found when `timeout` ended a run of
test_tune.py and left its virtual cluster up."""

import os
import signal
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent

WAITING_TEST = '''
import os, time
from pathlib import Path

def test_waits_inside_what_it_made():
    marker = Path(os.environ["MARKER"])
    marker.write_text("made")
    try:
        print("READY", flush=True)
        time.sleep(120)
    finally:
        marker.write_text("taken down")
'''


def test_sigterm_unwinds_the_running_test(tmp_path):
    (tmp_path / "test_waiting.py").write_text(WAITING_TEST)
    marker = tmp_path / "marker"
    env = {**os.environ, "MARKER": str(marker),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-s", "-p", "conftest",
                             "-p", "no:cacheprovider", "test_waiting.py"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if "READY" in line:
                break
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert marker.read_text() == "taken down", out
    assert proc.returncode != 0

"""A host's load made on purpose: one core kept busy by a spinning process
(a login node's normal state), for the benchmarks that count false alarms
and detections under load, and for the tests that need a busy host."""

import contextlib
import subprocess
import sys


@contextlib.contextmanager
def busy_core(busy=True):
    """One core kept busy by a spinning process while the block runs (its
    PID), stopped when the block ends, even on failure; nothing when not
    `busy`."""
    if not busy:
        yield None
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield spinner.pid
    finally:
        spinner.kill()
        spinner.wait()

"""Run a ReFrame session of netbench's checks from Python (tests, demos) the
way a user runs it from a shell: the venv's reframe, netbench's
configuration, and a clean environment.

The environment drops RFM_* and NETBENCH_* variables (a caller's own
configuration or a job's leftovers would change what runs) and SLURM_CONF
(the configuration points ReFrame at a virtual cluster's Slurm itself)
unless `env` sets them again.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from .. import paths

BIN = Path(sys.executable).parent
DROPPED = ("RFM_", "NETBENCH_", "SLURM_CONF")
#: a session's exit codes when no case failed: every case passed (0), or
#: some were inconclusive, the host too noisy to tell (3; README, "Exit
#: codes").  Tests of runs, not of verdicts, accept both: noise must not
#: turn them red
NO_FAILURE = (0, 3)


def run_reframe(system, *selection, env=None, timeout=1800, action="-r"):
    """`reframe -c reframe_checks --system SYSTEM SELECTION... -r` (or
    another `action`: --dry-run, -l); without a system (None), ReFrame's
    own choice of this machine's."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
    clean.update(env or {})
    args = [str(BIN / "reframe"), "-C", str(paths.CONFIG), "-c", str(paths.CHECKS),
            *(["--system", system] if system else []), *selection, action]
    with subprocess.Popen(args, cwd=paths.REPO, env=clean, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            stop_gracefully(proc)
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


#: how long ReFrame may take to cancel its jobs once asked to stop
STOP_SECONDS = 30


def stop_gracefully(proc):
    """SIGTERM first: ReFrame then aborts its cases and cancels their jobs
    (a SIGKILL would leave a running benchmark's ranks spinning); SIGKILL
    only when it does not end within STOP_SECONDS."""
    proc.terminate()
    try:
        proc.communicate(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def latest_report():
    """The run report of the last session (published by the configuration)."""
    return json.loads((paths.REPORTS / "latest" / "run-report.json").read_text())

"""ReFrame sessions as a user starts them, and what their run reports say."""

import os
import subprocess

from netbench import paths

ACTIVATE = paths.REPO / ".venv" / "bin" / "activate"


def clean_env(home):
    """The caller's environment without any ReFrame or netbench setting, and
    a HOME of its own so that writes to ~/.reframe would show."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RFM_", "NETBENCH_", "VIRTUAL_ENV"))}
    env["HOME"] = str(home)
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if ".venv" not in p)
    return env


def bash(script, cwd, home, timeout=900):
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=clean_env(home),
                          capture_output=True, text=True, timeout=timeout)


def cases_of(report):
    return [tc for run in report["runs"] for tc in run["testcases"]
            if not tc["name"].startswith("NetbenchBuild")]


def perf(tc, name):
    return next(v[0] for k, v in tc["perfvalues"].items() if k.endswith(":" + name))

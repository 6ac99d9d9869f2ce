"""This machine at the end of a session (provenance.json): host, kernel, CPU,
ReFrame and Python versions, netbench's commit, the MPIs the cases ran
with, the tuning state and the Spack lock."""

import hashlib
import os
import platform
import re
import subprocess
from pathlib import Path

from .. import datafiles, paths
from .sessions import Session

TUNING_STATE = paths.STATE / "tuning-state.json"


def _read(path, default=""):
    try:
        return Path(path).read_text()
    except OSError:
        return default


def _git_commit():
    try:
        # --no-optional-locks: read only, never take .git/index.lock from
        # whoever else works in this checkout
        out = subprocess.run(["git", "--no-optional-locks", "-C", str(paths.REPO), "describe",
                              "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def collect_provenance(report):
    cpu = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.M)
    mpis = {}
    for tc in Session(report, {}, "").testcases:
        info = tc.get("mpi_info") or {}
        if info:
            mpis[tc.get("environ", "")] = info
    lock = paths.REPO / "spack.lock"
    tuning = datafiles.load_json(TUNING_STATE) if os.path.lexists(TUNING_STATE) else None
    return {
        "host": platform.node(),
        "kernel": f"{platform.system()} {platform.release()}",
        "cpu": cpu.group(1).strip() if cpu else platform.processor(),
        "cpus": os.cpu_count(),
        "reframe": report["session_info"].get("version", ""),
        "netbench_commit": _git_commit(),
        "python": platform.python_version(),
        "mpis": mpis,
        "tuning_state": tuning,
        "spack_lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists()
        else None,
    }

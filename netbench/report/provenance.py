"""A session's provenance (provenance.json): this machine at publishing
(host, kernel, CPU, ReFrame and Python versions), the MPIs the cases ran
with, and what the run itself recorded in its cases' records: netbench's
commit, the Spack lock's hash and each node's tuning state.  Those three
are copied from the records, never read anew, so a re-published old
session keeps its own; a run report from before records held them says
"not recorded"."""

import os
import platform
import re
from pathlib import Path

from .sessions import Session


def _read(path, default=""):
    try:
        return Path(path).read_text()
    except OSError:
        return default


def collect_provenance(report):
    cpu = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.M)
    mpis = {}
    for tc in Session(report, {}, "").testcases:
        info = tc.get("mpi_info") or {}
        if info:
            mpis[tc.get("environ", "")] = info
    recorded = recorded_by_the_run(report)
    return {
        "host": platform.node(),
        "kernel": f"{platform.system()} {platform.release()}",
        "cpu": cpu.group(1).strip() if cpu else platform.processor(),
        "cpus": os.cpu_count(),
        "reframe": report["session_info"].get("version", ""),
        "netbench_commit": recorded["netbench_commit"],
        "python": platform.python_version(),
        "mpis": mpis,
        "tuning_state": recorded["tuning_state"],
        "spack_lock_sha256": recorded["spack_lock_sha256"],
    }


NOT_RECORDED = "not recorded (the run report is from before runs recorded it)"


def recorded_by_the_run(report):
    """netbench's commit, spack.lock's hash and the nodes' state ({host:
    state}) as the session's records hold them."""
    commits, locks, states = set(), set(), {}
    for tc in Session(report, {}, "").testcases:
        record = tc.get("record") or {}
        prov = record.get("provenance") or {}
        if prov.get("netbench_commit"):
            commits.add(prov["netbench_commit"])
            locks.add(prov.get("spack_lock_sha256"))
        states.update(record.get("node_state") or {})
    return {"netbench_commit": ", ".join(sorted(commits)) or NOT_RECORDED,
            "spack_lock_sha256": (", ".join(sorted(x for x in locks if x))
                                  or ("no Spack environment" if locks else NOT_RECORDED)),
            "tuning_state": states or None}

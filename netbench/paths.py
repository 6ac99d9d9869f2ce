"""Where netbench keeps things: everything lives inside the repository."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECKS = REPO / "reframe_checks"
CONFIG = CHECKS / "settings.py"
REFERENCES = CHECKS / "references"
SOURCES = CHECKS / "src"
REPORTS = REPO / "reports"
# ReFrame's working folders (stage, output, perflogs, logs, topology)
STATE = REPO / ".reframe"
# ReFrame's results database: every session's run report (`reframe
# --list-stored-sessions`, `--performance-compare`); netbench's history and
# `netbench compare` read it (netbench/report/store.py)
RESULTS_DB = STATE / "results.db"
# MPI prefixes installed from PyPI wheels, one per implementation
WHEEL_PREFIXES = REPO / ".mpi"
# Spack views, one folder per MPI variant (filled by `spack install`)
SPACK_VIEWS = REPO / "views"
# virtual clusters: this checkout's read-only copies of a cluster's inventory
# and hostfile (its keys and state are root's, in vcluster.CLUSTERS)
VCLUSTERS = REPO / ".vcluster"
DATA = Path(__file__).resolve().parent / "data"
TEMPLATES = Path(__file__).resolve().parent / "templates"


def junit_file(pid=None):
    """The JUnit XML the ReFrame process `pid` (default: this one) writes
    (rfm/config.py's `report_junit`): ReFrame expands no session number in
    `report_junit`, so two sessions that end together need a name each;
    report/publish.py moves it beside its run report."""
    return STATE / "reports" / f"junit-{pid or os.getpid()}.xml"


def state_dir(name):
    """A git-ignored working folder of ReFrame's, created on demand."""
    path = STATE / name
    os.makedirs(path, exist_ok=True)
    return path

"""Where netbench keeps things: everything lives in one folder, netbench's
home, ReFrame's checks and the documented references in its reframe_checks/.

The home is $NETBENCH_HOME where set; else the checkout this package was
imported from (a source tree, or `make setup`'s editable install); else,
for a netbench installed from a wheel, the current folder, where its
working folders (reports/, .reframe/) are made.  Never a folder further
up: one another user can write could hand a root run its checks and
references.  An installed netbench outside a checkout reads the references
its wheel shipped (shipped_references)."""

import os
from importlib import metadata
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def is_checkout(folder):
    """Whether `folder` holds netbench's checks (a clone, or a copy of one)."""
    return (folder / "reframe_checks" / "settings.py").is_file()


def home():
    """The folder of the checks, the references and the working folders."""
    named = os.environ.get("NETBENCH_HOME")
    if named:
        return Path(named).resolve()
    if is_checkout(PACKAGE.parent):
        return PACKAGE.parent
    return Path.cwd()


def shipped_references():
    """The references folder a wheel installed (pyproject.toml's
    data-files: <prefix>/share/netbench/references), or None: found through
    the install's own record of its files, so a --user or --prefix install
    finds them as a venv's does."""
    try:
        files = metadata.distribution("netbench").files or ()
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "judging.yaml" and file.parent.name == "references":
            return Path(file.locate()).resolve().parent
    return None


def references_folder(repo):
    """`repo`'s reframe_checks/references where it has them, else the
    wheel's (and that folder, missing, where neither exists: the error
    reading it then names it)."""
    own = repo / "reframe_checks" / "references"
    if own.is_dir():
        return own
    return shipped_references() or own


REPO = home()
CHECKS = REPO / "reframe_checks"
CONFIG = CHECKS / "settings.py"
REFERENCES = references_folder(REPO)
SOURCES = CHECKS / "src"
# a system's learned baselines: beside the references in a checkout (a site
# commits them); for an installed netbench, in its home, never inside the
# install's shared references
BASELINES = REFERENCES / "baselines" if REFERENCES.is_relative_to(REPO) else REPO / "baselines"
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
DATA = PACKAGE / "data"
TEMPLATES = PACKAGE / "templates"


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

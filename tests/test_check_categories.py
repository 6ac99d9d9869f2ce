"""One declared category per check (#24): the thresholds' kind, the report
section and the benchmark's mode follow from it (netbench/checks/category.py,
netbench/data/check_categories.yaml), and a check declaring a category the
data file does not list stops the session as ReFrame loads it, with one
line naming the check and the value."""

import ast
import json
import os
import subprocess
import sys

import pytest

from netbench import paths
from netbench.checks import category
from netbench.datafiles import DataError
from netbench.rfm import session

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

#: every case of reframe_checks/, instantiated the way ReFrame's loader does
#: (parameters and init hooks), as {check: {(kind, section, mode), ...}}
LOAD_CASES = """
import json, sys
import reframe.core.config as config
import reframe.core.runtime as runtime
from reframe.frontend.loader import RegressionCheckLoader
site = config.load_config(sys.argv[1])
site.select_subconfig("local")
runtime.init_runtime(site)
found = {}
for case in RegressionCheckLoader([sys.argv[2]]).load_all():
    if not hasattr(case, "declared_category"):
        continue        # the build fixtures
    labels = [case.declared_category(), case.kind, case.section,
              getattr(case, "bench_mode", None)]
    found.setdefault(type(case).__name__, [])
    if labels not in found[type(case).__name__]:
        found[type(case).__name__].append(labels)
print(json.dumps(found))
"""

#: what each check was judged, drawn and run as before the category: its
#: three labels then (kind, section, bench_mode; None: not netbench's
#: benchmark), which the categories must give again
BEFORE = {
    "PingPong": {("pingpong", "pingpong", "pingpong")},
    "MpiVsTcp": {("pingpong", "mpi_vs_tcp", "pingpong")},
    "Throughput": {("collective", "throughput", p) for p in ("sendrecv", "exchange", "bcast")},
    "TcpSocketBuffer": {("tcp", "tcp_tuning", "tcp")},
    "TcpStreams": {("tcp-stream", "tcp_tuning", "tcp")},
    "MtuPingPong": {("pingpong", "mtu", "pingpong")},
    "MtuRing": {("collective", "mtu", "exchange")},
    "ContainerPingPong": {("pingpong", "pingpong", "pingpong")},
    "ContainerParity": {("pingpong", "container", "pingpong")},
    "LinkSweep": {("pingpong", "sweep", "sweep")},
    "OsuPt2Pt": {("pingpong", "pingpong", None)},
    "ImbMpi1": {("pingpong", "pingpong", None), ("collective", "throughput", None)},
    "NetpipeMpi": {("pingpong", "pingpong", None)},
}


@pytest.fixture(scope="module")
def loaded_cases():
    proc = subprocess.run([sys.executable, "-c", LOAD_CASES, str(paths.CONFIG),
                           str(paths.CHECKS)], cwd=paths.REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_case_takes_kind_section_and_mode_from_its_category(loaded_cases):
    known = category.categories()
    assert set(BEFORE) <= set(loaded_cases), sorted(loaded_cases)
    for check, cases in loaded_cases.items():
        for declared, kind, section, mode in cases:
            spec = known[declared]
            assert (kind, section) == (spec["kind"], spec["section"]), (check, declared)
            assert mode == spec["mode"] or spec["mode"] == category.PATTERN, (check, mode)


def test_the_categories_keep_what_each_check_was(loaded_cases):
    got = {check: {tuple(labels[1:]) for labels in cases}
           for check, cases in loaded_cases.items()}
    # ThroughputPerNode has no case on a one-node system; its class is read
    # below, with every check's
    assert {k: v for k, v in got.items() if k in BEFORE} == BEFORE, got


def declared_labels(folder):
    """[(file, class, label)] of every class body in `folder` that assigns
    `kind`, `section` or `bench_mode` itself."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                targets = statement.targets if isinstance(statement, ast.Assign) else \
                    [statement.target] if isinstance(statement, ast.AnnAssign) else []
                found += [(path.name, node.name, t.id) for t in targets
                          if isinstance(t, ast.Name) and t.id in ("kind", "section", "bench_mode")]
    return found


def test_no_check_sets_the_three_labels_itself():
    """The category is the one label: a class that set `kind`, `section` or
    `bench_mode` besides would let the three disagree again."""
    assert declared_labels(paths.CHECKS) + declared_labels(paths.REPO / "netbench" / "checks") \
        == []


def test_every_check_class_declares_a_known_category():
    text = "\n".join(p.read_text() for p in sorted(paths.CHECKS.glob("*.py")))
    declared = {node.value.value for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and any(isinstance(t, ast.Name) and t.id == "category" for t in node.targets)}
    assert declared and declared <= set(category.categories()), declared
    assert category.categories()["scaling"]["section"] == "scaling"     # ThroughputPerNode


def test_an_unknown_category_is_one_line_naming_the_check_and_the_value():
    with pytest.raises(ValueError) as err:
        category.category_of("PingPongX", "pingpog")
    assert str(err.value).startswith("PingPongX: category 'pingpog' is not one of pingpong, ")
    assert "\n" not in str(err.value)


BOGUS = """
import reframe as rfm
from reframe.core.builtins import parameter
from netbench import checks


@rfm.simple_test
class Misfiled(checks.PingPongBase):
    category = "pingpog"
    transport = parameter(["shm"])
    placement = "intranode"
"""


def test_a_check_of_an_unknown_category_stops_the_session_as_reframe_loads_it(tmp_path):
    """ReFrame's loader would skip the check with a warning and run the
    others; the session stops instead, before any case runs, with one line."""
    check = tmp_path / "misfiled.py"
    check.write_text(BOGUS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    proc = subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG),
                           "-c", str(check), "-c", str(paths.CHECKS / "pingpong.py"),
                           "-p", "^mpich$", "-l"], cwd=paths.REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if "pingpog" in line]
    assert lines == [
        "netbench: Misfiled: category 'pingpog' is not one of "
        f"{', '.join(category.categories())} (netbench/data/check_categories.yaml)"], \
        proc.stderr[-3000:]
    assert "Found" not in proc.stdout        # no list of checks: the load stopped


@pytest.mark.parametrize("entry, key, message", [
    ("{kind: pingpong, section: curves, mode: pingpong}", "categories.x.section",
     "'curves' is not one of pingpong"),
    ("{kind: pingpong, section: pingpong, mode: pingpang}", "categories.x.mode",
     "'pingpang' is not one of pingpong"),
    ("{kind: pingpong, section: pingpong}", "categories.x", "mode"),
])
def test_a_bad_category_file_is_one_line_naming_the_file_and_key(tmp_path, entry, key, message):
    path = tmp_path / "check_categories.yaml"
    path.write_text(f"categories:\n  x: {entry}\n")
    with pytest.raises(DataError) as err:
        category.categories(path)
    assert str(path) in str(err.value) and key in str(err.value), str(err.value)
    assert message in str(err.value) and "\n" not in str(err.value)

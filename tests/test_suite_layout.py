"""The test suite's own layout (#24): test modules share fixtures through
conftest.py and helpers through tests/helpers/, and never import each
other, so each can be run, moved or deleted alone."""

import ast
from pathlib import Path

import pytest

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

TESTS = Path(__file__).parent


def imported_modules(path):
    """(line, top-level module name) of every import in a Python file,
    wherever in the file it is (a function's body too)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def imports_of_test_modules(path):
    """`path`'s imports of a test module of this folder, as `file:line: module`."""
    test_modules = {p.stem for p in TESTS.glob("test_*.py")}
    return [f"{path.name}:{line}: {name}" for line, name in imported_modules(path)
            if name in test_modules]


def test_no_test_module_imports_another():
    found = [hit for path in sorted(TESTS.rglob("*.py"))
             for hit in imports_of_test_modules(path)]
    assert found == [], "move what is shared into conftest.py or tests/helpers/: " + \
        "; ".join(found)


def test_the_check_finds_an_import_of_a_test_module(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("import os\nfrom helpers.vcluster import cluster\n\n\ndef f():\n"
                      "    from test_vcluster import cluster\n    import test_report\n")
    assert imports_of_test_modules(sample) == ["test_sample.py:6: test_vcluster",
                                                  "test_sample.py:7: test_report"]


#: what a module marked `alongside` may not name: a session whose verdict
#: it reads, a benchmark it builds and runs, or a clock depend on how busy
#: the host is, and `make test` runs the marked modules two at a time
MEASURES_OR_TIMES = {"run_reframe", "latest_report", "build_benchmark", "monotonic",
                     "perf_counter", "sleep"}


def marked_alongside(tree):
    return any(isinstance(node, ast.Assign) and
               any(getattr(t, "id", None) == "pytestmark" for t in node.targets) and
               "alongside" in ast.dump(node.value) for node in tree.body)


def measuring_or_timing(path, tree=None):
    """`file:line: name` of each name in MEASURES_OR_TIMES that a module
    marked `alongside` uses: called, or asked for as a fixture."""
    tree = tree or ast.parse(path.read_text(), str(path))
    if not marked_alongside(tree):
        return []
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.FunctionDef):
            names = [a.arg for a in node.args.args]
        found += [f"{path.name}:{node.lineno}: {n}" for n in names if n in MEASURES_OR_TIMES]
    return found


def test_a_module_run_alongside_others_reads_no_verdict_benchmark_or_clock():
    trees = {path: ast.parse(path.read_text(), str(path))
             for path in sorted(TESTS.glob("test_*.py"))}
    assert any(marked_alongside(tree) for tree in trees.values())
    found = [hit for path, tree in trees.items() for hit in measuring_or_timing(path, tree)]
    assert found == [], ("a verdict, a benchmark or a clock needs the host to itself: "
                         "drop `alongside` from " + "; ".join(found))


def test_the_check_finds_a_timed_call_and_a_benchmark_fixture(tmp_path):
    sample = tmp_path / "test_sample.py"
    body = ("import time\n\nimport pytest\n\n{mark}\n\n"
            "def test_x(build_benchmark):\n    time.monotonic()\n")
    sample.write_text(body.format(mark="pytestmark = pytest.mark.alongside"))
    assert measuring_or_timing(sample) == ["test_sample.py:7: build_benchmark",
                                           "test_sample.py:8: monotonic"]
    sample.write_text(body.format(mark=""))
    assert measuring_or_timing(sample) == []

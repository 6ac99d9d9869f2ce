"""Parse once, record once (issue #24): the checks' performance and sanity
functions read the parsed launches (NetbenchRun.launches, the record),
never a stage file.  Read from the checks' source, so that a new figure
that reaches for the job's output fails here, naming the function."""

import ast

import pytest

from netbench import paths

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

#: what reads the job's output again: ReFrame's file extractors and
#: netbench's own readers
READERS = {"read_stage_file", "parse_output", "parse_run", "parse_sweep", "extractall",
           "extractsingle", "assert_found", "assert_not_found", "findall", "open",
           "series", "round_figures", "read"}
DECORATORS = {"performance_function", "sanity_function", "deferrable"}
SOURCES = sorted([*(paths.REPO / "netbench" / "checks").glob("*.py"),
                  *paths.CHECKS.glob("*.py")])


def decorated(function):
    names = set()
    for dec in function.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        names.add(target.attr if isinstance(target, ast.Attribute) else
                  getattr(target, "id", ""))
    return names & DECORATORS


def calls(function):
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            target = node.func
            yield target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def figure_functions():
    for path in SOURCES:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and decorated(node):
                yield path, node


@pytest.mark.parametrize("path, function", [
    pytest.param(p, f, id=f"{p.name}:{f.name}") for p, f in figure_functions()])
def test_no_figure_or_sanity_function_reads_a_stage_file(path, function):
    readers = sorted(set(calls(function)) & READERS)
    assert not readers, (f"{path.name}: {function.name} reads the job's output again "
                         f"({', '.join(readers)}): read the parsed launches "
                         f"(NetbenchRun.launches, first_launch) instead")


def test_the_checks_parse_the_benchmarks_output_in_one_place():
    """One call site of the benchmark's parser outside netbench/results/
    among the checks: Launches.launches (NetbenchRun's)."""
    sites = [f"{p.relative_to(paths.REPO)}:{n.lineno}" for p in SOURCES
             for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Call) and getattr(n.func, "attr", "") in ("parse_output",
                                                                             "parse_run")]
    assert sites == ["netbench/checks/launches.py:" + sites[0].split(":")[1]], sites

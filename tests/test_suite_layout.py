"""The test suite's own layout (#24): test modules share fixtures through
conftest.py and helpers through tests/helpers/, and never import each
other, so each can be run, moved or deleted alone."""

import ast
from pathlib import Path

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

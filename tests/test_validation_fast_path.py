"""datafiles.plainly_valid, the plain-Python check `validate` asks before
jsonschema (a 10,000-case run report's records took seconds in jsonschema
alone, twice for `netbench compare`): for every node of a real record and
run report, each replaced by a value of every JSON type (and NaN, a float
where an integer goes, a missing or an unknown key), it decides as
jsonschema decides, or says it cannot (then jsonschema does)."""

import copy
import json
from pathlib import Path

import pytest

from netbench import datafiles
from netbench.results import record as results_record
from netbench.report import sessions

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

RECORDED = Path(__file__).parent / "data" / "compare" / "pingpong-shm-openmpi.json"
REPLACEMENTS = (None, "x", "", 0, 1, 2.5, 1.0, -3, True, False, float("nan"), float("inf"),
                [], [1], {}, {"x": 1}, 10 ** 400)


def trimmed(report):
    """The recorded session with two rows per curve and launch: every kind
    of node, fewer of each."""
    report = copy.deepcopy(report)
    record = report["runs"][0]["testcases"][0]["record"]
    for series in record["series"]:
        series["rows"] = series["rows"][:2]
    for launches in record["runs"].values():
        for launch in launches:
            launch["rows"] = launch["rows"][:2]
    return report


def nodes(data, path=()):
    """Every (path, value) of a document, the root excepted."""
    items = data.items() if isinstance(data, dict) else \
        enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        yield (*path, key), value
        yield from nodes(value, (*path, key))


def replaced(data, path, value):
    data = copy.deepcopy(data)
    *parents, last = path
    for key in parents:
        data = data[key]
    if value is KeyError:
        del data[last]
    else:
        data[last] = value
    return data


def variants(document):
    """The document with each node replaced, removed, or given a sibling
    key of no schema."""
    for path, value in list(nodes(document)):
        for other in REPLACEMENTS:
            yield replaced(document, path, other)
        if isinstance(path[-1], str):
            yield replaced(document, path, KeyError)
        if isinstance(value, dict):
            yield replaced(document, (*path, "no_such_key"), 1)


def agrees(document, schema):
    """(decided, disagreements) of plainly_valid against jsonschema."""
    decided, wrong = 0, []
    validator = datafiles.Validator(schema)
    for variant in variants(document):
        try:
            fast = datafiles.plainly_valid(variant, schema)
        except (datafiles._Unsupported, OverflowError):
            continue
        try:
            slow = validator.is_valid(variant)
        except OverflowError:     # jsonschema's own `number` on an int beyond a float
            continue
        decided += 1
        if fast != slow:
            wrong.append(json.dumps(variant, default=str)[:300])
    return decided, wrong


@pytest.mark.parametrize("schema", ["shallow", "whole"])
def test_a_record_is_judged_as_jsonschema_judges_it(schema):
    record = trimmed(json.loads(RECORDED.read_text()))["runs"][0]["testcases"][0]["record"]
    decided, wrong = agrees(record, results_record._SHALLOW if schema == "shallow"
                            else results_record.SCHEMA)
    assert not wrong, wrong[:3]
    assert decided > 1000


def test_a_run_report_is_judged_as_jsonschema_judges_it():
    report = trimmed(json.loads(RECORDED.read_text()))
    del report["runs"][0]["testcases"][0]["record"]["runs"]      # fewer variants
    decided, wrong = agrees(report, sessions.RUN_REPORT_SCHEMA)
    assert not wrong, wrong[:3]
    assert decided > 1000


def test_a_fault_is_still_named_by_jsonschema(tmp_path):
    report = json.loads(RECORDED.read_text())
    report["runs"][0]["testcases"][0]["record"]["runs"]["mpi"][0]["rows"][3]["usec"] = "fast"
    path = tmp_path / "run-report.json"
    path.write_text(json.dumps(report))
    with pytest.raises(datafiles.DataError) as err:
        sessions.load_session(path)
    assert str(err.value) == (f"{path}: runs[0].testcases[0].record.runs.mpi[0].rows[3].usec: "
                              f"expected a finite number, got str 'fast'")

"""Issue #14: `netbench publish` and `netbench report` on shared machines.

Session folder names are built from parsed values and publishing removes
nothing netbench did not write; concurrent publishers agree on the index
and `latest`; bad input is one line naming the file and key, exit code 2,
with nothing already written lost.  Real files and processes throughout."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netbench import cli, report
from netbench.datafiles import DataError
from helpers.reports import minimal_report, one_line_error

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

#: the checkout whose netbench the subprocesses import (python -c puts the cwd first)
CHECKOUT = Path(report.__file__).resolve().parents[2]     # netbench/report/__init__.py


def run_report(path, time_start="20261121T100000+0000", uuid="aaaaaaaa-0000", started=1000.0,
               change=None):
    """A run report file like ReFrame's, with `change(data)` applied."""
    data = minimal_report(uuid=uuid, started=started)
    data["session_info"]["time_start"] = time_start
    if change:
        change(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def snapshot(root, skip=("inputs",)):
    """{relative path: file bytes, link target or 'dir'} of everything under root."""
    tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                tree[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                tree[rel] = "dir"
            else:
                tree[rel] = path.read_bytes()
    return tree


@pytest.fixture
def reports_dir(tmp_path):
    """checkout/reports/ with the tracked README and an earlier session, and a
    folder beside the checkout: all of it must survive any publish."""
    reports = tmp_path / "checkout" / "reports"
    reports.mkdir(parents=True)
    (reports / "README.md").write_text("tracked, not generated\n")
    report.publish(run_report(tmp_path / "inputs" / "earlier.json", uuid="eeeeeeee-1111"),
                   reports)
    (tmp_path / "somedir").mkdir()
    (tmp_path / "somedir" / "keep.txt").write_text("not netbench's\n")
    return reports


# ---- hostile and empty session names ----------------------------------------

HOSTILE = {
    "empty start and uuid": ("", "", "session_info."),
    "start climbs out of reports": ("../../somedir", "", "session_info."),
    "start climbs out, with uuid": ("../../somedir", "deadbeef-0000", "session_info.time_start"),
    "uuid with a slash": ("20261121T100000+0000", "1/../../", "session_info.uuid"),
    "absolute start": ("{tmp_path}/somedir", "", "session_info."),
}


@pytest.mark.parametrize("time_start,uuid,key", HOSTILE.values(), ids=HOSTILE.keys())
def test_publish_removes_and_writes_nothing_outside_its_session(tmp_path, reports_dir,
                                                                 time_start, uuid, key):
    raw = run_report(tmp_path / "inputs" / "hostile.json",
                     time_start=time_start.format(tmp_path=tmp_path), uuid=uuid)
    before = snapshot(tmp_path)
    try:
        report.publish(raw, reports_dir)
        error = None
    except Exception as err:          # noqa: BLE001 - the old code raised anything
        error = err
    assert snapshot(tmp_path) == before      # earlier session, README, somedir: untouched
    assert isinstance(error, DataError), repr(error)
    message = str(error)
    assert "\n" not in message and str(raw) in message and key in message, message


def test_publish_cli_refuses_a_hostile_session_in_one_line(tmp_path, reports_dir, capsys):
    raw = run_report(tmp_path / "inputs" / "hostile.json", time_start="../../somedir", uuid="")
    before = snapshot(tmp_path)
    assert cli.main(["publish", "--reports-dir", str(reports_dir), str(raw)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert str(raw) in line and "session_info." in line, line
    assert snapshot(tmp_path) == before


def test_session_folder_name_is_built_from_parsed_values(tmp_path):
    raw = run_report(tmp_path / "r.json", time_start="20261121T100000-0500",
                     uuid="A3E20BD7-9F9E-41DF-8C07-F25CA83C0627")
    assert report.load_session(raw).name == "20261121T100000-a3e20bd7"


# ---- the same session twice, and `latest` ---------------------------------------

def test_publishing_a_session_again_replaces_only_what_netbench_wrote(tmp_path, reports_dir):
    raw = run_report(tmp_path / "inputs" / "again.json", uuid="eeeeeeee-1111",
                     change=lambda d: d["session_info"].update(hostname="second-run"))
    folder = report.publish(raw, reports_dir)               # the fixture's session, again
    assert "second-run" in (folder / "run-report.json").read_text()
    # a session without a fabric sweep: no suspects.json, no drain.sh; a
    # run report without ReFrame's JUnit file beside it: no run-report.junit.xml
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        set(report.SESSION_FILES) - {"suspects.json", "drain.sh", "run-report.junit.xml"})

    (folder / "notes.txt").write_text("a person's notes\n")
    before = snapshot(tmp_path)
    with pytest.raises(DataError) as err:
        report.publish(raw, reports_dir)
    assert str(folder) in str(err.value) and "\n" not in str(err.value)
    assert snapshot(tmp_path) == before


def test_a_latest_that_netbench_did_not_make_is_kept(tmp_path, reports_dir, capsys):
    os.unlink(reports_dir / "latest")
    (reports_dir / "latest").mkdir()
    (reports_dir / "latest" / "mine.txt").write_text("someone's folder\n")
    raw = run_report(tmp_path / "inputs" / "new.json", uuid="bbbbbbbb-2222", started=2000.0,
                     time_start="20261121T110000+0000")
    before = snapshot(tmp_path)
    assert cli.main(["publish", "--reports-dir", str(reports_dir), str(raw)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert str(reports_dir / "latest") in line, line
    assert snapshot(tmp_path) == before


def test_latest_follows_the_order_of_publication_not_the_reports_dates(tmp_path, reports_dir):
    """A run report dated years ahead does not pin `latest`: the session
    published last is the latest, whatever its report says (#23)."""
    future = report.publish(run_report(tmp_path / "inputs" / "future.json",
                                       uuid="ffffffff-9999", started=4102444800.0,
                                       time_start="20991231T235959+0000"), reports_dir)
    assert os.readlink(reports_dir / "latest") == future.name
    now = report.publish(run_report(tmp_path / "inputs" / "now.json", uuid="bbbbbbbb-2222",
                                    started=2000.0, time_start="20261121T110000+0000"),
                         reports_dir)
    assert os.readlink(reports_dir / "latest") == now.name
    index = (reports_dir / "index.html").read_text()
    assert all(f'href="{f.name}/index.html"' in index for f in (future, now))


# ---- concurrent publishes ------------------------------------------------------

PUBLISH = "import sys; from netbench import report; report.publish(sys.argv[1], sys.argv[2])"


def test_concurrent_publishes_list_every_session_and_latest_is_one_of_them(tmp_path):
    for trial in range(3):
        reports_dir = tmp_path / f"reports-{trial}"
        raws = [run_report(tmp_path / "inputs" / f"{trial}-{i}.json", uuid=f"{i + 1:08x}-0000",
                           started=1000.0 + 3600 * i, time_start=f"20261121T{10 + i}0000+0000")
                for i in range(3)]
        # newest first, so that the oldest tends to finish last
        procs = [subprocess.Popen([sys.executable, "-c", PUBLISH, str(raw), str(reports_dir)],
                                  cwd=CHECKOUT, stderr=subprocess.PIPE, text=True)
                 for raw in reversed(raws)]
        for proc in procs:
            assert proc.wait(timeout=300) == 0, proc.stderr.read()
            proc.stderr.close()
        names = [f"20261121T{10 + i}0000-{i + 1:08x}" for i in range(3)]
        index = (reports_dir / "index.html").read_text()
        listed = [n for n in names if f'href="{n}/index.html"' in index]
        assert listed == names, f"trial {trial}: the index lists {listed}"
        # the session whose publisher took the lock last: one of them, whole
        latest = os.readlink(reports_dir / "latest")
        assert latest in names, f"trial {trial}: {latest}"
        assert (reports_dir / "latest" / "index.html").is_file()


# ---- bad input: one line naming the file and key, exit 2 -----------------------

def raw_text(text):
    return lambda path: path.write_bytes(text) if isinstance(text, bytes) \
        else path.write_text(text)


def changed(change):
    return lambda path: run_report(path, change=change)


def perf(entry):
    def change(data):
        data["runs"][0]["testcases"][0]["perfvalues"]["local:node:latency"] = entry
    return change


def curve_bytes(value):
    def change(data):
        data["runs"][0]["testcases"][0]["curve"][0]["bytes"] = value
    return change


def provenance(text):
    def make(path):
        run_report(path)
        (path.parent / "provenance.json").write_text(text)
    return make


CASE = "runs[0].testcases[0]"

#: id: (writes the input at the path it is given, the file named, the key named)
BAD_INPUT = {
    "top-level 5": (raw_text("5"), "r.json", "top level"),
    "session_info 5": (raw_text('{"session_info": 5, "runs": []}'), "r.json", "session_info"),
    "runs [5]": (changed(lambda d: d.update(runs=[5])), "r.json", "runs[0]"),
    "time_start_unix a string": (
        changed(lambda d: d["session_info"].update(time_start_unix="1000")),
        "r.json", "session_info.time_start_unix"),
    "non-UTF-8 bytes": (raw_text(b'{"session_info": "\xff\xfe"}'), "r.json", "UTF-8"),
    "perfvalues entry too short": (changed(perf([0.5, 0.42])), "r.json",
                                   f"{CASE}.perfvalues.local:node:latency"),
    "perfvalues value a string": (changed(perf(["fast", 0.42, None, 1.5, "us", "pass"])),
                                  "r.json", f"{CASE}.perfvalues.local:node:latency[0]"),
    "curve bytes a string": (changed(curve_bytes("1")), "r.json", f"{CASE}.curve[0].bytes"),
    "ping-pong curve without usec": (
        changed(lambda d: d["runs"][0]["testcases"][0]["record"]["series"][0]["rows"][0]
                .pop("usec")),
        "r.json", f"{CASE}.record.series[0].rows[0].usec"),
    "record of a newer version": (
        changed(lambda d: d["runs"][0]["testcases"][0]["record"].update(version=99)),
        "r.json", f"{CASE}.record.version"),
    "record section outside the taxonomy": (
        changed(lambda d: d["runs"][0]["testcases"][0]["record"].update(section="misc")),
        "r.json", f"{CASE}.record.section"),
    "legacy ping-pong curve without usec": (
        changed(lambda d: (d["runs"][0]["testcases"][0].pop("record"),
                           d["runs"][0]["testcases"][0].update(report_section="pingpong"),
                           d["runs"][0]["testcases"][0]["curve"][0].pop("usec"))),
        "r.json", f"{CASE}.curve[0].usec"),
    "provenance.json not JSON": (provenance("{"), "provenance.json", "invalid JSON"),
    "provenance.json mpis a list": (provenance('{"mpis": []}'), "provenance.json", "mpis"),
}


@pytest.mark.parametrize("command", ["report", "publish"])
@pytest.mark.parametrize("make,named,key", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_one_line_naming_file_and_key(tmp_path, capsys, command, make, named,
                                                   key):
    raw = tmp_path / "inputs" / "r.json"
    raw.parent.mkdir()
    make(raw)
    out = tmp_path / "out"                      # what was written before must stay
    out.mkdir()
    (out / "index.html").write_text("an earlier page\n")
    (out / "README.md").write_text("tracked\n")
    before = snapshot(tmp_path)
    argv = ["report", str(raw), "-o", str(out)] if command == "report" \
        else ["publish", "--reports-dir", str(out), str(raw)]
    assert cli.main(argv) == 2
    line = one_line_error(capsys.readouterr().err)
    assert str(raw.parent / named) in line and key in line, line
    assert snapshot(tmp_path) == before


def output_is_a_file(tmp_path):
    (tmp_path / "out").write_text("a file, not a folder\n")
    return tmp_path / "out"


def output_unwritable(tmp_path):
    # sysfs takes no new files, not even from root
    if not os.path.isdir("/sys/kernel"):
        pytest.skip("no /sys/kernel on this machine")
    return Path("/sys/kernel")


BAD_OUTPUT = {
    "a file": output_is_a_file,
    "unwritable": output_unwritable,
    "under a missing parent": lambda tmp_path: tmp_path / "missing" / "out",
}


@pytest.mark.parametrize("make", BAD_OUTPUT.values(), ids=BAD_OUTPUT.keys())
def test_bad_output_folder_is_one_line_naming_it(tmp_path, capsys, make):
    raw = run_report(tmp_path / "inputs" / "r.json")
    out = make(tmp_path)
    before = snapshot(tmp_path)
    assert cli.main(["report", str(raw), "-o", str(out)]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert str(out) in line and "--output" in line, line
    assert snapshot(tmp_path) == before
    assert not (out / "index.html").exists()

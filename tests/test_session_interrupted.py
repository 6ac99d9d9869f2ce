"""A ReFrame session of netbench's configuration stopped part-way (Ctrl-C,
SIGTERM from a batch system or `kill`) says so first: its summary line,
page and JUnit open on "Interrupted: N of M cases ran", never on a pass,
and its run report records the numbers (judgement.session_end).  Found
when a Ctrl-C during a session of the serial policy published "As it
should be: all 10 cases passed" with most of its cases never run: ReFrame
lists only the cases it started."""

import json
import os
import re
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from netbench import paths
from netbench.judgement import session_end
from netbench.report import sessions, verdict
from netbench.rfm import session

CHECK = Path(__file__).parent / "data" / "interrupted" / "one_quick_case.py"
#: how long a case may take to start, from ReFrame's start (its loading)
START_SECONDS = 120


def start_reframe(*args):
    """ReFrame with netbench's configuration on the four cases of
    tests/data/interrupted, as a user runs it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    argv = [str(session.BIN / "reframe"), "-C", str(paths.CONFIG), "-c", str(CHECK),
            "--system", "local", "-p", "^openmpi$", "-r", *args]
    return subprocess.Popen(argv, cwd=paths.REPO, env=clean, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def stop_while_the_second_case_runs(proc, signum):
    """Read ReFrame's output until the quick case passed and the second
    started, then send `signum`; the whole output."""
    seen = ""
    deadline = time.monotonic() + START_SECONDS
    try:
        while not (re.search(r"OK.*index=0", seen) and re.search(r"RUN.*index=1", seen)):
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, seen[-3000:]
            seen += line
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            session.stop_gracefully(proc)
    return seen + out


def published(out):
    """The session folder the run published (its `netbench: HTML report`
    line)."""
    found = re.findall(r"^netbench: HTML report .* \(session (\S+)\)$", out, re.M)
    assert found, out[-3000:]
    return paths.REPORTS / found[-1]


def page_first_line(page):
    section = page[page.index('id="verdict"'):]
    return re.sub(r"<[^>]+>", "", section[section.index("<h2"):section.index("</h2>")]).strip()


@pytest.mark.parametrize("signum, policy, words", [
    (signal.SIGINT, "serial", "Ctrl-C"),
    (signal.SIGTERM, "async", "stopped by SIGTERM")])
def test_a_stopped_session_says_how_many_cases_ran_first(signum, policy, words):
    proc = start_reframe(f"--exec-policy={policy}")
    out = stop_while_the_second_case_runs(proc, signum)
    assert proc.returncode == verdict.EXIT_INTERRUPTED == 130, out[-3000:]
    first = f"Interrupted: 1 of 4 cases ran ({words})"
    # the summary line, the session's last
    last = [line for line in out.splitlines() if line.startswith("netbench: ")][-1]
    assert last.startswith(f"netbench: {first}; "), out[-3000:]
    assert "as it should be" not in out.lower()
    folder = published(out)
    # the record: numbers, not words
    report = json.loads((folder / "run-report.json").read_text())
    assert session_end.from_session_info(report["session_info"]) == {
        "interrupted": True, "stopped_by": signal.Signals(signum).name,
        "cases_planned": 4, "cases_ran": 1}
    # flat, as ReFrame's results database reads a session_info back: it
    # still lists its sessions
    assert report["session_info"]["netbench_cases_ran"] == 1
    listed = subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG),
                             "--list-stored-sessions"], cwd=paths.REPO, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and report["session_info"]["uuid"] in listed.stdout, \
        listed.stdout[-2000:] + listed.stderr[-2000:]
    # the page's first line
    page = (folder / "index.html").read_text()
    assert page_first_line(page).startswith(first), page_first_line(page)
    assert "as it should be" not in page.lower()
    # the index of reports/: the session's row
    index = (paths.REPORTS / "index.html").read_text()
    row = index[index.index(f'href="{folder.name}/index.html"'):]
    assert first in row[:row.index("</tr>")], row[:2000]
    # the JUnit: its first testcase, in error
    suite = ET.parse(folder / "run-report.junit.xml").getroot().find("testsuite")
    case = suite.find("testcase")
    assert case.get("name").startswith(first), ET.tostring(suite)[:2000]
    assert case.find("error").get("message").startswith(first)
    assert int(suite.get("errors")) >= 1
    # the aborted cases are not passes: ReFrame wrote them without a child.
    # (With the serial policy the second case may be in the report, aborted,
    # or not yet: ReFrame says RUN before it counts the case)
    aborted = [tc for tc in report["runs"][0]["testcases"] if tc["result"] == "abort"]
    assert aborted or policy == "serial", report["runs"][0]["testcases"]
    marked = [c.get("name") for c in suite.findall("testcase")
              if c.find("skipped") is not None]
    assert len(marked) == len(aborted), ET.tostring(suite)[:3000]


def test_a_session_that_ran_every_case_records_it():
    proc = start_reframe("--exec-policy=serial", "-S", "sleep=0")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == verdict.EXIT_PASS, out[-3000:]
    folder = published(out)
    report = json.loads((folder / "run-report.json").read_text())
    assert session_end.from_session_info(report["session_info"]) == {
        "interrupted": False, "stopped_by": None, "cases_planned": 4, "cases_ran": 4}
    assert "Interrupted" not in (folder / "index.html").read_text()
    assert "Interrupted" not in (folder / "run-report.junit.xml").read_text()


def case(result, name):
    return {"name": name, "unique_name": name, "system": "local", "partition": "node",
            "environ": "openmpi", "result": result, "fixture": False}


def cut_short(end, *cases):
    info = {"time_start": "20261202T044757+0000", "time_start_unix": 1.0,
            "uuid": "8ca83e19-0000", **session_end.in_session_info(end)}
    return sessions.Session({"session_info": info, "runs": [{"testcases": list(cases)}]},
                            {}, "")


def test_a_session_whose_cases_that_ran_all_passed_is_not_a_pass():
    """The session of the defect: Ctrl-C between two cases of the serial
    policy, ReFrame's report holding the 2 cases it ran, both passed; the
    record says 11 were to run."""
    end = session_end.record(11, 2, "SIGINT")
    found = verdict.overall([cut_short(end, case("pass", "A"), case("pass", "B"))])
    assert found["word"] == "interrupted"
    assert found["text"].startswith("Interrupted: 2 of 11 cases ran (Ctrl-C); of those "
                                    "that ran, none failed"), found["text"]
    assert "as it should be" not in found["text"].lower()


@pytest.mark.parametrize("stop, ran, planned, expected", [
    (None, 4, 4, False), ("time_limit", 4, 4, False), ("time_limit", 3, 4, True),
    ("failure_limit", 1, 4, True), ("SIGINT", 4, 4, True), ("SIGTERM", 0, 4, True),
    (None, 3, 4, True)])
def test_a_session_is_cut_short_by_a_signal_or_cases_not_run(stop, ran, planned, expected):
    assert session_end.cut_short(session_end.record(planned, ran, stop)) is expected


def test_a_record_whose_numbers_are_not_numbers_is_refused(tmp_path):
    from netbench.datafiles import DataError
    report = {"session_info": {"time_start": "20261202T044757+0000", "time_start_unix": 1.0,
                               "uuid": "8ca83e19-0000",
                               "netbench_interrupted": True,
                               "netbench_stopped_by": None,
                               "netbench_cases_planned": "11", "netbench_cases_ran": 2},
              "runs": []}
    path = tmp_path / "run-report.json"
    path.write_text(json.dumps(report))
    with pytest.raises(DataError, match="cases_planned"):
        sessions.load_session(path)


@pytest.mark.parametrize("results, stop, expected", [
    (["pass", "fail", "abort"], "SIGTERM",
     "Interrupted: 2 of 9 cases ran (stopped by SIGTERM); of those that ran, 1 failed (below, "
     "each with its reason); 1 stopped before their end;"),
    (["abort"], "SIGINT", "Interrupted: 0 of 9 cases ran (Ctrl-C); nothing to judge; 1 stopped"),
    (["pass"], "failure_limit",
     "Interrupted: 1 of 9 cases ran (the failure limit (--maxfail) was reached); of those"),
    (["pass"], "time_limit", "Interrupted: 1 of 9 cases ran (the session's time limit "
                             "(--duration) ran out); of those that ran, none failed;")])
def test_what_the_cases_that_ran_showed_follows_the_first_words(results, stop, expected):
    cases = [case(result, f"C{i}") for i, result in enumerate(results)]
    ran = sum(1 for r in results if r != "abort")
    found = verdict.overall([cut_short(session_end.record(9, ran, stop), *cases)])
    assert found["text"].startswith(expected), found["text"]

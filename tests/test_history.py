"""History in ReFrame's results database (#25): every session is stored
there (rfm/config.py's `storage`), ReFrame's own commands read it, the report's
trends and `netbench compare` read the same store, and a JUnit XML sits
beside each run report.  Two real, short sessions of one case."""

import os
import re
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from netbench import cli, paths
from netbench.datafiles import DataError
from netbench.report import findings, page, store
from netbench.rfm import session

publish = sys.modules["netbench.report.publish"]     # the module, not the function

SELECTION = ("-n", "^PingPong%variant=blocking%transport=shm%placement=intranode",
             "-p", "^openmpi$", "-S", "budget=0.01", "-S", "max_bytes=65536")
RECORDED = Path(__file__).parent / "data" / "compare" / "pingpong-shm-openmpi.json"
STORED = re.compile(r"^Current session stored with UUID: (\S+)$", re.M)


@pytest.fixture(scope="module")
def uuids():
    """The uuids of two sessions run one after the other."""
    found = []
    for _ in range(2):
        proc = session.run_reframe("local", *SELECTION, timeout=900)
        out = proc.stdout + proc.stderr
        assert proc.returncode in session.NO_FAILURE, out[-3000:]
        assert "results database:  [on]" in proc.stdout, out[-3000:]
        found.append(STORED.search(proc.stdout).group(1))
    return found


def reframe(*args):
    """ReFrame with netbench's configuration, as a user runs it."""
    return subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG), *args],
                          cwd=paths.REPO, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items()
                               if not k.startswith(session.DROPPED)})


def test_reframe_lists_and_compares_the_stored_sessions(uuids):
    proc = reframe("--list-stored-sessions")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for uuid in uuids:
        assert uuid in proc.stdout
    proc = reframe(f"--performance-compare={uuids[0]}/{uuids[1]}/mean:/")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "latency" in proc.stdout and "PingPong" in proc.stdout


def test_a_junit_xml_sits_beside_each_run_report(uuids):
    for uuid in uuids:
        (raw,) = store._query(paths.RESULTS_DB,
                              "SELECT report_file FROM sessions WHERE uuid = ?", (uuid,))[0]
        junit = publish.junit_beside(raw)
        published = (paths.REPORTS / store.stored_session(uuid).name /
                     "run-report.junit.xml")
        assert published.read_text() == junit.read_text()
        cases = [tc.get("name") for tc in ET.parse(junit).getroot().iter("testcase")]
        assert any(name.startswith("PingPong %variant=blocking %transport=shm")
                   for name in cases), cases


def test_the_findings_are_judged_at_the_end_of_each_session_and_published(uuids):
    """At exit, in ReFrame's process, beside the run report (#24)."""
    for uuid in uuids:
        (raw,) = store._query(paths.RESULTS_DB,
                              "SELECT report_file FROM sessions WHERE uuid = ?", (uuid,))[0]
        stored = findings.stored_beside(raw)
        judged = findings.load_stored(stored)
        assert judged.when == findings.AT_RUN
        assert [f.claim.key for f in judged.findings] == [c.key for c in findings.load_claims()]
        published = paths.REPORTS / store.stored_session(uuid).name
        assert (published / "run-report.findings.json").read_text() == stored.read_text()
        assert "predates run-time findings" not in (published / "index.html").read_text()


def test_the_trend_reads_the_store(uuids, tmp_path):
    first, second = (store.stored_session(u) for u in uuids)
    earlier = publish.history_sessions(second)
    assert first.uuid in [s.uuid for s in earlier]
    assert second.uuid not in [s.uuid for s in earlier]
    history = page.history_for(second, earlier)
    key = next(k for k in history if k.startswith("PingPong %variant=blocking %transport=shm")
               and "| openmpi |" in k and k.endswith("| latency"))
    latency = [r["value"] for tc in first.testcases for r in page.case_rows(tc)
               if r["key"] == key]
    assert latency and latency[0] in history[key]["values"][:-1]
    assert 'class="spark"' in (paths.REPORTS / second.name / "index.html").read_text()
    # `netbench report` of one session draws the same trend
    assert cli.main(["report", str(paths.REPORTS / second.name / "run-report.json"),
                     "-o", str(tmp_path / "redrawn")]) == 0
    assert 'class="spark"' in (tmp_path / "redrawn" / "index.html").read_text()
    # reports/ holds both sessions, yet an empty store is no history
    assert publish.history_sessions(second, tmp_path / "results.db") == []


def test_compare_finds_sessions_in_the_store_and_in_reports(uuids, tmp_path, capsys):
    second = store.stored_session(uuids[1])
    # two real sessions on a busy host: a size may differ beyond the noise
    # (exit 1, a loss shown) or not (0)
    assert cli.main(["compare", uuids[0][:8], second.name, "-o", str(tmp_path / "ab")]) in (0, 1)
    out = capsys.readouterr().out
    assert f"-{uuids[0][:8]}  ->  B {second.name}" in out
    assert "PingPong %variant=blocking %transport=shm %placement=intranode | openmpi" in out
    assert (tmp_path / "ab" / "index.html").exists()

    assert cli.main(["compare", uuids[0], uuids[0], "--all", "-o", str(tmp_path / "aa")]) == 0
    lines = capsys.readouterr().out.splitlines()
    calls = [line.rsplit("  ", 1)[-1] for line in lines if " us" in line or "bit/s" in line]
    assert "within noise" in calls
    assert set(calls) <= {"within noise", "same"}, calls


def test_a_database_of_another_schema_is_refused(tmp_path):
    db = tmp_path / "results.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE metadata(schema_version TEXT)")
        conn.execute("INSERT INTO metadata VALUES('9.9')")
    with pytest.raises(DataError) as err:
        store.stored_sessions(db)
    assert str(db) in str(err.value) and "schema_version" in str(err.value)


def test_a_database_netbench_cannot_read_costs_only_the_trends(tmp_path, capsys):
    db = tmp_path / "results.db"
    db.write_text("not a database\n")
    raw = tmp_path / "run-report.json"
    raw.write_text((RECORDED).read_text())
    folder = publish.publish(raw, tmp_path / "reports", results_db=db)
    assert (folder / "index.html").exists()
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("netbench: no trends on the page: ") and str(db) in line

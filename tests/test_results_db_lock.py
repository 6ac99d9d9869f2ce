"""ReFrame's results database held by a writer (issue 35): a ReFrame
session storing its results holds the file lock `.db.lock` and an
exclusive sqlite transaction; a stopped one holds them for ever.
`netbench compare` and `netbench publish` wait a bounded time, then say so
in one line naming the database; publish writes its page all the same.
The lock is held for real, by another process, as ReFrame holds it."""

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netbench.report import store

publish = sys.modules["netbench.report.publish"]     # the module, not the function

RECORDED = Path(__file__).parent / "data" / "compare" / "pingpong-shm-openmpi.json"
#: what ReFrame's storage (4.10, schema 1.0) holds that netbench reads
SCHEMA = ("CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, "
          "session_end_unix REAL, json_blob TEXT, report_file TEXT)",
          "CREATE TABLE testcases(name TEXT, system TEXT, partition TEXT, environ TEXT, "
          "job_completion_time_unix REAL, session_uuid TEXT, uuid TEXT)",
          "CREATE TABLE metadata(schema_version TEXT)")
#: holds the lock as ReFrame's storage does (reframe.frontend.reporting.
#: storage._db_write: the file lock, then a transaction), until killed
HOLDER = """
import os, sqlite3, sys, time
from reframe.utility.osext import ReadWriteFileLock
db, how = sys.argv[1], sys.argv[2]
lock = ReadWriteFileLock(os.path.join(os.path.dirname(db), ".db.lock"))
if how in ("file lock", "both"):
    lock.acquire_write_lock()
if how in ("sqlite", "both"):
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""
#: the wait the in-process tests give a read (the lock is real; only the
#: wait is shorter than LOCK_WAIT_SECONDS, to keep the tests short)
WAIT = 2.0


def results_db(folder):
    """A results database holding the recorded session, as ReFrame stores it."""
    report = json.loads(RECORDED.read_text())
    info = report["session_info"]
    db = folder / "results.db"
    with sqlite3.connect(db) as conn:
        for sql in SCHEMA:
            conn.execute(sql)
        conn.execute("INSERT INTO metadata VALUES (?)", (store.SCHEMA_VERSION,))
        conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
                     (info["uuid"], info["time_start_unix"], info["time_start_unix"] + 60,
                      json.dumps(report), str(RECORDED)))
        for tc in report["runs"][0]["testcases"]:
            conn.execute("INSERT INTO testcases VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (tc["name"], tc["system"], tc["partition"], tc["environ"],
                          info["time_start_unix"], info["uuid"], None))
    conn.close()
    return db, info["uuid"]


def hold(db, how, seconds=120):
    """Another process holding `db`'s write lock (`how`: its file lock,
    sqlite's exclusive transaction, or both), once it has it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), how, str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def release(holder):
    holder.kill()
    holder.wait()


@pytest.fixture
def short_wait(monkeypatch):
    monkeypatch.setattr(store, "LOCK_WAIT_SECONDS", WAIT)


@pytest.mark.parametrize("how", ["file lock", "sqlite", "both"])
def test_a_held_database_is_waited_for_a_bounded_time(tmp_path, short_wait, how):
    db, uuid = results_db(tmp_path)
    holder = hold(db, how)
    try:
        started = time.monotonic()
        with pytest.raises(store.DatabaseLocked) as err:
            store.stored_session(uuid[:8], db)
        waited = time.monotonic() - started
    finally:
        release(holder)
    assert WAIT - 0.5 <= waited < WAIT + 3
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{db}: locked by another process")
    # freed: read at once
    assert store.stored_session(uuid[:8], db).uuid == uuid


def test_a_lock_freed_within_the_wait_is_waited_for(tmp_path, short_wait):
    db, uuid = results_db(tmp_path)
    holder = hold(db, "both", seconds=WAIT / 4)
    try:
        assert store.stored_session(uuid[:8], db).uuid == uuid
    finally:
        release(holder)


def test_publish_writes_the_page_while_the_database_is_held(tmp_path, short_wait, capsys):
    db, _ = results_db(tmp_path)
    raw = tmp_path / "run-report.json"
    raw.write_text(RECORDED.read_text())
    holder = hold(db, "both")
    try:
        started = time.monotonic()
        folder = publish.publish(raw, tmp_path / "reports", results_db=db)
        took = time.monotonic() - started
    finally:
        release(holder)
    assert (folder / "index.html").is_file()
    assert took < WAIT + 30
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"netbench: no trends on the page: {db}: locked by another process "
                    f"(a ReFrame session storing its results) for more than {WAIT:g} s: "
                    f"not read")


def test_compare_stops_with_one_line_while_the_database_is_held(tmp_path):
    """The command as a user runs it, with the wait it has, in a home of its
    own (NETBENCH_HOME) whose results database another process holds."""
    (tmp_path / ".reframe").mkdir()
    db, _ = results_db(tmp_path / ".reframe")
    holder = hold(db, "both")
    try:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "netbench.cli", "compare", "0123abcd",
                               "4567abcd"], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "NETBENCH_HOME": str(tmp_path)},
                              timeout=store.LOCK_WAIT_SECONDS + 60)
        took = time.monotonic() - started
    finally:
        release(holder)
    assert proc.returncode == 2, proc.stderr
    assert took < store.LOCK_WAIT_SECONDS + 15
    assert proc.stderr.splitlines() == [
        f"netbench: {db}: locked by another process (a ReFrame session storing "
        f"its results) for more than {store.LOCK_WAIT_SECONDS:g} s: not read"]

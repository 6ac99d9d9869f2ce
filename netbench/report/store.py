"""ReFrame's results database, read by netbench: the sessions ReFrame
stored (rfm/config.py's `storage`, paths.RESULTS_DB), as the report's
Sessions.  netbench keeps no store of its own: the report's history and
`netbench compare` read this one, the one `reframe --list-stored-sessions`
and `--performance-compare` read.

ReFrame (4.10, reframe/frontend/reporting/storage.py, schema 1.0) keeps
every session's whole run report in `sessions.json_blob`, and one row per
test case in `testcases` (name, system, partition, environ, session_uuid).
Its Python API needs ReFrame's runtime and configuration; netbench reads the
file with sqlite3, read-only, under ReFrame's own read lock (`.db.lock`
beside the file), and validates each run report as it validates a file
(sessions.load_session).  A missing database is an empty history: nothing
is created.

A ReFrame session storing its results holds the write lock (the file lock,
then an exclusive sqlite transaction); a stopped or hung one holds it for
ever.  netbench waits for it at most LOCK_WAIT_SECONDS, then gives up with
DatabaseLocked, one line naming the database: `netbench compare` stops
(exit 2), publish writes its page without the trends and says so.
"""

import contextlib
import json
import os
import re
import sqlite3
import time
from pathlib import Path

from .. import datafiles, paths
from ..datafiles import DataError
from .sessions import RUN_REPORT_SCHEMA, Session, check_records, session_folder_name

#: the schema of ReFrame's database that netbench reads
SCHEMA_VERSION = "1.0"
#: the sessions a headline figure's trend goes back over
HISTORY_SESSIONS = 20
UUID_PREFIX = re.compile(r"[0-9a-fA-F][0-9a-fA-F-]{3,35}")
#: how long a read waits for ReFrame's write lock on the database, both its
#: file lock and sqlite's, in all: storing a session takes well under a
#: second, so a longer hold is a session stopped or hung while it stores
LOCK_WAIT_SECONDS = 10.0


class DatabaseLocked(DataError):
    """The results database stayed locked longer than LOCK_WAIT_SECONDS."""

    def __init__(self, db, waited):
        super().__init__(db, None, f"locked by another process (a ReFrame session storing "
                                   f"its results) for more than {waited:g} s: not read")


@contextlib.contextmanager
def _read(db):
    """A read-only connection to `db` under ReFrame's read lock, each
    waited for within LOCK_WAIT_SECONDS in all (DatabaseLocked)."""
    from reframe.utility.osext import ReadWriteFileLock

    wait = LOCK_WAIT_SECONDS
    deadline = time.monotonic() + wait
    lock = ReadWriteFileLock(os.path.join(os.path.dirname(db), ".db.lock"))
    if not lock.acquire_read_lock(timeout=wait):
        raise DatabaseLocked(db, wait)
    try:
        # sqlite's own wait for a writer's exclusive transaction: the rest
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True,
                               timeout=max(0.0, deadline - time.monotonic()))
        try:
            yield conn
        except sqlite3.OperationalError as err:
            if err.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise DatabaseLocked(db, wait) from err
            raise
        finally:
            conn.close()
    finally:
        lock.release_read_lock()


def _query(db, sql, params=()):
    """Rows of `sql` on `db`; [] when there is no database yet; DataError
    naming the file when it is not ReFrame's, or of another schema."""
    db = Path(db)
    if not db.is_file():
        return []
    try:
        with _read(db) as conn:
            version = conn.execute("SELECT schema_version FROM metadata").fetchall()
            if version and version[0][0] != SCHEMA_VERSION:
                raise DataError(db, "metadata.schema_version",
                                f"expected ReFrame's results database schema "
                                f"{SCHEMA_VERSION}, got {version[0][0]!r}")
            return conn.execute(sql, params).fetchall()
    except sqlite3.Error as err:
        raise DataError(db, None, f"not ReFrame's results database: {err}") from err


def _session(db, uuid, blob):
    """The stored run report `blob` as a Session; DataError naming the
    database and the session's uuid when it is not a run report netbench
    reads."""
    where = f"{db}#{uuid}"
    try:
        report = json.loads(blob)
    except ValueError as err:
        raise DataError(where, None, f"not JSON: {err}") from err
    datafiles.validate(report, RUN_REPORT_SCHEMA, where)
    session_folder_name(report["session_info"], where)
    check_records(report, where)
    return Session(report, {}, where)


def stored_sessions(db=paths.RESULTS_DB, systems=None, before=None,
                    limit=HISTORY_SESSIONS):
    """The newest `limit` sessions in the store that ran a case on one of
    `systems` and started before the time `before` (both optional), oldest
    first.  A stored session that does not validate is no one's history: it
    is left out."""
    sql, params = "SELECT uuid, json_blob FROM sessions", []
    conditions = []
    if before is not None:
        conditions.append("session_start_unix < ?")
        params.append(before)
    if systems:
        conditions.append("uuid IN (SELECT DISTINCT session_uuid FROM testcases "
                          f"WHERE system IN ({', '.join('?' * len(systems))}))")
        params.extend(systems)
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    sql += " ORDER BY session_start_unix DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    found = []
    for uuid, blob in _query(db, sql, params):
        with contextlib.suppress(DataError):
            found.append(_session(db, uuid, blob))
    return sorted(found, key=lambda s: (s.started, s.name))


def stored_uuids(prefix, db=paths.RESULTS_DB):
    """The uuids of the stored sessions that start with `prefix`."""
    if not UUID_PREFIX.fullmatch(prefix):
        return []
    rows = _query(db, "SELECT uuid FROM sessions WHERE uuid LIKE ? ORDER BY "
                      "session_start_unix", (prefix.lower() + "%",))
    return [uuid for (uuid,) in rows]


def stored_session(prefix, db=paths.RESULTS_DB):
    """The stored session whose uuid is or starts with `prefix`; DataError
    when none or several do, or when it does not validate."""
    uuids = stored_uuids(prefix, db)
    if len(uuids) != 1:
        raise DataError(db, prefix, "no stored session has this uuid" if not uuids else
                        f"{len(uuids)} stored sessions start with it: "
                        f"{', '.join(u[:13] for u in uuids[:4])}")
    (blob,) = _query(db, "SELECT json_blob FROM sessions WHERE uuid = ?", (uuids[0],))[0]
    return _session(db, uuids[0], blob)


def find_session(what, reports_dir=paths.REPORTS, db=paths.RESULTS_DB):
    """The session `what` names: a run report's path (or a folder holding
    run-report.json), a session folder of reports/ (`20261124T003610-3ac920b6`,
    `latest`), or a stored session's uuid or its first 8 or more hex
    digits; DataError saying which of them it is not."""
    from .sessions import SESSION_NAME, load_session

    path = Path(what)
    if path.is_dir() and (path / "run-report.json").is_file():
        return load_session(path / "run-report.json")
    if path.is_file():
        return load_session(path)
    if SESSION_NAME.fullmatch(what) or what == "latest":
        published = Path(reports_dir) / what / "run-report.json"
        if published.is_file():
            return load_session(published)
        # a session folder's name ends with the first 8 hex digits of its uuid
        what = what.rsplit("-", 1)[-1] if what != "latest" else what
    if UUID_PREFIX.fullmatch(what) and len(what) >= 8:
        return stored_session(what, db)
    raise DataError(what, None, f"not a run report, a session of {reports_dir} nor a "
                                f"session stored in {db} (a uuid, or its first 8 digits)")

"""Publishing sessions under reports/.

A session folder `reports/YYYYMMDDTHHMMSS-<8 hex of the uuid>/` holds
`run-report.json` (ReFrame's), `provenance.json` (this machine at the end of
the session), `run-report.findings.json` (the sources' findings, judged at
the end of the run: findings.py) and `index.html` (verdicts, curves, fits,
provenance, history).  `reports/latest` points at the session published
last; `reports/index.html` lists every session folder on disk.  A page's
history (the trend of each headline figure) reads ReFrame's results
database (store.py), not reports/.  Every file is written to a temporary
name and renamed into place, so a reader never sees half a page.

netbench runs as root on shared machines, so folder names are built from
parsed values, never taken from input, and nothing is removed that netbench
did not write (no recursive deletes).  Publishers of one reports/ take
turns on reports/.lock.
"""

import atexit
import contextlib
import fcntl
import glob
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import paths
from ..safefile import atomic_write
from ..datafiles import DataError
from ..fleet import drain
from ..results import suspects as fleet_suspects
from . import findings, page, store, sweep
from .provenance import collect_provenance
from .sessions import (PUBLISHED_AS, SUMMARY_FILE, load_session, next_publication_number,
                       published_sessions, summary_text)

#: where ReFrame writes its run reports (rfm/config.py's `report_file`)
RAW_REPORTS = paths.STATE / "reports"

#: the files netbench writes into a session folder: all it ever removes there
SESSION_FILES = ("run-report.json", "provenance.json", "index.html",
                 # ReFrame's JUnit XML of the session (junit_beside)
                 "run-report.junit.xml",
                 # the sources' findings as judged at the end of the run
                 # (findings.stored_beside)
                 "run-report.findings.json",
                 # a session that swept a fabric (LinkSweep): what it named
                 "suspects.json", "drain.sh",
                 # its place in the order of publication (sessions.PUBLISHED_AS)
                 "published",
                 # what the index reads of it (sessions.SUMMARY_FILE)
                 "summary.json")


@contextlib.contextmanager
def reports_lock(reports_dir):
    """Publishers of one reports/ take turns (flock on reports/.lock, which
    works on NFS too).  The file stays: unlinking it would let the next two
    publishers lock two different files."""
    fd = os.open(Path(reports_dir) / ".lock",
                 os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)            # releases the lock


def own_session_folder(folder):
    """True for a real folder holding a run report and nothing but files
    netbench writes into a session: one netbench may replace."""
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        return False
    with os.scandir(folder) as entries:
        files = {e.name: e.is_file(follow_symlinks=False) for e in entries}
    return files.get("run-report.json", False) and all(
        is_file and name in SESSION_FILES for name, is_file in files.items())


def remove_session_files(folder):
    """Remove netbench's files from `folder`, then the folder, which fails
    (and stays) if anything else is in it: never a recursive delete."""
    for name in SESSION_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(Path(folder) / name)
    os.rmdir(folder)


def sweep_files(session):
    """{file name: text} of a session that swept a fabric: suspects.json
    (every sweep and what it named) and drain.sh (one commented scontrol
    line per suspect node, for the engineer to review; netbench never runs
    it); {} for any other session."""
    found = sweep.session_suspects(session)
    if found is None:
        return {}
    suspects = [fleet_suspects.suspect_from_json(s) for sw in found["sweeps"] for s in sw["suspects"]]
    # the records' suspects are validated (results.record): strict JSON
    return {"suspects.json": fleet_suspects.strict_json(found),
            "drain.sh": drain.drain_script(suspects)}


def junit_beside(run_report):
    """The JUnit XML beside a run report: `run-report-7.json` ->
    `run-report-7.junit.xml`."""
    run_report = Path(run_report)
    return run_report.with_name(run_report.name.removesuffix(".json") + ".junit.xml")


def stage_session(reports_dir, raw_report, session, html, extra=None):
    """The session's files in a new hidden folder of reports/, ready to be
    renamed into place; `session`: `raw_report` as load_session read it,
    whose report the summary is made of (no second parse of a run report
    that can be tens of MB); `extra`: more of SESSION_FILES, {name: text}."""
    staging = Path(tempfile.mkdtemp(dir=reports_dir, prefix=".session-"))
    try:
        shutil.copyfile(raw_report, staging / "run-report.json")
        (staging / SUMMARY_FILE).write_text(summary_text(staging / "run-report.json",
                                                         session.report))
        junit = junit_beside(raw_report)
        if junit.is_file() and not junit.is_symlink():
            shutil.copyfile(junit, staging / "run-report.junit.xml")
        (staging / "provenance.json").write_text(json.dumps(session.provenance, indent=2))
        (staging / "index.html").write_text(html)
        for name, text in (extra or {}).items():
            assert name in SESSION_FILES, name
            (staging / name).write_text(text)
        os.chmod(staging, 0o755)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_session_files(staging)
        raise
    return staging


def place_session(reports_dir, staging, name):
    """Rename `staging` to reports/<name>.  An earlier publication of the
    same session there is replaced if netbench wrote it (own_session_folder);
    anything else of that name is refused and kept.  Under reports_lock."""
    final = Path(reports_dir) / name
    (staging / PUBLISHED_AS).write_text(f"{next_publication_number(reports_dir)}\n")
    replaced = None
    if os.path.lexists(final):
        if not own_session_folder(final):
            raise DataError(final, None, "exists and holds more than the files netbench "
                                         "writes into a session: not replaced")
        replaced = Path(reports_dir) / f".replaced-{name}-{secrets.token_hex(4)}"
        os.rename(final, replaced)
    try:
        os.rename(staging, final)
    except BaseException:
        if replaced:
            os.rename(replaced, final)
        raise
    if replaced:
        remove_session_files(replaced)
    return final


def check_latest(link):
    """`reports/latest` is netbench's symlink, or a copy of a session from an
    older netbench (own_session_folder); anything else is not replaced."""
    if os.path.lexists(link) and not link.is_symlink() and not own_session_folder(link):
        raise DataError(link, None, "exists and is not the symlink netbench keeps there: "
                                    "not replaced (move it away)")


def point_latest(reports_dir, target):
    """Swap `reports/latest` to the session folder `target` in one rename."""
    link = Path(reports_dir) / "latest"
    check_latest(link)
    if os.path.lexists(link) and not link.is_symlink():
        remove_session_files(link)           # an older netbench's copy
    tmp = Path(reports_dir) / f".latest.{os.getpid()}.{secrets.token_hex(4)}"
    tmp.symlink_to(target)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink()
        raise


def update_index_and_latest(reports_dir, published):
    """The index lists the session folders on disk, and `latest` points at
    `published`, the session just placed: `latest` follows the order in
    which sessions were published (publishers take turns on the lock),
    never a date read from a run report, which anyone can set years
    ahead.  Under reports_lock."""
    point_latest(reports_dir, published)
    atomic_write(Path(reports_dir) / "index.html",
                 page.render_index(published_sessions(reports_dir, summary=True)))


def history_sessions(session, results_db=paths.RESULTS_DB):
    """The sessions a session's trends go back over: those ReFrame stored
    before it on its systems (store.stored_sessions).  A database netbench
    cannot read costs the page its trends, said in one line, not the page."""
    try:
        return store.stored_sessions(results_db, systems=session.systems,
                                     before=session.started)
    except DataError as err:
        print(f"netbench: no trends on the page: {err}", file=sys.stderr)
        return []


def publish(raw_report, reports_dir=paths.REPORTS, results_db=paths.RESULTS_DB,
            references=paths.REFERENCES):
    """Make `raw_report` a published session: reports/<name>/ with the run
    report, provenance and page, then the index and `latest`.  Returns the
    session folder.

    <name> is `YYYYMMDDTHHMMSS-<8 hex>`, built from the parsed start time
    and uuid; a report that does not validate is refused (DataError, one
    line) before anything is written.  The page's trends read ReFrame's
    results database `results_db` (history_sessions).

    The sources' findings stored beside the run report (judged at the end
    of its run) are copied with it and shown; a run report from before
    run-time findings is judged once, here, by `references`' findings.yaml,
    and the page says so.

    The same session published again replaces its folder, but only one
    netbench wrote: a real folder holding run-report.json and nothing but
    run-report.json, provenance.json and index.html.  Anything else of that
    name, or a `latest` that is not netbench's symlink, is refused with one
    line and nothing changes.  Apart from that replaced folder and the
    `latest` symlink, publish removes only its own temporary files.

    Concurrent publishers take turns (reports/.lock) from the rename on:
    the index lists the session folders on disk, and `latest` points at the
    session published last (not the one whose report claims the latest
    start).
    """
    reports_dir = Path(reports_dir)
    session = load_session(raw_report)
    name = session.name
    try:
        reports_dir.mkdir(exist_ok=True)        # its parent must exist: no tree from a typo
        session.provenance = collect_provenance(session.report)
        if session.findings is None:
            session.findings = findings.judge_session(session, findings.AT_PUBLISH, references)
        # the page is drawn outside the lock: matplotlib takes seconds
        html = page.render_report([session], history_sessions(session, results_db))
        staging = stage_session(reports_dir, raw_report, session, html,
                                {**sweep_files(session),
                                 "run-report.findings.json": findings.dumps(session.findings)})
        try:
            with reports_lock(reports_dir):
                check_latest(reports_dir / "latest")
                final = place_session(reports_dir, staging, name)
                staging = None
                update_index_and_latest(reports_dir, name)
        finally:
            if staging is not None:
                with contextlib.suppress(OSError):
                    remove_session_files(staging)
    except OSError as err:
        raise DataError(err.filename or reports_dir, None,
                        f"cannot publish {name}: {err.strerror}") from err
    return final


def check_output_folder(outdir):
    """`-o DIR` is an existing folder, or a new one in an existing folder:
    a typo makes no tree of folders."""
    if outdir.is_dir():
        return
    if os.path.lexists(outdir):
        raise DataError(outdir, "--output", "exists and is not a folder")
    if not outdir.parent.is_dir():
        raise DataError(outdir, "--output", f"no folder {outdir.parent} to create it in")


def write_report(run_reports, outdir, results_db=paths.RESULTS_DB):
    """`netbench report`: one session's page (its trends from ReFrame's
    results database), or a comparison of several, as DIR/index.html.  An
    empty DIR is refused: Path('') is the current folder, which the user did
    not name."""
    if not str(outdir).strip():
        raise DataError(repr(str(outdir)), "--output", "empty: name the folder to write into")
    sessions = sorted((load_session(p) for p in run_reports), key=lambda s: s.started)
    outdir = Path(outdir)
    check_output_folder(outdir)
    earlier = history_sessions(sessions[0], results_db) if len(sessions) == 1 else []
    html = page.render_report(sessions, earlier)
    created = False
    try:
        if not outdir.is_dir():
            outdir.mkdir()
            created = True
        atomic_write(outdir / "index.html", html)
    except BaseException as err:     # Ctrl-C, SIGTERM too: the folder made goes
        if created:
            with contextlib.suppress(OSError):
                outdir.rmdir()
        if isinstance(err, OSError):
            raise DataError(outdir, "--output", f"cannot write: {err.strerror}") from err
        raise
    return outdir / "index.html"


# ---- after every ReFrame session -------------------------------------------

def place_junit_beside(run_report, start, pid=None):
    """Rename the JUnit XML this ReFrame process wrote (rfm/config.py's
    `report_junit`, named by process) beside its run report
    (junit_beside), so each session keeps its own."""
    junit = paths.junit_file(pid)
    with contextlib.suppress(FileNotFoundError):
        if os.path.getmtime(junit) >= start:
            os.replace(junit, junit_beside(run_report))


def judge_findings_beside(run_report, references=paths.REFERENCES):
    """Judge the sources' findings on the session's run report, in the
    session's own process, and store them beside it (findings.stored_beside):
    what `publish` copies and the page shows, whenever it is drawn.  A
    failure is said loudly; the session is then judged when published."""
    try:
        session = load_session(run_report)
        judged = findings.judge_session(session, findings.AT_RUN, references)
        atomic_write(findings.stored_beside(run_report), findings.dumps(judged))
    except (DataError, OSError, ValueError) as err:
        print(f"netbench: ERROR: the findings were not judged: {err}", file=sys.stderr)


def publish_after_session():
    """Publish the session's report when the ReFrame process exits (ReFrame
    has no post-session hook; its run report is written just before exit).
    Called by reframe_checks/settings.py, so a plain `reframe -c
    reframe_checks -r` updates the reports too; once per interpreter (the
    configuration may be loaded twice)."""
    start = time.time()
    if getattr(publish_after_session, "registered", False):
        return
    publish_after_session.registered = True
    atexit.register(_after_session, start)


def _after_session(start):
    fresh = [p for p in glob.glob(str(RAW_REPORTS / "run-report-*.json"))
             if os.path.getmtime(p) >= start]
    if not fresh:
        return            # listing, --show-config: nothing ran
    run_report = max(fresh, key=os.path.getmtime)
    place_junit_beside(run_report, start)
    if "--dry-run" in sys.argv:
        return            # nothing ran: no session to publish
    judge_findings_beside(run_report)
    # a fresh interpreter: ReFrame's, at exit, is half torn down.  Started
    # in this checkout, so that it publishes with this netbench, whichever
    # folder ReFrame ran in and whichever netbench the venv installed
    proc = subprocess.run([sys.executable, "-m", "netbench.cli", "publish",
                           run_report], capture_output=True, text=True,
                          cwd=paths.REPO)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:   # the run's own exit code stands; say why loudly
        detail = proc.stderr.strip().splitlines()
        print(f"netbench: ERROR: the HTML report was not written: "
              f"{detail[-1] if detail else proc.returncode}", file=sys.stderr)

"""`netbench baseline accept|show`: learned baselines from published
sessions (netbench/judgement/baseline/ builds and checks them).

Accept reads one session at a time and keeps only what a baseline needs
of it (baseline.Accepted), so three 10,000-case sessions cost one
session's memory.  It is all or nothing per system:partition, and says for
each what it accepted or why it skipped it."""

import dataclasses
import json
from pathlib import Path

from .. import datafiles, paths
from ..datafiles import DataError
from ..judgement import baseline
from ..judgement import knobs as judging_knobs
from ..textsafe import printable
from .sessions import RUN_REPORT_SCHEMA, Session, provenance_beside, published_folders


@dataclasses.dataclass
class Outcome:
    """What accept did with a system:partition (or a session it skipped)."""
    #: the system:partition, or None for a skipped session
    partition: object
    #: the baseline file written, or None: skipped
    path: object
    words: str

    def line(self):
        what = f"{self.partition}: " if self.partition else ""
        return printable(f"{what}{self.words}")


def named_path(name, reports_dir=paths.REPORTS):
    """The run report of a session named by its folder under reports/, or
    a run report's path."""
    path = Path(name)
    if path.is_file():
        return path
    folder = Path(reports_dir) / name
    if not (folder / "run-report.json").is_file():
        raise DataError(folder, None, "no such published session (netbench publish writes "
                                      "reports/<session>/run-report.json)")
    return folder / "run-report.json"


#: what accept reads of a run report beyond its cases (accepted_runs checks
#: what it reads of those): sessions.RUN_REPORT_SCHEMA's session_info
ACCEPT_SCHEMA = {"type": "object", "required": ["session_info", "runs"], "properties": {
    "session_info": RUN_REPORT_SCHEMA["properties"]["session_info"],
    "runs": {"type": "array", "items": {"type": "object", "properties": {
        "testcases": {"type": "array"}}}}}}


def series_names(obj):
    """json's object_hook: a record's series (name, x, y, rows) as its name
    alone, the one thing of it a baseline reads (the launches it reads are
    the record's runs): a 10,000-case session's curves are a fifth of what
    it takes parsed, and need not be held at once."""
    if "rows" in obj and "x" in obj and "y" in obj and "name" in obj:
        return {"name": obj["name"]}
    return obj


def parsed(run_report):
    """The JSON of a run report as accept reads it (series_names), or
    DataError naming it."""
    text = datafiles.read_bytes(run_report, "run-report")
    try:
        text = text.decode("utf-8")
        return json.loads(text, object_hook=series_names)
    except (ValueError, RecursionError) as err:     # UnicodeDecodeError is a ValueError
        raise DataError(run_report, None, f"not a run report (UTF-8 JSON nested less than "
                                          f"thousands deep): {err}") from err


def read_accepted(run_report):
    """(its session's name and uuid, baseline.Accepted) of a run report,
    checked where it is read: its session_info, the provenance.json beside
    it, and what accepted_runs reads of its cases.  Not the rest (a
    10,000-case session's records take longer to check whole than all of
    accept, and accept reads a few keys of each); nor is the rest kept."""
    report = datafiles.validate(parsed(run_report), ACCEPT_SCHEMA, run_report)
    session = Session(report, provenance_beside(run_report), str(run_report))
    return session.name, session.uuid, baseline.accepted_runs(session)


def same_session(name, uuid, accepted, seen):
    """The name of a session in `seen` ({uuid: (name, fingerprint)}) that
    `name` copies: the same uuid, or the same measurements under another
    session_info; None when it is a session of its own."""
    for other_uuid, (other, fingerprint) in seen.items():
        if other_uuid == uuid or fingerprint == accepted.fingerprint:
            return other
    return None


def named_sessions(names, reports_dir):
    """[(name, Accepted)] of the sessions named; DataError for one that does
    not load or that repeats another (the same session given twice, or a
    copy of its run report): a baseline's runs are distinct runs."""
    found, seen = [], {}
    for given in names:
        path = named_path(given, reports_dir)
        name, uuid, accepted = read_accepted(path)
        other = same_session(name, uuid, accepted, seen)
        if other:
            raise DataError(path, None, f"the same session as {other} (same uuid or the same "
                                        f"measurements): a baseline takes distinct runs")
        seen[uuid] = (name, accepted.fingerprint)
        found.append((name, accepted))
    return found


def published(reports_dir, notes):
    """[(name, Accepted)] of the sessions published under `reports_dir`, in
    the order they were published (sessions.published_folders).  A folder
    that does not load, or whose run report names another folder, is no
    session; a copy of a session published later is left for that one:
    each said in `notes` (Outcome)."""
    found, seen = [], {}
    for folder in reversed(published_folders(reports_dir)):
        try:
            name, uuid, accepted = read_accepted(folder / "run-report.json")
        except DataError as err:
            notes.append(Outcome(None, None, f"session {folder.name} skipped: {err}"))
            continue
        if name != folder.name:
            continue                    # not published by netbench: not a session
        other = same_session(name, uuid, accepted, seen)
        if other:
            notes.append(Outcome(None, None, f"session {name} skipped: the same session as "
                                             f"{other}, published later"))
            continue
        seen[uuid] = (name, accepted.fingerprint)
        found.append((name, accepted))
    return found[::-1]


def sessions_by_partition(sessions):
    """{system:partition: [(name, Accepted) with a passed case there]}, in order."""
    found = {}
    for name, accepted in sessions:
        for partition in sorted(accepted.partitions):
            found.setdefault(partition, []).append((name, accepted))
    return found


def accept_partition(part, chosen, knobs, folder):
    """The Outcome of accepting `chosen` ([(name, Accepted)]) as the
    baseline of `part`: written whole, or skipped with the reason (a build
    that fails its own checks leaves the file there as it was)."""
    names = ", ".join(name for name, _ in chosen)
    if len(chosen) < knobs.baseline_min_runs:
        return Outcome(part, None, f"skipped: {len(chosen)} session(s) ({names}), a baseline "
                                   f"takes at least {knobs.baseline_min_runs} accepted runs "
                                   f"(judging.yaml baseline.min_runs)")
    try:
        built = baseline.build(part, [accepted for _, accepted in chosen], knobs)
        path = baseline.write(built, folder)    # other DataErrors: the folder, for all
    except ValueError as err:
        return Outcome(part, None, f"skipped: {err}")
    except baseline.Unfit as err:
        return Outcome(part, None, f"skipped: the baseline built from {names} would not "
                                   f"judge, the file is left as it was: {err}")
    seen = set().union(*(accepted.partitions[part] for _, accepted in chosen))
    left = len(seen) - len(built["cases"])
    return Outcome(part, path, f"accepted {len(built['cases'])} case(s) from "
                               f"{len(chosen)} runs ({names}) into {path}"
                               + (f"; {left} case(s) left out: passed in fewer than "
                                  f"{knobs.baseline_min_runs} of them" if left else ""))


def accept(names=(), partition=None, reports_dir=paths.REPORTS, folder=baseline.BASELINES):
    """Write the baseline of each system:partition from the sessions
    `names` (default: its last min_runs published sessions); the Outcomes,
    one per partition and one per session skipped.  DataError when a named
    session is bad, when the folder cannot be written, or when nothing at
    all was accepted (naming why)."""
    knobs = judging_knobs.load()
    notes = []
    sessions = named_sessions(names, reports_dir) if names else published(reports_dir, notes)
    outcomes = []
    for part, of_part in sorted(sessions_by_partition(sessions).items()):
        if partition and part != partition:
            continue
        chosen = of_part if names else of_part[-knobs.baseline_min_runs:]
        outcomes.append(accept_partition(part, chosen, knobs, folder))
    if not any(o.path for o in outcomes):
        raise DataError(reports_dir, None, "nothing accepted: " + ("; ".join(
            o.line() for o in notes + outcomes) or "no published session"
            + (f" on {partition}" if partition else "")))
    return notes + outcomes


def show(partition=None, folder=baseline.BASELINES):
    """The lines of every baseline (or `partition`'s), their text from the
    files made printable (textsafe)."""
    files = sorted(Path(folder).glob("*.yaml")) if Path(folder).is_dir() else []
    lines = []
    for path in files:
        data = baseline.load(path)
        if partition and f"{data['system']}:{data['partition']}" != partition:
            continue
        lines += [str(path)] + baseline.show(data)
    return [printable(line) for line in lines] or \
        ["no baseline: `netbench baseline accept` makes one from 3 runs"]

"""`netbench baseline accept|show`: learned baselines from published
sessions (netbench/judgement/baseline.py builds and checks them)."""

from pathlib import Path

from .. import paths
from ..datafiles import DataError
from ..judgement import baseline
from ..judgement.rule import load_rule
from .sessions import load_session, published_sessions


def named_session(name, reports_dir=paths.REPORTS):
    """A session by its folder name under reports/, or a run report's path."""
    path = Path(name)
    if path.is_file():
        return load_session(path)
    folder = Path(reports_dir) / name
    if not (folder / "run-report.json").is_file():
        raise DataError(folder, None, "no such published session (netbench publish writes "
                                      "reports/<session>/run-report.json)")
    return load_session(folder / "run-report.json")


def sessions_by_partition(sessions):
    """{system:partition: [sessions with a passed case there]}, in order."""
    found = {}
    for session in sessions:
        for partition in sorted({baseline.partition_of(tc) for tc in session.testcases
                                 if tc.get("result") == "pass"}):
            found.setdefault(partition, []).append(session)
    return found


def accept(names=(), partition=None, reports_dir=paths.REPORTS, folder=baseline.BASELINES):
    """Write the baselines of the sessions `names` (default: the last
    min_runs published sessions of each system:partition); the paths."""
    rule = load_rule()
    sessions = [named_session(n, reports_dir) for n in names] if names else \
        published_sessions(reports_dir)
    written = []
    for part, of_part in sorted(sessions_by_partition(sessions).items()):
        if partition and part != partition:
            continue
        chosen = of_part if names else of_part[-rule.baseline_min_runs:]
        if len(chosen) < rule.baseline_min_runs:
            raise DataError(reports_dir, None,
                            f"{part}: {len(chosen)} session(s), a baseline takes at least "
                            f"{rule.baseline_min_runs} accepted runs (judging.yaml "
                            f"baseline.min_runs)")
        try:
            written.append(baseline.write(baseline.build(part, chosen, rule), folder))
        except ValueError as err:
            raise DataError(reports_dir, None, str(err)) from err
    if not written:
        raise DataError(reports_dir, None, "no published session to accept"
                        + (f" on {partition}" if partition else ""))
    return written


def show(partition=None, folder=baseline.BASELINES):
    """The lines of every baseline (or `partition`'s)."""
    files = sorted(Path(folder).glob("*.yaml")) if Path(folder).is_dir() else []
    lines = []
    for path in files:
        data = baseline.load(path)
        if partition and f"{data['system']}:{data['partition']}" != partition:
            continue
        lines += [str(path)] + baseline.show(data)
    return lines or ["no baseline: `netbench baseline accept` makes one from 3 runs"]

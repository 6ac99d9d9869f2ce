"""The tuning session's page, reports/tune-<time>-<profile>/index.html, in
the report's style: the decision and why, the revert and its read-back,
what the playbook changed per host, each case's curves before (solid) and
after (dashed) the tuning, and the change per figure and size
(report.compare, as `netbench compare` shows it)."""

import datetime
import json
from pathlib import Path

from ..report import compare, compare_page, page, plots, reasons, sessions, sides
from ..safefile import atomic_write
from ..report.sections import case_record
from .record import side_of

#: the columns drawn per case: time and rate against the message size
DRAWN = (("usec", "time per message (us)"), ("Mbps", "bandwidth (Mbit/s)"))


def case_curves(runs, style, side):
    """{(case key, column): [(label, xs, ys, style, panel)]} of a side's
    sessions, one line per session."""
    found = {}
    for n, session in enumerate(runs, 1):
        for tc in session.testcases:
            record = case_record(tc)
            key = sides.case_key(tc)
            for series in record.get("series", []):
                xcol = series["x"]["column"]
                for column, _ in DRAWN:
                    rows = [r for r in series["rows"] if column in r and xcol in r]
                    if rows:
                        found.setdefault((key, column), []).append(
                            (f"{side} {n}: {series['name']}", [r[xcol] for r in rows],
                             [r[column] for r in rows], style, key))
    return found


def curve_figures(before, after):
    """One small-multiples SVG per drawn column: a panel per case, before
    solid and after dashed."""
    lines = case_curves(before, 0, "before")
    for key, more in case_curves(after, 1, "after").items():
        if key in lines:
            lines[key].extend(more)
    figures = []
    for column, ylabel in DRAWN:
        series = [line for (case, col), found in sorted(lines.items()) if col == column
                  for line in found]
        if series:
            figures.append(plots.curve_plot(series, "message size", ylabel,
                                            f"{ylabel}: before and after"))
    return figures


def host_changes(rec):
    """[(host, concern, summary)] of tune_record's controller record."""
    rows = []
    for host, entry in sorted(((rec.get("changes") or {}).get("hosts") or {}).items()):
        for concern, value in sorted((entry or {}).items()):
            if concern in ("profile", "flavour"):
                continue
            rows.append((host, concern, json.dumps(value, sort_keys=True)[:600]))
    return rows


def decision_calls(decided):
    """{(case, figure, bytes): (css class, words)} of the decision's
    evidence: what the page marks in its change table."""
    calls = {}
    for entry, css, words in ((decided.get("isolated") or [], "noise", "single size, not counted"),
                              (decided.get("improved") or [], "better", "better"),
                              (decided.get("worse") or [], "worse", "worse")):
        for e in entry:
            calls[(e["case"], e["figure"], e["bytes"])] = (css, words)
    return calls


def render(rec, folder):
    folder = Path(folder)
    comparison, figures = None, []
    if rec["before"].get("sessions") and rec["after"].get("sessions"):
        comparison = compare.compare(side_of(rec["before"], folder),
                                     side_of(rec["after"], folder), "before", "after")
        figures = curve_figures(
            [sessions.load_session(folder / s["run_report"]) for s in rec["before"]["sessions"]],
            [sessions.load_session(folder / s["run_report"]) for s in rec["after"]["sessions"]])
    env = page.environment()
    env.filters["size"] = compare_page.size_text
    env.filters["interval"] = compare_page.interval_text
    env.filters["css"] = compare_page.css_class
    return env.get_template("tune.html.j2").render(
        rec=rec, comparison=comparison, figures=figures, changes=host_changes(rec),
        calls=decision_calls(rec.get("decision") or {}),
        reason=reasons.of_verdict(rec.get("decision") or {}),
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def write(rec, folder):
    atomic_write(Path(folder) / "index.html", render(rec, folder))
    return Path(folder) / "index.html"

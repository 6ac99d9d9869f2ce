"""The HTML pages (Jinja2, netbench/templates): one session's page with its
history, a comparison of several sessions, and the index of reports/.  The
summary table comes from each case's perfvalues; the plots from sections
(drawn by plots)."""

import datetime

import jinja2

from .. import paths
from . import findings, parity, plots, reasons, sweep, verdict
from .sides import case_label
from .sections import case_record

TEMPLATES = paths.TEMPLATES


def headline_key(tc, var):
    return f"{case_label(tc)} | {tc.get('environ')} | {tc.get('system')}:{tc.get('partition')}" \
           f" | {var}"


def bound(ref, frac):
    if frac is None or ref in (None, 0):
        return None
    return ref * (1 + frac)


def case_rows(tc):
    """Summary-table rows of one test case: one per performance variable,
    or one with the verdict alone."""
    record = case_record(tc)
    base = {"partition": f"{tc.get('system')}:{tc.get('partition')}",
            "environ": tc.get("environ"), "case": case_label(tc),
            "placement": record["provenance"].get("placement", ""),
            "result": tc.get("result", "?"),
            "reason": tc.get("fail_reason") or tc.get("skip_reason") or ""}
    perf = tc.get("perfvalues") or {}
    if not perf:
        return [dict(base, variable="", value=None, unit="", reference=None, lower=None,
                     upper=None, verdict=tc.get("result", "?"), key=None, citation="")]
    rows = []
    for key, entry in perf.items():
        value, ref, lower, upper, unit, result = entry[:6]     # ReFrame may add more
        var = key.split(":")[-1]
        has_ref = ref not in (None, 0) and (lower is not None or upper is not None)
        rows.append(dict(base, variable=var, value=value, unit=unit,
                         reference=ref if has_ref else None, lower=bound(ref, lower),
                         upper=bound(ref, upper), verdict=result if has_ref else "no reference",
                         key=headline_key(tc, var),
                         # the documented figure, as the case recorded it
                         citation=(record["references"].get(var) or {}).get("citation") or ""))
    return rows


def headline_values(tc):
    """[(headline key, value)] of a case's measured figures: what its
    history needs of an earlier session (its perfvalues and names, which
    sessions.load_summary keeps), the same keys case_rows gives."""
    return [(headline_key(tc, key.split(":")[-1]), entry[0])
            for key, entry in (tc.get("perfvalues") or {}).items() if entry[0] is not None]


def history_for(session, earlier):
    """{headline key: {"values": [...], "change": %}} against the earlier
    sessions on the same systems, oldest first; `earlier` may be summaries
    (sessions.load_summary)."""
    systems = set(session.systems)
    older = [s for s in earlier if s.started < session.started and set(s.systems) & systems]
    past = {}     # headline key -> values, oldest first, read once per session
    for old in older:
        for otc in old.testcases:
            for key, value in headline_values(otc):
                past.setdefault(key, []).append(value)
    history = {}
    for tc in session.testcases:
        for row in case_rows(tc):
            if row["key"] is None or row["value"] is None:
                continue
            values = past.get(row["key"], [])
            if values:
                prev = values[-1]
                history[row["key"]] = {
                    "values": values + [row["value"]],
                    "change": 100 * (row["value"] - prev) / prev if prev else None,
                }
    return history


def sparkline(values, width=90, height=18):
    """Points of an SVG polyline for a small trend line."""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1
    step = width / max(len(values) - 1, 1)
    return " ".join(f"{i * step:.1f},{height - 2 - (v - lo) / span * (height - 4):.1f}"
                    for i, v in enumerate(values))


def comparison_rows(sessions):
    """One row per headline figure present in any session: its value in
    each, and the change from the first session to the last."""
    table = {}
    for i, s in enumerate(sessions):
        for tc in s.testcases:
            for row in case_rows(tc):
                if row["key"] and row["value"] is not None:
                    table.setdefault(row["key"], {"unit": row["unit"], "values": {}})
                    table[row["key"]]["values"][i] = row["value"]
    rows = []
    for key, entry in sorted(table.items()):
        vals = entry["values"]
        first, last = vals.get(0), vals.get(len(sessions) - 1)
        change = 100 * (last - first) / first if first and last is not None else None
        rows.append({"key": key, "unit": entry["unit"],
                     "values": [vals.get(i) for i in range(len(sessions))], "change": change})
    return rows


def environment():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["num"] = lambda v, digits=4: "" if v is None else f"{v:.{digits}g}"
    env.filters["sparkline"] = sparkline
    env.filters["readable"] = lambda figure: reasons.readable(figure["value"], figure["unit"])
    env.filters["bounds"] = verdict.bounds_text
    return env


def diagnoses(sessions):
    """The likely causes the diagnosis rules name in the sessions' curves,
    shown beside the verdict (netbench/report/diagnosis.py)."""
    from . import diagnosis     # loads the rules only for a page that shows them
    return [d for s in sessions for d in diagnosis.diagnose(s)]


def layer_notes(sessions):
    """What the layers beside the MPIs say besides the MPI's loss (that is a
    diagnosis): a layer not run, once per reason with its count, and a
    lower layer short of its line rate, per case (record `layers`)."""
    not_run, short = {}, []
    for s in sessions:
        for tc in s.testcases:
            layers = case_record(tc).get("layers") or {}
            for layer, why in (layers.get("not_run") or {}).items():
                not_run[(layer, why)] = not_run.get((layer, why), 0) + 1
            short += [f"{tc.get('name', '?')}: {reasons.layer_words(a)}"
                      for a in layers.get("attributions") or []
                      if a["code"] == "layer_short_of_line_rate"]
    return [f"{layer} layer not run beside the MPI in {n} case{'s' if n != 1 else ''}: {why}"
            for (layer, why), n in sorted(not_run.items())] + short


def render_report(sessions, earlier=()):
    """The HTML page for one session (with history from `earlier`) or a
    comparison of several."""
    svg, fits = plots.build_sections(sessions)
    rows = [r for s in sessions for tc in s.testcases for r in case_rows(tc)]
    counts = {}
    for s in sessions:
        for tc in s.testcases:
            counts[tc.get("result", "?")] = counts.get(tc.get("result", "?"), 0) + 1
    return environment().get_template("report.html.j2").render(
        sessions=sessions, rows=rows, counts=counts, svg=svg, fits=fits,
        verdict=verdict.overall(sessions), failures=verdict.failures(sessions),
        headlines=verdict.headline_tables(sessions), headline_columns=verdict.HEADLINE,
        skipped=verdict.skipped_by_reason(sessions),
        finding_tables=findings.page_tables(sessions),
        diagnoses=diagnoses(sessions), layer_notes=layer_notes(sessions),
        sweeps=sweep.sweep_sections(sessions),
        containers=parity.container_sections(sessions),
        history=history_for(sessions[-1], earlier) if len(sessions) == 1 else {},
        comparison=comparison_rows(sessions) if len(sessions) > 1 else [],
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def render_index(sessions):
    """The index of reports/: a row per session, newest first; a session
    cut short says so in its row, with how many of its cases ran (its
    ReFrame count is of the cases it started)."""
    return environment().get_template("index.html.j2").render(
        sessions=sorted(sessions, key=lambda s: s.started, reverse=True),
        interrupted={s.name: verdict.interrupted_words(end) for s in sessions
                     for end in [verdict.session_ends([s])] if end})

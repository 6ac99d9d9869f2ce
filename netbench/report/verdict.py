"""The first screen of a report: the verdict, the failures with their
reasons, and one headline table per partition (a row per MPI, transport and
placement: latency, bandwidth at 1 and 8 MiB, peak, share of the line rate,
n½, each judged figure beside its documented reference and bounds).

Everything comes from the run report: the cases' perfvalues (what ReFrame
judged, with the reference and bounds of that session) and their records
(provenance, the line rate, which figure or baseline judged each).  The
verdict also says what the figures were judged against (`judged_against`):
that alone reads files, the reference files' years and the learned
baselines' provenance, never their figures.  No ReFrame.
"""

import datetime
from pathlib import Path

from .. import exitcodes, paths
from ..datafiles import DataError
from ..judgement import session_end
from .datapath import cell as path_cell
from .reasons import readable
from .sections import case_record
from .sessions import Session

#: headline columns: (perf variable, heading); judged ones show their reference
HEADLINE = [("latency", "latency"), ("bw_1MiB", "1 MiB"), ("bw_8MiB", "8 MiB"),
            ("peak_bw", "peak"), ("nhalf", "n½")]
#: a case makes a headline row when it measured these (a ping-pong sweep)
#: and some of them were judged against a documented reference
HEADLINE_NEEDS = {"latency", "peak_bw"}


def perf_entry(tc, var):
    """{value, reference, lower, upper, unit, verdict} of one performance
    variable as judged; None when the case has none.  A figure the judging
    rule left inconclusive went to ReFrame unbounded: its bound and
    verdict are the record's (`verdicts`)."""
    decision = (case_record(tc).get("verdicts") or {}).get(var)
    for key, entry in (tc.get("perfvalues") or {}).items():
        if key.split(":")[-1] == var:
            value, ref, lower, upper, unit, result = entry[:6]
            judged = ref not in (None, 0) and (lower is not None or upper is not None)
            figure = {"value": value, "unit": unit,
                      "reference": ref if judged else None,
                      "lower": ref * (1 + lower) if judged and lower is not None else None,
                      "upper": ref * (1 + upper) if judged and upper is not None else None,
                      "verdict": result if judged else "not judged", "why_not_judged": "",
                      "remeasured": None,
                      "launches": decision["launches"] if decision else None,
                      "decision": decision["reason"] if decision else ""}
            if decision and decision["verdict"] == "inconclusive" and ref:
                bound = decision.get("bound") or {}
                figure.update(reference=ref, verdict="inconclusive",
                              lower=bound.get("value") if bound.get("side") == "lower"
                              else None,
                              upper=bound.get("value") if bound.get("side") == "upper"
                              else None)
            return figure
    return None


def case_result(tc):
    """pass, fail, skip or inconclusive: ReFrame's result, unless the
    judging rule could not tell (ReFrame knows only pass and fail)."""
    if tc.get("result") == "pass" and case_record(tc).get("verdict") == "inconclusive":
        return "inconclusive"
    return tc.get("result", "?")


def inconclusive_reason(tc):
    """Why a case is inconclusive: its undecided figures' reasons."""
    return "; ".join(f"{var}: {d['reason']}"
                     for var, d in (case_record(tc).get("verdicts") or {}).items()
                     if d.get("verdict") == "inconclusive")


def bounds_text(figure):
    """"ref 7.69 Gbit/s, at least 7.69 Gbit/s" and the like."""
    unit = figure["unit"]
    parts = [f"ref {readable(figure['reference'], unit)}"]
    if figure["lower"] is not None and figure["upper"] is not None:
        parts.append(f"within {readable(figure['lower'], unit)}-{readable(figure['upper'], unit)}")
    elif figure["lower"] is not None:
        parts.append(f"at least {readable(figure['lower'], unit)}")
    elif figure["upper"] is not None:
        parts.append(f"at most {readable(figure['upper'], unit)}")
    return ", ".join(parts)


def one_line(reason, limit=240):
    """The first line of a failure reason, short enough for a table cell."""
    first = (reason or "").strip().splitlines()[0] if (reason or "").strip() else ""
    return first if len(first) <= limit else first[:limit - 1] + "…"


def judged_cases(sessions):
    return [tc for s in sessions for tc in s.testcases
            if tc.get("result") != "skip" and not tc.get("name", "").startswith("NetbenchBuild")]


def failures(sessions):
    """Failed cases, each with its reason in one line."""
    rows = []
    for tc in judged_cases(sessions):
        result = case_result(tc)
        if result in ("fail", "abort", "inconclusive"):
            rows.append({"case": tc.get("display_name", tc.get("name", "")).split(" /")[0],
                         "environ": tc.get("environ", ""),
                         "partition": f"{tc.get('system')}:{tc.get('partition')}",
                         "stage": tc.get("fail_phase") or "" if result == "fail"
                         else "aborted" if result == "abort" else "inconclusive",
                         "reason": one_line(tc.get("fail_reason") if result != "inconclusive"
                                            else inconclusive_reason(tc), limit=400)})
    rows.sort(key=lambda r: r["stage"] == "inconclusive")
    return rows


#: what stopped a session cut short, in the words of its first line
#: (judgement.session_end's codes)
STOPPED_BY_WORDS = {"SIGINT": "Ctrl-C", "SIGTERM": "stopped by SIGTERM",
                    "SIGHUP": "stopped by SIGHUP",
                    "time_limit": "the session's time limit (--duration) ran out",
                    "failure_limit": "the failure limit (--maxfail) was reached"}


def interrupted_words(end):
    """"Interrupted: 6 of 17 cases ran (Ctrl-C)": the first words of the
    summary, page and JUnit of a session cut short, from its record
    (judgement.session_end)."""
    why = STOPPED_BY_WORDS.get(end.get("stopped_by"))
    return (f"Interrupted: {end['cases_ran']} of {end['cases_planned']} cases ran"
            + (f" ({why})" if why else ""))


def session_ends(sessions):
    """The sessions' records of how they ended, summed when several are
    shown together: None when none was cut short (or none has a record, a
    run report from before them)."""
    ends = [session_end.from_session_info(s.report.get("session_info"))
            for s in sessions]
    cut = [e for e in ends if session_end.cut_short(e)]
    if not cut:
        return None
    recorded = [e for e in ends if e]
    return {"interrupted": True, "stopped_by": cut[0].get("stopped_by"),
            "cases_planned": sum(e["cases_planned"] for e in recorded),
            "cases_ran": sum(e["cases_ran"] for e in recorded)}


def interrupted_verdict(end, cases, failed, aborted, unsure):
    """The verdict of sessions cut short: how many cases ran of how many,
    first, then what those that ran showed; never a pass."""
    ran = [tc for tc in cases if tc.get("result") != "abort"]
    if not ran:
        shown = "nothing to judge"
    else:
        shown = "of those that ran, " + (
            f"{len(failed)} failed (below, each with its reason)" if failed else
            "none failed") + (f", {len(unsure)} inconclusive" if unsure else "")
    if aborted:
        shown += f"; {len(aborted)} stopped before their end"
    return {"word": "interrupted",
            "text": f"{interrupted_words(end)}; {shown}; cases that did not run to their "
                    f"end are not judged."}


def overall(sessions, references=paths.REFERENCES, baselines=None):
    """The verdict of the run: does the network perform as documented?
    `basis` says against what (judged_against): documented references,
    or which learned baselines.  A session cut short (its record,
    judgement.session_end) says so first, and never passes."""
    cases = judged_cases(sessions)
    failed = [tc for tc in cases if tc.get("result") == "fail"]
    # stopped before they ran to the end (Ctrl-C, a failure limit): unjudged
    aborted = [tc for tc in cases if tc.get("result") == "abort"]
    unsure = [tc for tc in cases if case_result(tc) == "inconclusive"]
    figures = [e for tc in cases for e in (perf_entry(tc, v) for v in sorted(HEADLINE_NEEDS))
               if e and e["reference"] is not None]
    end = session_ends(sessions)
    if end:
        found = interrupted_verdict(end, cases, failed, aborted, unsure)
        word, text = found["word"], found["text"]
    elif not cases:
        word, text = "nothing-run", "No test case ran: nothing to judge."
    elif failed:
        word = "fail"
        text = (f"Not as it should be: {len(failed)} of {len(cases)} cases failed "
                f"(below, each with its reason)"
                + (f"; {len(aborted)} stopped before the end" if aborted else "")
                + (f"; {len(unsure)} inconclusive." if unsure else "."))
    elif aborted:
        word = "unfinished"
        text = (f"Not finished: {len(aborted)} of {len(cases)} cases were stopped before "
                f"they ran to the end, and are not judged; no case failed.")
    elif unsure:
        word = "inconclusive"
        text = f"Could not tell: {len(unsure)} of {len(cases)} cases inconclusive"
        host = sum(1 for tc in unsure if names_conditions(tc))
        if host:
            text += (f", {host} of them because the host's conditions differed from their "
                     f"reference's (below, each naming the node and its readings)")
        if len(unsure) - host:
            text += (f"{'; ' if host else ', '}{len(unsure) - host} too noisy for their "
                     f"evidence to meet or miss the bound (below, each with the launches' "
                     f"spread)")
        text += "; no case failed."
    else:
        word = "pass"
        text = (f"As it should be: all {len(cases)} cases passed; {len(figures)} headline "
                f"figures within the bounds of their documented references.")
    return {"word": word, "text": text, "cases": len(cases), "failed": len(failed),
            "aborted": len(aborted), "inconclusive": len(unsure), "end": end,
            "basis": judged_against(sessions, references, baselines) if cases else ""}


def names_conditions(tc):
    """Whether an inconclusive case's record names a difference of the
    host's conditions (judgement.conditions) for one of its figures."""
    verdicts = (tc.get("record") or {}).get("verdicts") or {}
    return any(isinstance(v, dict) and isinstance(v.get("numbers"), dict)
               and v["numbers"].get("conditions") for v in verdicts.values())


def one_line_verdict(sessions, references=paths.REFERENCES, baselines=None):
    """The verdict and its basis on one line, for a terminal."""
    found = overall(sessions, references, baselines)
    return " ".join(t for t in (found["text"], found["basis"]) if t)


#: a figure the learned baseline judged (netbench.checks.judging records it so)
BASELINE_FIGURE = "baseline"


def judgement_sources(sessions):
    """({partition: (session, baseline file name)} of the cases a learned
    baseline judged, {reference file stem}, and how many judged cases only
    documented references judged), from the records."""
    by_baseline, stems, documented_only = {}, set(), 0
    for session in sessions:
        for tc in judged_cases([session]):
            refs = case_record(tc).get("references") or {}
            learned = [r for r in refs.values() if r.get("figure") == BASELINE_FIGURE]
            for ref in learned:
                by_baseline.setdefault(f"{tc.get('system')}:{tc.get('partition')}",
                                       (session, str(ref.get("citation") or "").split(",")[0]))
            cited = {str(r["figure"]).split("#")[0] for r in refs.values()
                     if r.get("figure") and r.get("figure") != BASELINE_FIGURE}
            stems |= cited
            # a record before records named their figures: ReFrame's reference
            documented = cited or not refs and any(
                e and e["reference"] is not None
                for e in (perf_entry(tc, v) for v in sorted(HEADLINE_NEEDS)))
            documented_only += bool(documented and not learned)
    return by_baseline, stems, documented_only


def reference_years(references):
    """{file stem: year or None} of the documented reference files (their
    `source.year`: a document without one is undated)."""
    from .. import references as refdata
    from ..datafiles import load_yaml
    years = {}
    for pattern in refdata.FIGURE_FILES:
        for path in sorted(Path(references).glob(pattern)):
            source = (load_yaml(path) or {}).get("source") or {}
            years[path.stem] = source.get("year") if isinstance(source, dict) else None
    return years


def documented_words(stems, references):
    """"documented 2002-2005 references": the years of the reference files
    the run's figures came from."""
    try:
        years = reference_years(references)
    except DataError:
        years = {}
    dated = sorted({years[s] for s in stems if years.get(s)})
    undated = sorted(s for s in stems if not years.get(s))
    span = "" if not dated else str(dated[0]) if len(dated) == 1 \
        else f"{dated[0]}-{dated[-1]}"
    if span and undated:
        return f"documented references ({span}, and {len(undated)} undated source(s))"
    return f"documented {span} references" if span else "documented references"


def baseline_words(partition, session, name, folder):
    """"the learned baseline of local:node (3 runs, accepted 2026-11-20
    10:00 UTC)", from the baseline file the record names."""
    from ..judgement import baseline
    from ..safefile import child
    try:
        learned = baseline.load(child(folder, name))
        accepted = datetime.datetime.strptime(learned["accepted"], "%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, DataError):
        # moved, removed or not netbench's: the record's name is all there is
        return f"the learned baseline of {partition} ({name})"
    accepted = accepted.replace(tzinfo=datetime.timezone.utc)
    runs = len(learned.get("sessions") or []) or max(c["runs"] for c in learned["cases"])
    when = accepted.strftime("%Y-%m-%d %H:%M UTC")
    if accepted.timestamp() > float(session.started or 0):
        return (f"the learned baseline of {partition} ({name}, since accepted again, on "
                f"{when}: the one that judged this run is in the file's history)")
    return f"the learned baseline of {partition} ({runs} runs, accepted {when})"


def judged_against(sessions, references=paths.REFERENCES, baselines=None):
    """What the figures were judged against, in a sentence: the learned
    baselines (which, from how many runs, accepted when), or documented
    references only, which are a floor from published hardware, with the
    step that learns this system's own."""
    from ..judgement import baseline, knobs
    by_baseline, stems, documented_only = judgement_sources(sessions)
    folder = baselines or baseline.BASELINES
    documented = documented_words(stems, references)
    floor = f"{documented} only: a floor, not this system's expected performance"
    if by_baseline:
        learned = "; ".join(baseline_words(part, session, name, folder)
                            for part, (session, name) in sorted(by_baseline.items()))
        rest = (f"; {documented_only} case(s) without one against {floor}"
                if documented_only else "")
        return f"Judged against {learned}{rest}."
    if not documented_only:
        return ""
    try:
        runs = knobs.load(references).baseline_min_runs
    except DataError:
        runs = None
    after = f"after {runs} runs, " if runs else ""
    return (f"Judged against {floor}; {after}`netbench baseline accept` learns what this "
            f"system itself should do.")


def line_rate_share(tc, peak):
    rate = (case_record(tc).get("provenance") or {}).get("line_rate_mbps")
    if not rate or not peak or peak.get("value") is None:
        return None
    return peak["value"] / rate


def headline_row(tc):
    record = case_record(tc)
    prov = record.get("provenance") or {}
    figures = {var: perf_entry(tc, var) for var, _ in HEADLINE}
    # records of version 1: [first sweep, re-measurement]
    for var, figures_of_sweeps in (record.get("remeasured") or {}).items():
        if figures.get(var):
            figures[var]["remeasured"] = figures_of_sweeps
    for var, why in (record.get("unjudged") or {}).items():
        if figures.get(var):
            figures[var]["why_not_judged"] = why
    return {"environ": tc.get("environ", ""),
            "mpi": " ".join(x for x in (prov.get("mpi_family"), prov.get("mpi_version")) if x),
            "transport": "raw TCP" if prov.get("transport") == "raw" else
                         prov.get("transport", ""), "placement": prov.get("placement", ""),
            "case": tc.get("display_name", tc.get("name", "")).split(" /")[0],
            "label": record.get("label", ""),
            # the label without what the other columns say
            "what": " ".join(w for w in record.get("label", "").split()
                             if w not in (tc.get("environ"), prov.get("placement"))),
            "interconnect": prov.get("interconnect", ""),
            # the path the library said it used, and the line it said it in
            "path": path_cell(record.get("path")),
            "path_evidence": (record.get("path") or {}).get("evidence", ""),
            "result": case_result(tc), "figures": figures,
            "line_rate_share": line_rate_share(tc, figures["peak_bw"])}


def headline_tables(sessions):
    """{partition: rows}: each ping-pong sweep of the run, failed rows
    first, then by MPI, placement and transport."""
    tables = {}
    for tc in judged_cases(sessions):
        measured = {key.split(":")[-1] for key in (tc.get("perfvalues") or {})}
        if not HEADLINE_NEEDS <= measured:
            continue
        # sweeps kept for the curves only (a socket-buffer size, MPI's half of
        # a side-by-side run) are judged elsewhere or not at all
        if all(perf_entry(tc, var)["reference"] is None for var in HEADLINE_NEEDS):
            continue
        partition = f"{tc.get('system')}:{tc.get('partition')}"
        tables.setdefault(partition, []).append(headline_row(tc))
    for rows in tables.values():
        rows.sort(key=lambda r: (r["result"] != "fail", r["environ"], r["placement"],
                                 r["transport"] != "shm", r["case"]))
    return dict(sorted(tables.items()))


def skipped_by_reason(sessions):
    """[(reason, count)] of the cases that skipped, most frequent first."""
    counts = {}
    for s in sessions:
        for tc in s.testcases:
            if tc.get("result") == "skip":
                reason = (one_line(tc.get("skip_reason") or tc.get("fail_reason"))
                          or "no reason recorded")
                counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


#: netbench's exit codes for a session that ran, as every command means
#: them (netbench/exitcodes.py): ReFrame's own are 0 and 1 only.
#: EXIT_NOT_RUN is also a session that ran no case (a selection matching
#: nothing, an unknown --system) and netbench's bad input
EXIT_PASS, EXIT_LOSS, EXIT_NOT_RUN, EXIT_INCONCLUSIVE = (
    exitcodes.OK, exitcodes.LOSS, exitcodes.NOT_RUN, exitcodes.INCONCLUSIVE)
EXIT_INTERRUPTED = exitcodes.INTERRUPTED


def shows_a_loss(tc):
    """A failed case that failed on its evidence: ReFrame's performance
    check, or the case's own judgement (record `verdict`: a sweep's
    suspects, a container's parity), not a run that did not finish."""
    record = case_record(tc)
    return tc.get("fail_phase") == "performance" or (
        record.get("verdict") == "fail"
        # a sweep that did not measure every pair and named nobody failed
        # without an answer (LinkSweep's record says why)
        and not (record.get("fleet") or {}).get("no_answer"))


def last_runs(run_report):
    """Each case's last run: ReFrame's `--max-retries` runs a failed case
    again, in a further entry of `runs`, and the retry's result is the
    case's (as ReFrame's own exit and the page, sessions.Session, take it)."""
    return Session(run_report, {}, "").testcases


def exit_code(run_report, reframe_code):
    """The session's exit code from the last run of each of its cases: a
    loss shown (a case failed on its judged figures) stays 1; cases that
    failed only before they could be judged (they did not run to the end,
    or were aborted) give 2; no failure but an inconclusive case gives 3.
    `reframe_code` is what ReFrame would return: anything but 0 or 1
    stands."""
    if reframe_code not in (0, 1):
        return reframe_code
    cases = last_runs(run_report)
    failed = [tc for tc in cases if tc.get("result") in ("fail", "abort")]
    if failed:
        return EXIT_LOSS if any(shows_a_loss(tc) for tc in failed) else EXIT_NOT_RUN
    if reframe_code == 0 and any(case_result(tc) == "inconclusive" for tc in cases):
        return EXIT_INCONCLUSIVE
    return reframe_code

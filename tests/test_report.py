"""The HTML report: model fit and switch detection on synthetic curves,
escaping, self-containment, atomic publishing, comparison of sessions."""

import copy
import html
import json
import re
import subprocess
import os
from pathlib import Path

import html5lib
import numpy as np
import pytest
import yaml

from helpers.reports import minimal_report, session_from, sweep_report
from netbench import paths, report
from netbench.judgement import baseline, knobs
from netbench.report import analysis, datapath, verdict
from netbench.results import record as results_record

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

SIZES = 2.0 ** np.arange(0, 24)


@pytest.mark.parametrize("t0,rinf", [(0.4, 20000.0), (4.0, 1200.0), (50.0, 11.0)])
def test_hockney_fit_recovers_t0_and_rinf_within_2_percent(t0, rinf):
    rng = np.random.default_rng(7)
    times = (t0 + SIZES / rinf) * (1 + 0.01 * rng.standard_normal(len(SIZES)))
    fit = analysis.hockney_fit(SIZES, times)
    assert fit.t0_us == pytest.approx(t0, rel=0.02)
    assert fit.rinf_MBps == pytest.approx(rinf, rel=0.02)
    assert fit.nhalf_bytes == pytest.approx(t0 * rinf, rel=0.04)
    assert fit.residual < 0.03


def test_protocol_switch_found_where_the_curve_steps():
    eager, rendezvous = 1.0 + SIZES / 5000, 10.0 + SIZES / 8000
    times = np.where(SIZES < 65536, eager, rendezvous)
    switch = analysis.protocol_switch(SIZES, times)
    assert switch.bytes == 65536
    assert switch.below.rinf_MBps == pytest.approx(5000, rel=0.01)
    assert switch.above.t0_us == pytest.approx(10, rel=0.01)
    assert switch.step > 1.1


def test_no_protocol_switch_on_a_plain_hockney_curve():
    rng = np.random.default_rng(3)
    times = (2.0 + SIZES / 3000) * (1 + 0.02 * rng.standard_normal(len(SIZES)))
    assert analysis.protocol_switch(SIZES, times) is None


def test_dips_like_untuned_gige():
    bw = [10, 20, 40, 80, 160, 150, 300, 320, 330]     # a 6% wobble is no dip
    assert analysis.dips(list(range(len(bw))), bw) == []
    bw = [10, 20, 40, 80, 160, 60, 170, 320, 330]
    assert analysis.dips([2 ** i for i in range(len(bw))], bw) == [32]


def test_everything_from_a_run_is_escaped(tmp_path):
    evil = "<script>alert(1)</script>"
    data = minimal_report(host=evil, environ="<b>env</b>", reason="<img src=x onerror=alert(2)>")
    page = report.render_report([session_from(data, tmp_path)])
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>env</b>" not in page and "&lt;b&gt;env&lt;/b&gt;" in page
    assert "<img src=x" not in page
    assert "<script" not in page.replace("&lt;script", "")


def test_the_page_is_valid_html_and_requests_nothing(tmp_path):
    page = report.render_report([session_from(minimal_report(), tmp_path)])
    parser = html5lib.HTMLParser(strict=True)
    parser.parse(page)
    lowered = page.lower()
    for attr in ("src=\"http", "href=\"http", "src='http", "href='http", "url(http", "@import"):
        assert attr not in lowered, attr
    assert page.count("<svg") >= 2          # latency and bandwidth curves, inline
    assert "Hockney" in page and "t0" in page


def test_a_failed_case_shows_its_reason(tmp_path):
    page = report.render_report([session_from(minimal_report(reason="sanity error: boom"),
                                              tmp_path)])
    assert "sanity error: boom" in page and 'class="fail"' in page


def test_two_sessions_make_a_comparison(tmp_path):
    before = session_from(minimal_report(latency=0.5, uuid="11111111"), tmp_path, "a.json")
    after = session_from(minimal_report(latency=0.4, started=2000, uuid="22222222"), tmp_path,
                         "b.json")
    page = report.render_report([before, after])
    assert "comparison of 2 sessions" in page
    rows = report.comparison_rows([before, after])
    latency = next(r for r in rows if r["key"].endswith("| latency"))
    assert latency["values"] == [0.5, 0.4]
    assert latency["change"] == pytest.approx(-20.0)


def test_history_against_earlier_sessions(tmp_path):
    old = [session_from(minimal_report(latency=v, started=t, uuid=f"{t:08d}"), tmp_path,
                        f"{t}.json") for v, t in ((0.6, 100), (0.5, 200))]
    new = session_from(minimal_report(latency=0.4, started=300, uuid="00000300"), tmp_path)
    history = report.history_for(new, old)
    key = next(k for k in history if k.endswith("| latency"))
    assert history[key]["values"] == [0.6, 0.5, 0.4]
    assert history[key]["change"] == pytest.approx(-20.0)


def test_publish_is_atomic_and_keeps_sessions(tmp_path, monkeypatch):
    reports_dir = tmp_path / "reports"
    first = tmp_path / "first.json"
    first.write_text(json.dumps(minimal_report(uuid="aaaaaaaa")))
    folder = report.publish(first, reports_dir)
    assert (folder / "index.html").exists() and (folder / "run-report.json").exists()
    assert os.readlink(reports_dir / "latest") == folder.name
    assert (reports_dir / "latest" / "index.html").exists()

    second = tmp_path / "second.json"
    data = minimal_report(uuid="bbbbbbbb", started=5000)
    data["session_info"]["time_start"] = "20261121T110000+0000"
    second.write_text(json.dumps(data))
    monkeypatch.setattr(report.page, "render_report", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        report.publish(second, reports_dir)
    # the failed publication left nothing half-written and `latest` alone
    # (.lock: publishers take turns on it; it stays)
    assert sorted(p.name for p in reports_dir.iterdir()) == sorted(
        [folder.name, "latest", "index.html", ".lock"])
    assert os.readlink(reports_dir / "latest") == folder.name
    monkeypatch.undo()

    folder2 = report.publish(second, reports_dir)
    index = (reports_dir / "index.html").read_text()
    assert index.index(folder2.name) < index.index(folder.name)     # newest first
    assert os.readlink(reports_dir / "latest") == folder2.name


def test_netbench_report_rejects_a_non_report(tmp_path):
    from netbench import cli
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    assert cli.main(["report", str(bad), "-o", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out" / "index.html").exists()


def test_reference_points_come_from_the_recorded_references(tmp_path):
    s = session_from(copy.deepcopy(minimal_report()), tmp_path)
    records = [(0, report.case_record(tc)) for tc in s.testcases]
    _, points = report.curve_plot_data(report.CURVE_PLOTS["bandwidth"], records)
    ((label, panel), (size, value)), = points.items()
    assert panel == "mpich (wheel)"       # drawn in the panel of the case it judged
    assert (size, value) == (262141, 7688)
    assert "Intranode / Myrinet / MPI" in label


def test_the_table_names_the_recorded_figure_of_each_reference(tmp_path):
    page = report.render_report([session_from(minimal_report(), tmp_path)])
    assert page.count('title="000_0a10b582eb0a2537.txt, Table 1') == 2


def test_a_report_from_before_records_renders_curves_and_table(tmp_path):
    """No `record`: the table from perfvalues (value, reference, bounds as
    judged then), the curves from `curve`, and no reference points (what
    judged it is not recorded beside the curve)."""
    s = session_from(minimal_report(with_record=False), tmp_path)
    svg, fits = report.build_sections([s])
    assert {"latency", "bandwidth"} <= set(svg) and len(fits) == 1
    assert "Myrinet" not in svg["latency"] + svg["bandwidth"]
    latency = next(r for r in report.case_rows(s.testcases[0]) if r["variable"] == "latency")
    assert (latency["value"], latency["reference"], latency["upper"]) == (0.5, 0.42, 0.42 * 2.5)
    assert "latency" in report.render_report([s])


def test_a_curve_no_section_draws_needs_only_bytes(tmp_path):
    """A TCP stream sweep (TcpStreams) has MBps but no usec: still a report,
    from before records (figures only) and with one (its own plot)."""
    data = minimal_report(with_record=False)
    case = data["runs"][0]["testcases"][0]
    case.update(display_name="TcpStreams %connections=32 %placement=intranode",
                name="TcpStreams", report_section="")
    case["curve"] = [{"bytes": 61440.0, "connections": 32.0, "MBps": 340.1, "Mbps": 2721.1}]
    assert "TcpStreams" in report.render_report([session_from(data, tmp_path)])
    streams = results_record.make_series("tcp", case["curve"], ("Mbps", "MBps_mean"),
                                         report.LEGACY_UNITS)
    case["record"] = results_record.make("tcp_tuning", "mpich connections=32 intranode",
                                         [streams], {"placement": "intranode"})
    svg, _ = report.build_sections([session_from(data, tmp_path, "streams.json")])
    assert set(svg) == {"tcp_tuning"}


def test_the_verdict_comes_first_with_each_failure_and_its_reason(tmp_path):
    page = report.render_report([session_from(
        minimal_report(reason="performance error: failed to meet references: "
                              "latency=9.1, expected 0.42 (l=None, u=1.5)\nsecond line"),
        tmp_path)])
    verdict = page.index('id="verdict"')
    assert verdict < page.index('id="curves"') and verdict < page.index('id="cases"')
    assert "Not as it should be: 1 of 1 cases failed" in page
    failures = page[page.index('id="failures"'):page.index("</table>", page.index('id="failures"'))]
    assert "latency=9.1, expected 0.42" in failures and "second line" not in failures


def test_the_headline_shows_each_judged_figure_beside_its_reference(tmp_path):
    page = report.render_report([session_from(minimal_report(latency=0.5), tmp_path)])
    headline = page[page.index('id="headline-1"'):page.index("</table>",
                                                           page.index('id="headline-1"'))]
    assert "As it should be: all 1 cases passed" in page
    # 0.5 us judged against seed 000's 0.42 us with an upper bound of +150 %
    assert "0.5 us" in headline and "ref 0.42 us, at most 1.05 us: pass" in headline
    # 80000 Mbit/s read as Gbit/s, beside the 7688 Mbit/s reference
    assert "80 Gbit/s" in headline and "ref 7.69 Gbit/s, at least 7.69 Gbit/s" in headline


#: a real session's run report (tests/data/compare/README.md): judged by
#: documented references only, no baseline
RECORDED = paths.REPO / "tests" / "data" / "compare" / "pingpong-shm-openmpi.json"


def verdict_line(page):
    """The text of the page's verdict line (its <h2>), tags removed."""
    section = page[page.index('id="verdict"'):]
    heading = section[section.index("<h2"):section.index("</h2>")]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", heading)).split())


def recorded_years():
    """The years of the reference files the recorded run's figures cite."""
    data = json.loads(RECORDED.read_text())
    stems = {ref["figure"].split("#")[0] for run in data["runs"] for tc in run["testcases"]
             for ref in tc["record"]["references"].values() if ref.get("figure")}
    return sorted(yaml.safe_load((paths.REFERENCES / f"{stem}.yaml").read_text())["source"]
                  ["year"] for stem in stems)


def test_without_a_baseline_the_verdict_says_it_rests_on_documented_references(tmp_path):
    session = report.load_session(RECORDED)
    page = report.render_report([session])
    line = verdict_line(page)
    years = recorded_years()
    span = str(years[0]) if years[0] == years[-1] else f"{years[0]}-{years[-1]}"
    assert line.startswith("Verdict: As it should be: all 1 cases passed"), line
    assert (f"Judged against documented {span} references only: a floor, not this "
            f"system's expected performance") in line, line
    # the next step, with the number of runs judging.yaml asks of a baseline
    min_runs = knobs.load().baseline_min_runs
    assert f"after {min_runs} runs, netbench baseline accept" in line, line
    assert "<code>netbench baseline accept</code>" in page
    # the session's terminal line says the same
    assert verdict.one_line_verdict([session]) == line.removeprefix("Verdict: ").replace(
        "netbench baseline accept", "`netbench baseline accept`")


def test_publishing_prints_the_verdict_line_with_its_basis(tmp_path, capsys):
    """What a session prints last (its configuration publishes the run
    report) is the page's verdict line."""
    from netbench import cli
    raw = tmp_path / "run-report.json"
    raw.write_text(RECORDED.read_text())
    assert cli.main(["publish", str(raw), "-o", str(tmp_path / "reports")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("netbench: As it should be: all 1 cases passed"), out
    assert "references only: a floor, not this system's expected performance" in out[-1]
    assert "`netbench baseline accept`" in out[-1]


def judged_by_its_baseline(tmp_path, accepted):
    """The recorded run, judged as well by a baseline accepted from three
    copies of it (`accepted`: when), as a check records that
    (netbench.checks.judging: reference `vs_baseline`, figure `baseline`,
    citing the baseline file)."""
    folder = tmp_path / "baselines"
    runs = [session_from(json.loads(RECORDED.read_text()), tmp_path, f"run{i}.json")
            for i in range(3)]
    learned = baseline.build("local:node", [baseline.accepted_runs(s) for s in runs])
    learned["accepted"] = accepted
    path = baseline.write(learned, folder)
    data = json.loads(RECORDED.read_text())
    (tc,) = data["runs"][0]["testcases"]
    tc["perfvalues"]["local:node:vs_baseline"] = [0.8, 1.0, None, 0.0, "x", "pass"]
    tc["record"]["references"]["vs_baseline"] = results_record.reference(
        1.0, None, 0.0, "x", figure="baseline",
        citation=f"{path.name}, accepted runs of this partition")
    return session_from(data, tmp_path, "judged.json"), folder


def test_with_a_baseline_the_verdict_names_it(tmp_path, monkeypatch):
    session, folder = judged_by_its_baseline(tmp_path, "2026-11-20T09:30:00Z")
    monkeypatch.setattr(baseline, "BASELINES", folder)     # where the page looks
    page = report.render_report([session])
    line = verdict_line(page)
    assert ("Judged against the learned baseline of local:node (3 runs, accepted "
            "2026-11-20 09:30 UTC)") in line, line
    assert "a floor" not in line and "baseline accept" not in line, line


def test_a_baseline_accepted_again_after_the_run_is_not_passed_off_as_the_one(tmp_path):
    session, folder = judged_by_its_baseline(tmp_path, "2026-11-30T00:00:00Z")
    line = verdict.one_line_verdict([session], baselines=folder)
    assert "local-node.yaml, since accepted again, on 2026-11-30 00:00 UTC" in line, line
    assert "3 runs" not in line


def test_skipped_cases_collapse_into_one_line_per_reason(tmp_path):
    data = minimal_report()
    # ReFrame keeps no reason for a skip: the checks record it (skip_reason)
    skipped = dict(data["runs"][0]["testcases"][0], result="skip", perfvalues={},
                   skip_reason="no image x: run `make container`")
    data["runs"][0]["testcases"] += [dict(skipped, name=f"S{i}", unique_name=f"S{i}")
                                     for i in range(3)]
    page = report.render_report([session_from(data, tmp_path)])
    assert "3 cases skipped, 1 reason" in page
    assert page.count("no image x: run `make container`") == 1 + 3    # summary, case rows


def test_figures_read_as_a_person_reads_them():
    from netbench.report.reasons import readable
    assert readable(224027.6, "Mbit/s") == "224 Gbit/s"
    assert readable(940.0, "Mbit/s") == "940 Mbit/s"
    assert readable(41236, "B") == "40.3 KiB"
    assert readable(0.5876, "us") == "0.588 us"


def test_a_fabric_sweep_shows_its_heat_maps_and_suspects(tmp_path):
    suspect = {"kind": "node", "names": ["n3"], "metric": "bw_Mbps@8388608", "value": 300.0,
               "fleet_median": 950.0, "reference": None, "direction": "both",
               "evidence": [{"src": "n1", "dst": "n3", "metric": "bw_Mbps@8388608",
                             "value": 300.0, "bound": 712.5}]}
    page = report.render_report([session_from(sweep_report([suspect]), tmp_path)])
    section = page[page.index('id="sweep"'):]
    # 12.5 s, rounded half to even; the rounds and how they ran (#36)
    assert "3 nodes, 6 directed pairs, 12 s in 3 rounds, each round's pairs at once" in section
    assert "1 suspect" in section and ">n3<" in section and "n1→n3 300" in section
    assert "Re-measured before naming: n1→n3" in section
    assert section.count("<svg") == 1 and "bandwidth at 8 MiB" in section


def test_a_healthy_sweep_names_no_suspect(tmp_path):
    page = report.render_report([session_from(sweep_report([]), tmp_path)])
    assert "no suspect" in page[page.index('id="sweep"'):]


def test_a_published_sweep_leaves_suspects_json_and_a_drain_script(tmp_path):
    suspect = {"kind": "node", "names": ["n3"], "metric": "bw_Mbps@8388608", "value": 300.0,
               "fleet_median": 950.0, "reference": None, "direction": "both",
               "evidence": [{"src": "n1", "dst": "n3", "metric": "bw_Mbps@8388608",
                             "value": 300.0, "bound": 712.5}]}
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(sweep_report([suspect])))
    reports = tmp_path / "reports"
    reports.mkdir()
    folder = report.publish(raw, reports)
    found = json.loads((folder / "suspects.json").read_text())
    assert [s["names"] for sw in found["sweeps"] for s in sw["suspects"]] == [["n3"]]
    script = (reports / "latest" / "drain.sh").read_text()
    assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0
    commands = [line for line in script.splitlines() if "scontrol" in line]
    assert commands and all(line.startswith("#") for line in commands), script
    assert all("NodeName=n3" in line for line in commands if "NodeName=" in line)
    # published again, the session's folder of netbench's own files is replaced
    assert report.publish(raw, reports) == folder


def test_a_session_without_a_sweep_writes_no_suspects(tmp_path):
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(minimal_report()))
    (tmp_path / "reports").mkdir()
    folder = report.publish(raw, tmp_path / "reports")
    assert not (folder / "suspects.json").exists() and not (folder / "drain.sh").exists()


def test_the_headline_shows_the_path_the_library_said_it_used(tmp_path):
    """The record's path (netbench.checks.datapath) in its own column, the
    library's line as the cell's title, escaped; a path the library did
    not name makes the case inconclusive, with the report's sentence."""
    data = minimal_report(latency=0.5)
    record = data["runs"][0]["testcases"][0]["record"]
    record["path"] = {"transport": "shm", "provider": "posix", "device": "memory",
                      "evidence": "Rank: 1, Local_rank: 1 [ 0, 0 ] <b>",
                      "verdict": {"verdict": "pass", "code": None, "asked": "shm",
                                  "used": "shm", "launch": 1, "launches": 1, "evidence": ""}}
    results_record.check(record, "<test>")
    page = report.render_report([session_from(data, tmp_path)])
    headline = page[page.index('id="headline-1"'):page.index("</table>",
                                                           page.index('id="headline-1"'))]
    assert "<th>path the library used</th>" in headline
    assert "shm (posix, memory)" in headline
    assert 'title="Rank: 1, Local_rank: 1 [ 0, 0 ] &lt;b&gt;"' in headline

    unknown = {"verdict": "inconclusive", "code": "path_unknown", "asked": "shm",
               "used": "unknown", "launch": 1, "launches": 1, "evidence": ""}
    record["path"] = {"transport": "unknown", "provider": "", "device": "", "evidence": "",
                      "verdict": unknown}
    record["verdict"] = "inconclusive"
    record["verdicts"] = {"path": {**unknown, "value": None, "lo": None, "hi": None,
                                   "reason": datapath.sentence(unknown)}}
    results_record.check(record, "<test>")
    page = report.render_report([session_from(data, tmp_path, "u.json")])
    assert "Could not tell: 1 of 1 cases inconclusive" in page
    assert "could not tell which path the library used: asked shm" in page


def report_imports():
    """{module: the report modules it imports}, function-local imports too
    (a deferred import hides a circle; it does not break it)."""
    import ast
    folder = Path(report.__file__).parent
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    found = {}
    for name in modules:
        tree = ast.parse((folder / f"{name}.py").read_text())
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names |= {node.module} if node.module else {a.name for a in node.names}
        found[name] = {n.split(".")[0] for n in names} & modules
    return found


def test_the_report_modules_import_each_other_in_no_circle():
    import graphlib
    try:
        tuple(graphlib.TopologicalSorter(report_imports()).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"report/ modules import each other in a circle: {err.args[1]}")

"""The report at scale (#23): what makes a 10,000-case session publish in
seconds holds the same answers.  The split search of the protocol switch
equals a fit per window; a panel of hundreds of curves is drawn as their
spread, with the furthest by name; a run report is validated once per
publish, and a fault deep in its bulk arrays is still named by key.
Speed itself is measured by `make bench-report`, not here."""

import json
import os

import numpy as np
import pytest

from netbench import datafiles, report
from netbench.datafiles import DataError
from netbench.report import analysis
from netbench.report import plots, sessions
from netbench.results import record as results_record
from netbench.tools import reportbench

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

SIZES = 2.0 ** np.arange(0, 24)


def test_split_costs_equal_a_least_squares_fit_per_window():
    rng = np.random.default_rng(23)
    for trial in range(200):
        m = int(rng.integers(6, 25))
        n = SIZES[:m]
        t = (rng.uniform(0.3, 50) + n / rng.uniform(10, 30000)) \
            * (1 + 0.05 * rng.standard_normal(m))
        t = np.abs(t) + 1e-3
        splits = np.arange(3, m - 2)
        expected = [analysis._weighted_fit(n[:k], t[:k])[2] ** 2 * k
                    + analysis._weighted_fit(n[k:], t[k:])[2] ** 2 * (m - k) for k in splits]
        got = analysis._split_costs(n, t, splits)
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-12), trial
        assert int(np.argmin(got)) == int(np.argmin(expected)), trial


def curves(count, panel="mpich (wheel)"):
    """`count` bandwidth curves of one panel, one of them far below the rest."""
    rng = np.random.default_rng(5)
    out = []
    for i in range(count):
        rate = 90.0 if i == 17 else 900.0 * rng.uniform(0.95, 1.05)
        out.append((f"case {i}", list(SIZES), list(SIZES * 8 / (20 + SIZES * 8 / rate)), i,
                    panel))
    return out


def test_a_panel_of_hundreds_of_curves_is_drawn_as_their_spread():
    panels = plots.panels_of(curves(300))
    assert list(panels) == ["mpich (wheel): 300 curves"]
    lines, baseline, panel, spread = panels["mpich (wheel): 300 curves"]
    assert spread.count == 300 and len(lines) == plots.SPREAD_OUTLIERS
    assert lines[0][0] == "case 17"                  # the slow one, by name
    low, median, high = spread.low[-1], spread.median[-1], spread.high[-1]
    assert low < median < high and 850 < median < 950
    svg = plots.curve_plot(curves(300), "message size", "Mbit/s", "bandwidth")
    assert "median of 300 curves" in svg and "case 17" in svg and "case 18" not in svg
    assert svg.count('id="axes_') <= 2


def test_a_panel_of_few_curves_is_drawn_line_by_line():
    panels = plots.panels_of(curves(plots.SPREAD_ABOVE))
    assert all(spread is None for *_, spread in panels.values())
    assert sum(len(lines) for lines, *_ in panels.values()) == plots.SPREAD_ABOVE


def test_publish_validates_a_run_report_once(tmp_path, monkeypatch):
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(reportbench.synthetic_report(40)))
    (tmp_path / "reports").mkdir()
    checked = []
    validate = datafiles.validate

    def counting(data, schema, *args, **kwargs):
        if schema is sessions.RUN_REPORT_SCHEMA:
            checked.append(data["session_info"]["uuid"])
        return validate(data, schema, *args, **kwargs)
    monkeypatch.setattr(datafiles, "validate", counting)
    monkeypatch.setattr(sessions, "_VALIDATED", set(), raising=False)
    folder = report.publish(raw, tmp_path / "reports")
    assert len(checked) == 1, checked
    assert (folder / "index.html").exists()
    # other bytes are validated again: a changed report is not trusted
    data = json.loads(raw.read_text())
    data["runs"][0]["testcases"][39]["record"]["series"][0]["rows"][23]["Mbps"] = "fast"
    raw.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"testcases\[39\]\.record\.series\[0\]\.rows\[23\]"
                                        r"\.Mbps: expected a finite number"):
        report.load_session(raw)


@pytest.mark.parametrize("change, key", [
    (lambda p: p.update(latency_us=float("nan")), "latency_us"),
    (lambda p: p["bw_Mbps"].update({"8388608": True}), "bw_Mbps.8388608"),
    (lambda p: p.update(src=7), "src"),
    (lambda p: p.pop("dst"), "dst"),
])
def test_a_bad_fleet_pair_deep_in_a_record_is_named(change, key):
    pairs = [{"src": f"n{i}", "dst": f"n{j}", "latency_us": 20.0,
              "bw_Mbps": {"8388608": 900.0}} for i in range(40) for j in range(40) if i != j]
    record = results_record.make("sweep", "mpich tcp", [], {"mpi_family": "mpich"})
    record["fleet"] = {"hosts": [f"n{i}" for i in range(40)], "pairs": pairs, "suspects": []}
    results_record.check(record, "r.json")
    change(pairs[1500])
    with pytest.raises(DataError, match=rf"r\.json: fleet\.pairs\[1500\]\.{key}"):
        results_record.check(record, "r.json")


# -- a large fleet's sweep on the page ----------------------------------------

def sweep_session(tmp_path, n, slow):
    """A session of one LinkSweep case over n nodes, `slow` at a third of
    the rate, judged by netbench.fleet; its suspects as the record keeps
    them."""
    from netbench.fleet import judge
    rng = np.random.default_rng(n)
    hosts = [f"node{i:04d}" for i in range(n)]
    measurements = {}
    for a in hosts:
        for b in hosts:
            if a != b:
                rate = 900.0 / (3 if slow in (a, b) else 1) * rng.uniform(0.92, 1.08)
                measurements[(a, b)] = {"latency_us": 20.0 * rng.uniform(0.92, 1.08)
                                        if a < b else None, "bw_Mbps": {8388608: rate}}
    found = json.loads(judge.judge(measurements).to_json())
    record = results_record.make("sweep", "mpich tcp", [], {"mpi_family": "mpich"})
    record["fleet"] = {"hosts": hosts, "suspects": found["suspects"], "findings": [],
                       "pairs": [{"src": a, "dst": b, "latency_us": f["latency_us"],
                                  "bw_Mbps": {"8388608": f["bw_Mbps"][8388608]}}
                                 for (a, b), f in measurements.items()]}
    data = reportbench.synthetic_report(1)
    data["runs"][0]["testcases"][0].update(name="LinkSweep", display_name="LinkSweep",
                                           record=record, perfvalues={}, result="fail")
    path = tmp_path / "run-report.json"
    path.write_text(json.dumps(data))
    return report.load_session(path)


def test_a_large_fleet_is_a_raster_a_node_table_and_the_suspects_pairs(tmp_path):
    page = report.render_report([sweep_session(tmp_path, 60, slow="node0041")])
    section = page[page.index('id="sweep"'):page.index('id="curves"')]
    assert "60 nodes, 3540 directed pairs" in section and "1 suspect" in section
    assert '<img class="raster"' in section and "<svg" not in section
    table = section[section.index('class="node-table"'):]
    rows = table.split("<tr")[2:]
    assert len(rows) == 60 and 'class="fail"><td>node0041</td>' in rows[0]
    assert float(rows[0].split('"num">')[1].split("<")[0]) == pytest.approx(300, rel=0.1)
    # the suspect's 118 directed pairs: the page shows the furthest 12, and
    # suspects.json has all
    assert "and 106 more pairs (suspects.json)" in section


def test_a_small_fleet_keeps_every_cells_figure(tmp_path):
    page = report.render_report([sweep_session(tmp_path, 6, slow="node0002")])
    section = page[page.index('id="sweep"'):page.index('id="curves"')]
    assert section.count("<svg") == 1 and "<img" not in section
    assert 'class="node-table"' not in section and "more pairs" not in section


def test_the_raster_of_600_nodes_keeps_the_slow_nodes_row(tmp_path):
    """A pixel per cell at least: at 100 dpi nearest-neighbour sampling
    would drop rows, the slow node's among them."""
    import base64
    import io
    import re

    import matplotlib.image
    page = report.render_report([sweep_session(tmp_path, 600, slow="node0333")])
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1))
    pixels = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    lowest = np.array(plots.pyplot().get_cmap("RdYlGn").resampled(plots.RASTER_LEVELS)(0)[:3])
    red = np.all(np.abs(pixels - lowest) < 0.02, axis=2)
    # its row and column, less the diagonal and the axes' frame
    assert red.sum(axis=1).max() >= 0.98 * 599 and red.sum(axis=0).max() >= 0.98 * 599
    assert len(page) < 4 * 2**20


# -- earlier sessions: read as summaries -------------------------------------

def published(tmp_path, days):
    """reports/ with one 30-case session per day of `days` in its folder, as
    publish leaves it (its page is not drawn: only run reports are read
    here); their run reports."""
    reports = tmp_path / "reports"
    reports.mkdir()
    raws = []
    for day in days:
        data = reportbench.dated(reportbench.synthetic_report(30, seed=day), day)
        for tc in data["runs"][0]["testcases"]:
            for entry in tc["perfvalues"].values():
                entry[0] *= 1 + day / 10                 # a trend to follow
        raw = tmp_path / f"r{day}.json"
        raw.write_text(json.dumps(data))
        folder = reports / report.load_session(raw).name
        folder.mkdir()
        (folder / "run-report.json").write_text(raw.read_text())
        raws.append(raw)
    return reports, raws


def test_history_from_summaries_equals_history_from_whole_sessions(tmp_path):
    reports, raws = published(tmp_path, [0, 1, 2])
    latest = report.load_session(raws[-1])
    whole = [s for s in sessions.published_sessions(reports) if s.name != latest.name]
    summaries = [s for s in sessions.published_sessions(reports, summary=True)
                 if s.name != latest.name]
    assert [s.name for s in summaries] == [s.name for s in whole] and len(whole) == 2
    history = report.history_for(latest, summaries)
    assert history == report.history_for(latest, whole) and len(history) == 60
    assert all(len(h["values"]) == 3 for h in history.values())
    # a summary keeps the index's and the history's fields, not the curves
    case = summaries[0].testcases[0]
    assert set(case) == set(sessions.SUMMARY_KEYS) and "record" not in case


def test_a_summary_names_a_bad_figure_of_an_earlier_session(tmp_path):
    reports, raws = published(tmp_path, [0])
    folder = next(p for p in reports.iterdir() if sessions.SESSION_NAME.fullmatch(p.name))
    data = json.loads((folder / "run-report.json").read_text())
    key = next(iter(data["runs"][0]["testcases"][7]["perfvalues"]))
    data["runs"][0]["testcases"][7]["perfvalues"][key][0] = "fast"
    (folder / "run-report.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=rf"testcases\[7\]\.perfvalues\.{key}\[0\]"):
        sessions.load_summary(folder / "run-report.json")
    assert sessions.published_sessions(reports, summary=True) == []


def test_a_bad_case_name_of_an_earlier_session_is_named(tmp_path):
    reports, _ = published(tmp_path, [0])
    folder = next(p for p in reports.iterdir() if sessions.SESSION_NAME.fullmatch(p.name))
    data = json.loads((folder / "run-report.json").read_text())
    data["runs"][0]["testcases"][4]["display_name"] = ["not", "a", "name"]
    (folder / "run-report.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"testcases\[4\]\.display_name: expected a string"):
        sessions.load_summary(folder / "run-report.json")
    with pytest.raises(DataError, match="cannot read"):
        sessions.load_summary(folder / "missing.json")


def really_published(tmp_path):
    """A synthetic 30-case session published as netbench publishes one: the
    reports folder and the session's folder."""
    reports = tmp_path / "reports"
    reports.mkdir()
    raw = tmp_path / "r.json"
    raw.write_text(json.dumps(reportbench.dated(reportbench.synthetic_report(30, seed=1), 1)))
    return reports, report.publish(raw, reports)


def same_size_garbage(path):
    """`path` overwritten with as many bytes that are no JSON, its mtime put
    back: a run report the index can only list from its summary."""
    stat = path.stat()
    path.write_bytes(b"x" * stat.st_size)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_the_index_reads_a_session_s_summary_and_the_run_report_once_they_differ(
        tmp_path, monkeypatch):
    reports, folder = really_published(tmp_path)
    run_report = folder / "run-report.json"
    whole = sessions.read_summary(run_report)
    entry = json.loads((folder / sessions.SUMMARY_FILE).read_text())
    assert entry["summary"] == whole.report and run_report.stat().st_size > \
        10 * (folder / sessions.SUMMARY_FILE).stat().st_size

    # the run report as it was when summarised: read from the summary alone
    same_size_garbage(run_report)
    monkeypatch.setattr(sessions, "_SUMMARIES", {})
    (listed,) = sessions.published_sessions(reports, summary=True)
    assert listed.report == whole.report and listed.name == folder.name
    # another mtime: the summary is not this run report's, which is read (and
    # here refused)
    os.utime(run_report)
    monkeypatch.setattr(sessions, "_SUMMARIES", {})
    assert sessions.published_sessions(reports, summary=True) == []


@pytest.mark.parametrize("spoil", ["symlink", "not json", "bad figure", "no summary"])
def test_a_summary_that_is_not_netbench_s_is_passed_over_for_the_run_report(
        tmp_path, monkeypatch, spoil):
    reports, folder = really_published(tmp_path)
    summary = folder / sessions.SUMMARY_FILE
    entry = json.loads(summary.read_text())
    if spoil == "symlink":          # to a copy of itself: a link is never followed
        copy = tmp_path / "elsewhere.json"
        copy.write_text(summary.read_text())
        summary.unlink()
        summary.symlink_to(copy)
    elif spoil == "not json":
        summary.write_text("{")
    elif spoil == "bad figure":
        next(iter(entry["summary"]["runs"][0]["testcases"][0]["perfvalues"].values()))[0] = "x"
        summary.write_text(json.dumps(entry))
    else:
        del entry["summary"]
        summary.write_text(json.dumps(entry))
    same_size_garbage(folder / "run-report.json")
    monkeypatch.setattr(sessions, "_SUMMARIES", {})
    # only the run report could list it, and it is garbage: not listed, no traceback
    assert sessions.published_sessions(reports, summary=True) == []

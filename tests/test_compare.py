"""`netbench compare` on a recorded session (tests/data/compare): the change
per figure and size, its direction by the unit, and whether it is more
than noise (netbench/report/compare.py)."""

import copy
import json
from pathlib import Path

import pytest

from netbench import cli
from netbench.report import compare, compare_page, sessions, verdict
from netbench.tools import reportbench

RECORDED = Path(__file__).parent / "data" / "compare" / "pingpong-shm-openmpi.json"
TIME_COLUMNS = ("usec", "usec_min", "usec_max", "usec_lo", "usec_hi")
RATE_COLUMNS = ("Mbps", "MBps")


def recorded():
    return json.loads(RECORDED.read_text())


def scaled(report, factor, uuid="bbbbbbbb-0000-4000-8000-000000000000"):
    """The recorded session with every time `factor` times longer: every
    launch's rows, the series, the verdicts and the perfvalues (rates
    divided by it), as a slower system would have measured."""
    report = copy.deepcopy(report)
    report["session_info"].update(uuid=uuid, time_start="20261124T010000+0000",
                                  time_start_unix=report["session_info"]["time_start_unix"] + 60)
    for tc in report["runs"][0]["testcases"]:
        record = tc["record"]
        rows = [r for s in record["series"] for r in s["rows"]] + [
            r for launches in record["runs"].values() for launch in launches
            for r in launch["rows"]]
        for row in rows:
            for c in TIME_COLUMNS:
                if c in row:
                    row[c] *= factor
            for c in RATE_COLUMNS:
                if c in row:
                    row[c] /= factor
        for var, decided in record["verdicts"].items():
            unit = record["references"][var]["unit"]
            for k in ("value", "lo", "hi"):
                decided[k] = decided[k] * factor if unit == "us" else decided[k] / factor
        for key, entry in tc["perfvalues"].items():
            if entry[4] == "us":
                entry[0] *= factor
            elif entry[4].endswith("/s"):
                entry[0] /= factor
    return report


def session(report, tmp_path, name):
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return sessions.load_session(path)


def by_figure(comparison, figure):
    (case,) = comparison.cases
    return [c for c in case.figures + case.sizes if c.figure == figure]


def test_the_direction_comes_from_the_unit():
    assert compare.better_side("us") == "lower"
    assert compare.better_side("Mbit/s") == "higher" and compare.better_side("MB/s") == "higher"
    assert compare.better_side("B") is None and compare.better_side("%") is None


def test_identical_sessions_are_within_noise(tmp_path):
    a = session(recorded(), tmp_path, "a.json")
    comparison = compare.compare_sessions(a, a)
    calls = {c.call for c in comparison.changes()}
    assert calls <= {compare.NOISE, compare.SAME}, calls
    # every figure with an interval: within noise, not just unchanged
    assert all(c.call == compare.NOISE for c in comparison.changes()
               if c.significance != compare.NO_INTERVAL)
    assert comparison.counts()[compare.NOISE] > 40


def slowed_threefold(tmp_path, reverse=False):
    """The recorded session against itself with every time x3 (and every
    rate /3): (comparison, its latency change, its peak change)."""
    a = session(recorded(), tmp_path, "a.json")
    b = session(scaled(recorded(), 3.0), tmp_path, "b.json")
    comparison = compare.compare_sessions(*((b, a) if reverse else (a, b)))
    (latency,) = by_figure(comparison, "latency")
    (peak,) = by_figure(comparison, "peak_bw")
    return comparison, latency, peak


def test_a_latency_rise_and_a_bandwidth_fall_are_both_worse(tmp_path):
    comparison, latency, peak = slowed_threefold(tmp_path)
    assert latency.pct == pytest.approx(200.0) and latency.call == compare.WORSE
    assert peak.pct == pytest.approx(-100 * 2 / 3) and peak.call == compare.WORSE
    sizes = by_figure(comparison, "usec") + by_figure(comparison, "Mbps")
    assert len(sizes) == 2 * 21 and {c.direction for c in sizes} == {compare.WORSE}
    # significant where the interval is narrower than the factor: on this
    # busy host, about a third of the sizes
    for c in sizes:
        narrow = c.a.hi < 3.0 * c.a.lo
        assert c.call == (compare.WORSE if narrow else compare.NOISE), c
    assert sum(c.call == compare.WORSE for c in sizes) >= 10
    assert compare.BETTER not in comparison.counts()
    # MBps repeats Mbps in another unit: shown once
    assert not by_figure(comparison, "MBps")


def test_the_other_way_round_is_better(tmp_path):
    comparison, latency, peak = slowed_threefold(tmp_path, reverse=True)
    assert latency.call == compare.BETTER and peak.call == compare.BETTER
    assert compare.WORSE not in comparison.counts()


def version_1(report):
    """The recorded session as a record of version 1 holds it: its series
    only, no launches and no verdicts."""
    report = copy.deepcopy(report)
    for tc in report["runs"][0]["testcases"]:
        record = tc["record"]
        record["version"] = 1
        for key in ("runs", "verdicts", "verdict"):
            record.pop(key)
    return report


def test_records_of_version_1_compare_as_points(tmp_path):
    a = session(version_1(recorded()), tmp_path, "a.json")
    b = session(version_1(scaled(recorded(), 1.01)), tmp_path, "b.json")
    comparison = compare.compare_sessions(a, b)
    assert {c.significance for c in comparison.changes()} == {compare.NO_INTERVAL}
    (latency,) = by_figure(comparison, "latency")
    assert latency.call == "worse, no interval"
    assert latency.pct == pytest.approx(1.0)


def test_cases_in_one_session_only_are_named(tmp_path):
    report = recorded()
    other = copy.deepcopy(report)
    other["runs"][0]["testcases"][0]["environ"] = "mpich"
    comparison = compare.compare_sessions(session(report, tmp_path, "a.json"),
                                          session(other, tmp_path, "b.json"))
    assert comparison.cases == []
    assert [k.split(" | ")[1] for k in comparison.only_a] == ["openmpi"]
    assert [k.split(" | ")[1] for k in comparison.only_b] == ["mpich"]


def test_the_command_prints_and_renders_the_change(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(recorded()))
    b.write_text(json.dumps(scaled(recorded(), 3.0)))
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    latency = next(line for line in out.splitlines() if line.strip().startswith("latency"))
    assert "+200.0 %" in latency and latency.rstrip().endswith("worse")
    assert "\033[" not in out            # no colour codes outside a terminal
    page = (tmp_path / "out" / "index.html").read_text()
    worse = compare.compare_sessions(sessions.load_session(a),
                                     sessions.load_session(b)).counts()[compare.WORSE]
    assert page.count('<tr class="worse">') == worse >= 12 and "+200.0 %" in page
    counts = page.split('id="counts"')[1].split("</p>")[0]
    assert f"<span>{worse} worse</span>" in counts and "better" not in counts


def test_the_command_says_what_it_cannot_find(tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(recorded()))
    assert cli.main(["compare", str(a), "no-such-session"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-session" in err[0] and "not a run report" in err[0]


def test_text_without_every_size_shows_the_worst_first(tmp_path):
    a = session(recorded(), tmp_path, "a.json")
    b = session(scaled(recorded(), 3.0), tmp_path, "b.json")
    comparison = compare.compare_sessions(a, b)
    short = compare_page.text(comparison, worst=5)
    full = compare_page.text(comparison, every_size=True)
    shown = [line for line in short if line.startswith("  ") and "figure" not in line]
    assert len(shown) == 5 and all(line.endswith("  worse") for line in shown)
    # every size of the case with --all: each change a line
    assert sum(line.startswith("  ") and "figure" not in line for line in full) == \
        len(comparison.changes())
    assert "the 5 worst of" in "\n".join(short) and "--all" in "\n".join(short)
    assert short[-1] == full[-1] and short[-1].startswith("netbench compare: ")


HOSTILE = "PingPong\x1b]0;owned\x07\x1b[2J %variant=blocking\u202e"


def hostile(report):
    """The recorded session with a case name that would retitle and clear a
    terminal, and an environment name that would recolour it."""
    report = copy.deepcopy(report)
    for tc in report["runs"][0]["testcases"]:
        tc["display_name"] = tc["name"] = HOSTILE
        tc["environ"] = "openmpi\x1b[31m"
    return report


@pytest.mark.parametrize("every_size", [[], ["--all"]])
def test_case_names_reach_the_terminal_escaped(tmp_path, capsys, every_size):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(hostile(recorded())))
    slower = hostile(scaled(recorded(), 3.0))
    only_b = copy.deepcopy(slower["runs"][0]["testcases"][0])
    only_b["environ"] = "mpich\x1b]0;b\x07"
    slower["runs"][0]["testcases"].append(only_b)
    b.write_text(json.dumps(slower))
    cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "out"), *every_size])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "PingPong\\x1b]0;owned\\x07\\x1b[2J %variant=blocking\\u202e" in out
    assert "only in B: PingPong" in out and "mpich\\x1b]0;b\\x07" in out


def test_a_session_ten_times_slower_exits_with_a_loss(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(recorded()))
    b.write_text(json.dumps(scaled(recorded(), 10.0)))
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "ab")]) == \
        verdict.EXIT_LOSS == 1
    assert " worse" in capsys.readouterr().out.splitlines()[-2]
    # B faster: no loss
    assert cli.main(["compare", str(b), str(a), "-o", str(tmp_path / "ba")]) == 0
    # the same session: every change within noise
    assert cli.main(["compare", str(a), str(a), "-o", str(tmp_path / "aa")]) == 0


def test_a_change_worse_only_without_an_interval_is_not_a_loss(tmp_path, capsys):
    """The exit follows the comparison's own calls: a record of version 1
    has no interval, so nothing in it is beyond the noise."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(version_1(recorded())))
    b.write_text(json.dumps(version_1(scaled(recorded(), 10.0))))
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "ab")]) == 0
    assert "worse, no interval" in capsys.readouterr().out


def test_sessions_with_no_case_in_common_exit_nothing_to_compare(tmp_path, capsys):
    report = recorded()
    other = copy.deepcopy(report)
    other["runs"][0]["testcases"][0]["environ"] = "mpich"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(report))
    b.write_text(json.dumps(other))
    code = cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "ab")])
    assert code == compare.EXIT_NOTHING_IN_COMMON == verdict.EXIT_INCONCLUSIVE
    assert code not in (0, verdict.EXIT_LOSS)
    out = capsys.readouterr().out.splitlines()
    (said,) = [line for line in out if "nothing to compare" in line]
    assert said == ("netbench compare: no case in common: nothing to compare (1 cases only "
                    "in A, 1 only in B; exit 3)")


def test_a_comparison_of_many_cases_is_summarised_and_its_page_bounded(tmp_path, capsys):
    """300 cases of 24 sizes, every 5th 10x slower in B: the terminal shows
    the worst changes and the counts, the page the worst in detail and one
    row per case: neither grows with the cases' sizes."""
    report = reportbench.synthetic_report(300)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(reportbench.compare_side(report)))
    b.write_text(json.dumps(reportbench.compare_side(reportbench.dated(report, 1),
                                                      slower=10.0, every=5)))
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "ab")]) == 1
    out = capsys.readouterr().out.splitlines()
    shown = [line for line in out if line.startswith("  ") and "figure" not in line]
    assert len(shown) == compare_page.WORST_SHOWN
    assert all(line.endswith("  worse") and ("+900.0 %" in line or "-90.0 %" in line)
               for line in shown)
    assert len(out) <= 2 * compare_page.WORST_SHOWN + 5
    assert out[-2].startswith("netbench compare: ") and "worse" in out[-2]
    page = (tmp_path / "ab" / "index.html").read_text()
    rows = page.count("<tr")
    assert rows <= compare_page.WORST_ON_PAGE + 300 + 2
    assert page.count('<tr class="case') == 300
    assert page.count('<tr class="worse">') == compare_page.WORST_ON_PAGE
    # --all: every size of every case
    cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "all"), "--all"])
    every = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("  ") and "figure" not in line for line in every) > 300 * 24

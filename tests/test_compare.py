"""`netbench compare` on a recorded session (tests/data/compare): the change
per figure and size, its direction by the unit, and whether it is more
than noise (netbench/report/compare.py)."""

import copy
import json
from pathlib import Path

import pytest

from netbench import cli
from netbench.judgement import knobs as judging_knobs
from netbench.report import change, compare, compare_page, sessions, sides, verdict
from netbench.tools import reportbench

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

RECORDED = Path(__file__).parent / "data" / "compare" / "pingpong-shm-openmpi.json"
#: a real session whose case launched 4 times (tests/data/tune/README.md):
#: enough launches for the model to call a loss (judging.yaml's min_to_fail)
LAUNCHED = Path(__file__).parent / "data" / "tune" / "gige-jumbo" / "after2.json"
TIME_COLUMNS = ("usec", "usec_min", "usec_max", "usec_lo", "usec_hi")
RATE_COLUMNS = ("Mbps", "MBps")


def recorded():
    return json.loads(RECORDED.read_text())


def launched():
    return json.loads(LAUNCHED.read_text())


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


def slowed_threefold(tmp_path, reverse=False, source=launched):
    """A recorded session against itself with every time x3 (and every
    rate /3): the Comparison."""
    a = session(source(), tmp_path, "a.json")
    b = session(scaled(source(), 3.0), tmp_path, "b.json")
    return compare.compare_sessions(*((b, a) if reverse else (a, b)))


def test_a_slower_session_is_worse_where_the_model_fails_every_launch(tmp_path):
    """Each size: B's four launches against A's slowest launch's figure
    (model.judge, kind session): worse where all of them lie beyond it by
    more than min_change.session, within noise where a launch of this busy
    emulated link's (10 ms stalls, a phase of 2-6x at small sizes) reaches
    back to it."""
    comparison = slowed_threefold(tmp_path)
    sizes = by_figure(comparison, "usec") + by_figure(comparison, "Mbps")
    assert len(sizes) == 2 * 24 and {c.direction for c in sizes} == {compare.WORSE}
    knobs = judging_knobs.load()
    for c in sizes:
        assert len(c.a_launches) == len(c.b_launches) == 4
        assert c.call in (compare.WORSE, compare.NOISE), c
        if c.call == compare.WORSE:
            n = c.decision.numbers
            assert (c.decision.code, n["launches"], n["kind"]) == ("beyond", 4, "session")
            assert n["min_change"] == knobs.min_change["session"] and n["ratio"] > 1
            assert n["bound"] == pytest.approx(change.worst(c.a_launches, "lower").value
                                               if c.unit == "us" else
                                               change.worst(c.a_launches, "higher").value)
        else:
            assert c.decision is None
    assert sum(c.call == compare.WORSE for c in sizes) >= 8
    (usec_8mib,) = [c for c in sizes if c.figure == "usec" and c.bytes == 8 << 20]
    assert usec_8mib.pct == pytest.approx(200.0) and usec_8mib.call == compare.WORSE
    # the verdict's figure: one launch's interval, too few to call a loss on
    (peak,) = by_figure(comparison, "peak_bw")
    assert peak.pct == pytest.approx(-100 * 2 / 3)
    assert peak.call == compare.FEW_LAUNCHES_CALLS[compare.WORSE] == "worse, too few launches"
    assert compare.BETTER not in comparison.counts()
    # MBps repeats Mbps in another unit: shown once
    assert not by_figure(comparison, "MBps")


def test_one_launch_a_side_is_too_few_to_call_a_loss(tmp_path):
    """The recorded shared-memory session launched once (its thresholds
    passed it): x3 is beyond A's best in that launch at the sizes whose
    interval lies wholly beyond, but a loss needs min_to_fail launches, as
    the check would have launched again: too few launches, not worse."""
    comparison = slowed_threefold(tmp_path, source=recorded)
    assert compare.WORSE not in comparison.counts()
    few = [c for c in comparison.changes() if c.significance == compare.FEW_LAUNCHES]
    assert len(few) >= 10 and {c.call for c in few} == {"worse, too few launches"}
    for c in few:
        assert (c.decision.verdict, c.decision.numbers["launches"]) == ("undecided", 1)
        assert c.decision.numbers["ratio"] > 1 and c.decision.code == "straddles"
    assert compare.exit_code(comparison) == verdict.EXIT_PASS


def test_the_same_settings_twice_on_a_noisy_link_change_nothing(tmp_path):
    """Two sessions of the same settings, 4 launches each, one of them
    through a phase of the host that made small messages 2-6x slower
    (tests/data/tune/README.md): no size is called either way, as one
    lucky launch made them against the other side's best launch."""
    tune = LAUNCHED.parent
    comparison = compare.compare_sessions(sessions.load_session(tune / "after1.json"),
                                          sessions.load_session(tune / "after2.json"))
    counts = comparison.counts()
    assert not counts.get(compare.WORSE) and not counts.get(compare.BETTER), counts
    assert counts[compare.NOISE] >= 40 and compare.exit_code(comparison) == 0


def test_the_other_way_round_is_better(tmp_path):
    comparison = slowed_threefold(tmp_path, reverse=True)
    (usec_8mib,) = [c for c in by_figure(comparison, "usec") if c.bytes == 8 << 20]
    assert usec_8mib.call == compare.BETTER and usec_8mib.decision.code == "beyond"
    assert comparison.counts()[compare.BETTER] >= 8
    assert compare.WORSE not in comparison.counts()
    assert compare.exit_code(comparison) == 0


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
    a.write_text(json.dumps(launched()))
    b.write_text(json.dumps(scaled(launched(), 3.0)))
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "out"), "--all"]) == 1
    out = capsys.readouterr().out
    at_8mib = next(line for line in out.splitlines()
                   if line.strip().startswith("usec") and " 8 MiB " in line)
    assert "+200.0 %" in at_8mib and at_8mib.rstrip().endswith("worse")
    assert "\033[" not in out            # no colour codes outside a terminal
    page = (tmp_path / "out" / "index.html").read_text()
    worse = compare.compare_sessions(sessions.load_session(a),
                                     sessions.load_session(b)).counts()[compare.WORSE]
    assert page.count('<tr class="worse">') == worse >= 8 and "+200.0 %" in page
    # each call's reason, the model's code rendered in words (reasons.py)
    assert 'title="all 4 launches beyond the bound (at most ' in page
    counts = page.split('id="counts"')[1].split("</p>")[0]
    assert f"<span>{worse} worse</span>" in counts and "better" not in counts


def test_the_command_says_what_it_cannot_find(tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(recorded()))
    assert cli.main(["compare", str(a), "no-such-session"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-session" in err[0] and "not a run report" in err[0]


def test_text_without_every_size_shows_the_worst_first(tmp_path):
    a = session(launched(), tmp_path, "a.json")
    b = session(scaled(launched(), 3.0), tmp_path, "b.json")
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
    a.write_text(json.dumps(launched()))
    b.write_text(json.dumps(scaled(launched(), 10.0)))
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "ab")]) == \
        verdict.EXIT_LOSS == 1
    assert " worse" in capsys.readouterr().out.splitlines()[-2]
    # B faster: no loss
    assert cli.main(["compare", str(b), str(a), "-o", str(tmp_path / "ba")]) == 0
    # the same session: every change within noise
    assert cli.main(["compare", str(a), str(a), "-o", str(tmp_path / "aa")]) == 0


def test_one_launch_ten_times_slower_is_no_loss_shown_and_says_why(tmp_path, capsys):
    """Beyond in the one launch each case has: the check would have
    launched again before calling it a loss, the comparison cannot, so it
    shows none (as a record without intervals shows none) and says why."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(recorded()))
    b.write_text(json.dumps(scaled(recorded(), 10.0)))
    assert cli.main(["compare", str(a), str(b), "-o", str(tmp_path / "ab")]) == 0
    assert "worse, too few launches" in capsys.readouterr().out.splitlines()[-2]


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


def test_a_session_against_a_baseline_is_held_to_its_bands_far_end(tmp_path):
    """compare --baseline: the baseline is a reference of kind baseline,
    each size's band end (`upper`, the bound a run fails beyond) its bound,
    min_change.baseline on top, as the check holds a run; B's launches all
    beyond it are worse, one launch inside it is not."""
    report = launched()
    (tc,) = report["runs"][0]["testcases"]
    launches = tc["record"]["runs"]["mpi"]
    sizes = sorted({row["bytes"] for launch in launches for row in launch["rows"]})
    slowest = {size: max(row["usec"] for launch in launches for row in launch["rows"]
                         if row["bytes"] == size) for size in sizes}
    case = sides.case_label(tc)
    knobs = judging_knobs.load()

    def baseline(upper_at_1mib):
        return {"system": tc["system"], "partition": tc["partition"], "cases": [{
            "case": case, "environ": tc["environ"], "column": "usec", "unit": "us",
            "sizes": [{"bytes": size, "centre": slowest[size] / 2, "low": slowest[size] / 3,
                       "upper": upper_at_1mib if size == 1 << 20 else slowest[size]}
                      for size in sizes]}]}

    now = session(report, tmp_path, "now.json")
    fastest = min(row["usec_lo"] for launch in launches for row in launch["rows"]
                  if row["bytes"] == 1 << 20)
    below = fastest / (1 + knobs.min_change["baseline"]) * 0.99
    comparison = compare.compare_with_baseline(now, [baseline(below)])
    (at_1mib,) = [c for c in comparison.changes() if c.bytes == 1 << 20]
    assert at_1mib.call == compare.WORSE
    assert (at_1mib.decision.numbers["kind"], at_1mib.decision.numbers["bound"]) == \
        ("baseline", below)
    # every other size's band ends at its slowest launch: none is worse
    assert [c.bytes for c in comparison.changes() if c.call == compare.WORSE] == [1 << 20]
    # the band's end above one launch's low end: that launch is not beyond, no loss
    comparison = compare.compare_with_baseline(now, [baseline(fastest * 1.5)])
    (at_1mib,) = [c for c in comparison.changes() if c.bytes == 1 << 20]
    assert at_1mib.call != compare.WORSE


def under_pressure(report, pressure, link_emulated):
    """The report with every launch's node reading at `pressure` % and
    its link said to be emulated or not (the record's provenance)."""
    for tc in report["runs"][0]["testcases"]:
        record = tc["record"]
        record["provenance"]["link_emulated"] = link_emulated
        for launches in record["runs"].values():
            for launch in launches:
                launch["nodes"] = {"n1": {"cpu_pressure": pressure}}
    return report


def slowed_on_a_busy_host(tmp_path, link_emulated):
    a = session(under_pressure(launched(), 5.0, link_emulated), tmp_path, "a.json")
    b = session(under_pressure(scaled(launched(), 3.0), 99.0, link_emulated), tmp_path, "b.json")
    return compare.compare_sessions(a, b)


def test_a_loss_the_busy_host_explains_is_inconclusive_as_in_the_check(tmp_path):
    """B x3 slower in every launch, each with its node's CPUs short (PSI
    99 % against A's 5 %): over an emulated link every figure is the CPUs',
    so no size is called worse; each is "worse, hosts differed", the
    model's conditions_differ naming the node, and compare exits 3 as the
    check would say inconclusive.  Over a real link the sizes above 4 KiB
    are the link's, and stay worse."""
    quiet = {c.bytes: c.call for c in by_figure(slowed_threefold(tmp_path), "usec")}
    worse_quiet = {size for size, call in quiet.items() if call == compare.WORSE}
    assert worse_quiet
    emulated = slowed_on_a_busy_host(tmp_path, link_emulated=True)
    calls = {c.bytes: c for c in by_figure(emulated, "usec")}
    assert compare.WORSE not in {c.call for c in calls.values()}
    for size in worse_quiet:
        c = calls[size]
        assert c.call == compare.HOSTS_DIFFERED_CALLS[compare.WORSE], (size, c.call)
        assert c.decision.code == "conditions_differ"
        (difference,) = c.decision.numbers["conditions"]
        assert (difference["code"], difference["node"], difference["now"],
                difference["then"]) == ("cores_short", "n1", 99.0, 5.0)
    assert compare.exit_code(emulated) == verdict.EXIT_INCONCLUSIVE
    real = slowed_on_a_busy_host(tmp_path, link_emulated=False)
    calls = {c.bytes: c.call for c in by_figure(real, "usec")}
    assert {s for s in worse_quiet if s > 4096} == \
        {s for s, call in calls.items() if call == compare.WORSE}
    assert all(calls[s] == compare.HOSTS_DIFFERED_CALLS[compare.WORSE]
               for s in worse_quiet if s <= 4096)
    assert compare.exit_code(real) == verdict.EXIT_LOSS

"""`netbench tune`'s decision (netbench/tuning/decision.py), pure, on real
recorded sessions before and after ethernet_1g (tests/data/tune/) and on
sessions made slower from them."""

import json
from pathlib import Path

import pytest

from helpers.curves import with_time
from netbench.judgement.rule import Estimate
from netbench.report import compare, sessions
from netbench.tuning import decision

DATA = Path(__file__).parent / "data" / "tune" / "gige-jumbo"
MIB = 1 << 20


def launches(path):
    return decision.launch_values(sessions.load_session(path))


def side(*names, data=DATA):
    return decision.pooled_side([launches(data / f"{n}.json") for n in names])


def test_one_launchs_interval_mistakes_a_busy_hosts_noise_for_a_change():
    # the same settings twice, each session's best launch with its own
    # samples' interval (compare's view): most sizes "changed", both ways,
    # the reason a side is the median of every launch of its sessions
    comparison = compare.compare(compare.session_side(sessions.load_session(DATA / "before1.json")),
                                 compare.session_side(sessions.load_session(DATA / "before2.json")))
    calls = [c.call for c in comparison.changes() if c.bytes is not None and c.unit == "us"]
    assert calls.count(compare.BETTER) >= 5 and calls.count(compare.WORSE) >= 5


def test_the_same_settings_measured_twice_change_nothing():
    # two sessions of four launches each, nothing changed in between
    decided = decision.decide(compare.compare(side("after1"), side("after2")))
    assert not decided.kept and not decided.improved and not decided.worse
    assert decided.reason.startswith("no figure changed beyond the noise")


def test_a_side_below_the_minimum_launches_calls_nothing():
    # one launch per untuned session: two values are no evidence (their
    # range is beaten by chance at one size in six), so loop.py measures more
    assert decision.launch_counts([launches(DATA / "before1.json"),
                                   launches(DATA / "before2.json")]) == 2
    assert decision.launch_counts([launches(DATA / "after1.json"),
                                   launches(DATA / "after2.json")]) == 8
    slow = decision.pooled_side([launch_values_of(with_time(
        json.loads((DATA / f"{n}.json").read_text()), factor=20)) for n in ("before1", "before2")])
    decided = decision.decide(compare.compare(side("before1", "before2"), slow))
    assert not decided.kept and not decided.worse and not decided.improved


def launch_values_of(report, tmp=None):
    """launch_values of a run report given as a dict."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.json"
        path.write_text(json.dumps(report))
        return launches(path)


def changed(*names, **with_time_args):
    """The recorded sessions as one side, with a cost added (with_time)."""
    return decision.pooled_side([launch_values_of(with_time(
        json.loads((DATA / f"{n}.json").read_text()), **with_time_args)) for n in names])


def test_a_stall_at_one_size_is_noise_not_a_loss():
    # a 6 ms stall at 8 B in every launch after (a tbf link's scheduler):
    # beyond the noise at that size alone, named, not counted
    decided = decision.decide(compare.compare(
        side("after1", "after2"), changed("after1", "after2", extra_us=6000,
                                          at=lambda size: size == 8)))
    assert not decided.worse and not decided.improved and not decided.kept
    assert [(e.figure, e.bytes, e.call) for e in decided.isolated] == [("usec", 8, "worse")]
    assert decided.reason.startswith("no figure changed beyond the noise; single sizes beyond "
                                     "the noise, not counted: usec at 8 B (+")


def test_a_gain_is_kept_although_one_size_stalled():
    # 1-8 MiB halved and a 6 ms stall at 8 B: kept on the gain, the stall
    # named as noise (the old decision reverted on such a single size)
    base = json.loads((DATA / "after1.json").read_text())
    gained = with_time(with_time(base, factor=0.5, at=lambda size: size >= MIB),
                       extra_us=6000, at=lambda size: size == 8)
    decided = decision.decide(compare.compare(side("after1"), decision.pooled_side(
        [launch_values_of(gained)])))
    assert decided.kept and not decided.worse
    assert {e.bytes for e in decided.improved} == {MIB, 2 * MIB, 4 * MIB, 8 * MIB}
    assert [e.bytes for e in decided.isolated] == [8]
    assert decided.reason.startswith("better beyond the noise: usec at 1 MiB (-50.0 %)")


def test_a_tuning_that_makes_it_slower_is_reverted_naming_the_sizes():
    after = changed("after1", "after2", factor=20, at=lambda size: size >= 16384)
    decided = decision.decide(compare.compare(side("after1", "after2"), after))
    assert not decided.kept and decided.worse and not decided.improved
    worse = {(e.figure, e.bytes) for e in decided.worse}
    assert {("usec", MIB), ("usec", 8 * MIB)} <= worse
    assert decided.reason.startswith("worse beyond the noise: ") and "8 MiB (+1900.0 %)" in decided.reason


def test_keep_overrides_and_says_so():
    after = changed("after1", "after2", factor=20, at=lambda size: size >= 16384)
    decided = decision.decide(compare.compare(side("after1", "after2"), after), keep=True)
    assert decided.kept and decided.overridden
    assert decided.reason.startswith("kept by --keep, although the measurement says revert: "
                                     "worse beyond the noise")


def test_nothing_in_common_is_not_kept():
    decided = decision.decide(compare.compare(side("before1"), {}))
    assert not decided.kept
    assert decided.reason == "no case was measured both before and after the tuning"


def test_a_side_is_the_median_of_its_launches_with_the_rules_interval():
    assert decision.median_estimate([5, 1, 3, 4]) == Estimate(3.5, 1, 5)
    assert decision.median_estimate([1, 9, 5]) == Estimate.point(5)
    # from nine launches the interval drops the extremes (rule.median_interval)
    assert decision.median_estimate(list(range(1, 10))) == Estimate(5, 2, 8)


def test_state_differences_name_the_host_setting():
    before = {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"},
              "links": {"eth0": {"mtu": 1500}}}
    after = {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"},
             "links": {"eth0": {"mtu": 9000}}}
    assert decision.state_differences(before, after) == ["links.eth0.mtu: 1500 -> 9000"]
    assert decision.state_differences(before, before) == []


def test_a_size_counts_once_per_series_and_only_beside_a_neighbour():
    slow, fast = Estimate(10, 9, 11), Estimate(5, 4.5, 5.5)
    same = Estimate(10, 9, 11)
    sizes = [compare.Change("a usec", "us", 1024, slow, fast),
             compare.Change("a Mbps", "Mbit/s", 1024, Estimate(1, 0.9, 1.1), Estimate(2, 1.9, 2.1)),
             compare.Change("a usec", "us", 2048, slow, fast),
             compare.Change("b usec", "us", 1024, slow, fast),
             compare.Change("b usec", "us", 2048, same, same),
             compare.Change("b usec", "us", 4096, slow, fast)]
    comparison = compare.Comparison("A", "B", [compare.CaseComparison("case", [], sizes)], [], [])
    improved, worse, isolated = decision.evidence(comparison)
    assert [(e.figure, e.bytes) for e in improved] == [("a usec", 1024), ("a usec", 2048)]
    assert [(e.figure, e.bytes) for e in isolated] == [("b usec", 1024), ("b usec", 4096)]
    assert worse == ()


def test_the_dry_run_lists_each_hosts_tasks_that_would_change():
    from netbench.tuning import loop
    output = "\n".join([
        "TASK [tune_sysctl : Write the sysctl.d file] ***********************************",
        "--- before", "+++ after: /etc/sysctl.d/90-netbench.conf", "@@ -0,0 +1,2 @@",
        "+net.ipv4.tcp_rmem = 4096 4096 4096",
        "changed: [n1]", "ok: [n2]",
        "TASK [tune_nic : Set the MTU] **************************************************",
        "changed: [n1] => (item=eth0)", "changed: [n1] => (item=eth1)", "changed: [n2]"])
    assert loop.would_change(output) == {
        "n1": ["tune_sysctl : Write the sysctl.d file", "tune_nic : Set the MTU"],
        "n2": ["tune_nic : Set the MTU"]}


@pytest.mark.parametrize("args, message", [
    (["--profile", "nope"], "playbooks/profiles/nope.yml: no such profile; use one of "),
    (["--profile", "../ethernet_1g"], "no such profile"),
    (["--profile", "ethernet_1g", "--flavour", "fast"],
     "ethernet_1g.yml: flavours: no flavour 'fast'; use one of throughput, latency"),
    (["--profile", "ethernet_1g", "-i", "/nonexistent/inventory.ini"],
     "/nonexistent/inventory.ini: no such inventory"),
    (["--profile", "ethernet_1g", "--checks=-n 'PingPong"], "netbench tune: --checks: "),
    (["--profile", "ethernet_1g", "--repeats", "0"], "netbench tune: --repeats: at least 1"),
])
def test_bad_input_is_one_line_and_writes_nothing(args, message, tmp_path, capsys):
    from netbench import cli
    assert cli.main(["tune", *args, "--reports-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []

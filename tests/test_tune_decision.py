"""`netbench tune`'s decision (netbench/tuning/decision.py), pure, on real
recorded sessions before and after ethernet_1g (tests/data/tune/) and on
sessions made slower or faster from them."""

import copy
import json
from pathlib import Path

import pytest

from helpers.curves import records, with_time
from netbench.judgement.rule import Estimate
from netbench.report import compare, sessions
from netbench.tuning import decision

DATA = Path(__file__).parent / "data" / "tune" / "gige-jumbo"
MIB = 1 << 20


def report_of(name):
    return json.loads((DATA / f"{name}.json").read_text())


def launches(report, tmp_path, name="report"):
    """launch_values of a run report given as a dict."""
    path = tmp_path / f"{name}-{id(report)}.json"
    path.write_text(json.dumps(report))
    return decision.launch_values(sessions.load_session(path))


def recorded(tmp_path, *names):
    return [launches(report_of(n), tmp_path, n) for n in names]


def test_one_launchs_interval_mistakes_a_busy_hosts_noise_for_a_change():
    # the same settings twice, each session's best launch with its own
    # samples' interval (compare's view): most sizes "changed", both ways
    comparison = compare.compare(compare.session_side(sessions.load_session(DATA / "before1.json")),
                                 compare.session_side(sessions.load_session(DATA / "before2.json")))
    calls = [c.call for c in comparison.changes() if c.bytes is not None and c.unit == "us"]
    assert calls.count(compare.BETTER) >= 5 and calls.count(compare.WORSE) >= 5


def test_the_same_settings_measured_twice_change_nothing(tmp_path):
    # two sessions of four launches each, nothing changed in between
    decided = decision.decide(recorded(tmp_path, "after1"), recorded(tmp_path, "after2"))
    assert not decided.kept and not decided.improved and not decided.worse
    assert decided.reason.startswith("no figure changed beyond the noise")


def test_a_side_below_the_minimum_launches_calls_nothing(tmp_path):
    # one launch per untuned session: loop.py measures more before deciding
    before = recorded(tmp_path, "before1", "before2")
    assert decision.launch_counts(before) == 2
    assert decision.launch_counts(recorded(tmp_path, "after1", "after2")) == 8
    slow = [launches(with_time(report_of(n), factor=20), tmp_path, n) for n in ("before1", "before2")]
    decided = decision.decide(before, slow)
    assert not decided.kept and not decided.worse and not decided.improved


def stalled(report, size, extra_us, launches=None):
    """The report with `extra_us` added to the time at `size` in the chosen
    launches (all when None): a scheduler's stall."""
    report = copy.deepcopy(report)
    for record in records(report):
        for runs in record["runs"].values():
            for n, launch in enumerate(runs):
                if launches is None or n in launches:
                    for row in launch["rows"]:
                        if row["bytes"] == size:
                            for c in ("usec", "usec_lo", "usec_hi", "usec_min", "usec_max"):
                                row[c] += extra_us
    return report


def test_a_stall_is_noise_not_a_loss(tmp_path):
    before = recorded(tmp_path, "after1", "after2")
    # 6 ms more at 2 MiB in three of every session's four launches: each
    # side's best launch is where it was
    some = [launches(stalled(report_of(n), 2 * MIB, 6000, launches=(0, 1, 2)), tmp_path, n)
            for n in ("after1", "after2")]
    assert decision.decide(before, some).reason == "no figure changed beyond the noise"
    # in every launch, but at that size alone: named, not counted
    every = [launches(stalled(report_of(n), 2 * MIB, 30000), tmp_path, n)
             for n in ("after1", "after2")]
    decided = decision.decide(before, every)
    assert not decided.worse and not decided.improved and not decided.kept
    assert [(e.figure, e.bytes, e.call) for e in decided.isolated] == [("usec", 2 * MIB, "worse")]
    assert decided.reason.startswith("no figure changed beyond the noise; single sizes beyond "
                                     "the noise, not counted: usec at 2 MiB (+")


def unshaped(report):
    """The report as if its link were not emulated (no tbf)."""
    report = copy.deepcopy(report)
    for record in records(report):
        record["provenance"].pop("line_rate_source", None)
    return report


def test_on_an_emulated_link_the_schedulers_sizes_are_not_counted(tmp_path):
    # every message up to 64 KiB twenty times as long: on the tbf link that
    # is the host's scheduler's time, shown, not counted; on a link that is
    # not emulated it is a loss
    slower = lambda r: with_time(r, factor=20, at=lambda size: size <= 65536)  # noqa: E731
    assert decision.counted_from(records(report_of("after1"))[0]["provenance"]) == 750000
    emulated = decision.decide(recorded(tmp_path, "after1"),
                               [launches(slower(report_of("after1")), tmp_path)])
    assert emulated.reason == "no figure changed beyond the noise"
    real = decision.decide([launches(unshaped(report_of("after1")), tmp_path, "u")],
                           [launches(unshaped(slower(report_of("after1"))), tmp_path, "us")])
    assert not real.kept and {e.bytes for e in real.worse} >= {128, 1024}


def test_a_gain_is_kept_although_one_size_stalled(tmp_path):
    # 1-8 MiB twice as fast, and every launch stalled at 8 B: kept on the
    # gain (the earlier decision reverted on such a small size)
    gained = stalled(with_time(report_of("after1"), factor=0.5, at=lambda size: size >= MIB),
                     8, 6000)
    decided = decision.decide(recorded(tmp_path, "after1"), [launches(gained, tmp_path)])
    assert decided.kept and not decided.worse
    assert {e.bytes for e in decided.improved} == {MIB, 2 * MIB, 4 * MIB, 8 * MIB}
    assert decided.reason.startswith("better beyond the noise: usec at 1 MiB (-50.0 %)")


def test_a_tuning_that_makes_it_slower_is_reverted_naming_the_sizes(tmp_path):
    after = [launches(with_time(report_of(n), factor=20, at=lambda size: size >= 16384),
                      tmp_path, n) for n in ("after1", "after2")]
    decided = decision.decide(recorded(tmp_path, "after1", "after2"), after)
    assert not decided.kept and decided.worse and not decided.improved
    assert {e.bytes for e in decided.worse} == {MIB, 2 * MIB, 4 * MIB, 8 * MIB}
    assert decided.reason.startswith("worse beyond the noise: usec at 1 MiB (+1900.0 %)")


def test_keep_overrides_and_says_so(tmp_path):
    after = [launches(with_time(report_of("after1"), factor=20), tmp_path)]
    decided = decision.decide(recorded(tmp_path, "after1"), after, keep=True)
    assert decided.kept and decided.overridden
    assert decided.reason.startswith("kept by --keep, although the measurement says revert: "
                                     "worse beyond the noise")


def test_nothing_in_common_is_not_kept(tmp_path):
    decided = decision.decide(recorded(tmp_path, "before1"), [])
    assert not decided.kept
    assert decided.reason == "no case was measured both before and after the tuning"


def test_a_size_is_called_by_the_judging_rule_against_the_other_sides_best():
    fast = [Estimate(10, 9, 11)] * 3 + [Estimate(30, 29, 31)]
    slow = [Estimate(13, 12, 14)] * 4
    assert decision.size_call(fast, slow, "us") == compare.WORSE
    assert decision.size_call(slow, fast, "us") == compare.BETTER
    # one launch of the slower side as good as the other's best: no call
    assert decision.size_call(fast, slow[:3] + [Estimate(10.5, 9.5, 11.5)], "us") is None
    # fewer than MIN_LAUNCHES a side: no call
    assert decision.size_call(fast, slow[:3], "us") is None
    # a rate: higher is better
    assert decision.size_call([Estimate(900, 890, 910)] * 4, [Estimate(500, 490, 510)] * 4,
                              "Mbit/s") == compare.WORSE


def test_a_change_counts_beside_a_neighbour_and_once_per_series():
    slow, fast = [Estimate(10, 9, 11)] * 4, [Estimate(5, 4.5, 5.5)] * 4
    rate_lo, rate_hi = [Estimate(1, 0.9, 1.1)] * 4, [Estimate(2, 1.9, 2.1)] * 4
    before = {"case": decision.Launches({}, {
        ("a", "usec"): ("us", {1024: slow, 2048: slow}),
        ("a", "Mbps"): ("Mbit/s", {1024: rate_lo, 2048: rate_lo}),
        ("b", "usec"): ("us", {1024: slow, 2048: slow, 4096: slow})})}
    after = {"case": decision.Launches({}, {
        ("a", "usec"): ("us", {1024: fast, 2048: fast}),
        ("a", "Mbps"): ("Mbit/s", {1024: rate_hi, 2048: rate_hi}),
        ("b", "usec"): ("us", {1024: fast, 2048: slow, 4096: fast})})}
    improved, worse, isolated = decision.evidence(before, after)
    assert [(e.figure, e.bytes) for e in improved] == [("a usec", 1024), ("a usec", 2048)]
    assert [(e.figure, e.bytes) for e in isolated] == [("b usec", 1024), ("b usec", 4096)]
    assert worse == ()


def test_state_differences_name_the_host_setting():
    before = {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"},
              "links": {"eth0": {"mtu": 1500}}}
    after = {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"},
             "links": {"eth0": {"mtu": 9000}}}
    assert decision.state_differences(before, after) == ["links.eth0.mtu: 1500 -> 9000"]
    assert decision.state_differences(before, before) == []


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

"""`netbench tune`'s decision (netbench/tuning/decision.py), pure, on real
recorded sessions before and after ethernet_1g (tests/data/tune/) and on
sessions made slower from them."""

import json
from pathlib import Path

import pytest

from helpers.curves import with_time
from netbench.report import compare, sessions
from netbench.tuning import decision

DATA = Path(__file__).parent / "data" / "tune" / "gige-jumbo"


def side(*names):
    return decision.pooled_side([compare.session_side(sessions.load_session(DATA / f"{n}.json"))
                                 for n in names])


def test_one_session_a_side_mistakes_a_busy_hosts_noise_for_a_change():
    # the same settings twice: one launch's intervals call most sizes changed,
    # the reason sessions are pooled
    comparison = compare.compare(side("before1"), side("before2"))
    improved, worse = decision.evidence(comparison)
    assert len(improved) >= 5 and len(worse) >= 5


def test_the_same_settings_pooled_change_nothing_and_are_not_kept():
    decided = decision.decide(compare.compare(side("before1", "before2"),
                                              side("before1", "before2")))
    assert not decided.kept and not decided.improved and not decided.worse
    assert decided.reason == "no figure changed beyond the noise"


def test_jumbo_frames_on_emulated_gige_are_kept_with_the_sizes_that_gained():
    decided = decision.decide(compare.compare(side("before1", "before2"),
                                              side("after1", "after2")))
    assert decided.kept and not decided.overridden and decided.worse == ()
    gained = {(e.figure, e.bytes) for e in decided.improved}
    assert ("usec", 2 << 20) in gained
    assert "usec at 2 MiB (-23.3 %)" in decided.reason and "nothing worse" in decided.reason


def slower(name, factor, tmp_path):
    report = with_time(json.loads((DATA / f"{name}.json").read_text()), factor=factor)
    path = tmp_path / f"{name}-slower.json"
    path.write_text(json.dumps(report))
    return compare.session_side(sessions.load_session(path))


def test_a_tuning_that_makes_it_slower_is_reverted_naming_the_sizes(tmp_path):
    after = decision.pooled_side([slower("before1", 20, tmp_path),
                                  slower("before2", 20, tmp_path)])
    decided = decision.decide(compare.compare(side("before1", "before2"), after))
    assert not decided.kept and decided.worse and not decided.improved
    worse = {(e.figure, e.bytes) for e in decided.worse}
    assert ("usec", 8 << 20) in worse
    assert decided.reason.startswith("worse beyond the noise: ") and "8 MiB (+1900.0 %)" in decided.reason


def test_keep_overrides_and_says_so(tmp_path):
    after = decision.pooled_side([slower("before1", 20, tmp_path),
                                  slower("before2", 20, tmp_path)])
    decided = decision.decide(compare.compare(side("before1", "before2"), after), keep=True)
    assert decided.kept and decided.overridden
    assert decided.reason.startswith("kept by --keep, although the measurement says revert: "
                                     "worse beyond the noise")


def test_nothing_in_common_is_not_kept():
    decided = decision.decide(compare.compare(side("before1"), {}))
    assert not decided.kept
    assert decided.reason == "no case was measured both before and after the tuning"


def test_a_figure_without_an_interval_stays_a_point_when_pooled():
    a = decision.pooled([decision.Estimate(1, 1, 1), decision.Estimate(3, 2, 4)])
    assert (a.value, a.lo, a.hi) == (2, 2, 2)
    b = decision.pooled([decision.Estimate(1, 0.5, 1.5), decision.Estimate(3, 2, 4),
                         decision.Estimate(2, 1.8, 2.2)])
    assert (b.value, b.lo, b.hi) == (2, 0.5, 4)


def test_state_differences_name_the_host_setting():
    before = {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"},
              "links": {"eth0": {"mtu": 1500}}}
    after = {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456"},
             "links": {"eth0": {"mtu": 9000}}}
    assert decision.state_differences(before, after) == ["links.eth0.mtu: 1500 -> 9000"]
    assert decision.state_differences(before, before) == []


def test_a_size_counts_once_per_series_not_once_per_case():
    from netbench.judgement.rule import Estimate
    slow, fast = Estimate(10, 9, 11), Estimate(5, 4.5, 5.5)
    sizes = [compare.Change("a usec", "us", 1024, slow, fast),
             compare.Change("a Mbps", "Mbit/s", 1024, Estimate(1, 0.9, 1.1), Estimate(2, 1.9, 2.1)),
             compare.Change("b usec", "us", 1024, slow, fast)]
    comparison = compare.Comparison("A", "B", [compare.CaseComparison("case", [], sizes)], [], [])
    improved, worse = decision.evidence(comparison)
    assert [e.figure for e in improved] == ["a usec", "b usec"] and worse == ()


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

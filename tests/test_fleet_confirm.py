"""Confirm before blame (issue #36, item 5; netbench/fleet/confirm.py): the
re-measure step measures each suspect again against partners the sweep
found healthy, in the same job, and the judgement names a node only when
it is also slow against them.  Recorded synthetic sweeps in
tests/data/sweep_confirm/ (made by tests/helpers/sweepfiles.py): a node at
a third of the rate, and three bad cables at one node (bad with 3 of its 5
partners, a majority: a node without confirmation)."""

import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers.fleet import leaves_fleet, make_fleet
from netbench import references
from netbench.datafiles import DataError
from netbench.fleet import attribution, confirm, judge, reasons, remeasure, topology
from netbench.results import suspects as suspects_format
from netbench.results.sweep import parse_sweep, round_robin

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

DATA = Path(__file__).parent / "data" / "sweep_confirm"
RULE = references.sweep_thresholds()


def first_pass_alone(tmp_path, case):
    """The case's first pass in a folder of its own: the re-measure step's
    view between the first pass and the second."""
    path = tmp_path / "sweep.out"
    shutil.copy(DATA / case / "sweep.out", path)
    return path


def listed(text):
    return [tuple(map(int, p.split(":"))) for p in text.split(",") if p]


def passes(case):
    return [parse_sweep((DATA / case / name).read_text())
            for name in ("sweep.out", "sweep-2.out")]


def confirming_of(case):
    """The pairs the re-measure step added to confirm suspects between the
    case's passes, as it writes them for the check (--confirming)."""
    with tempfile.TemporaryDirectory() as folder:
        first = shutil.copy(DATA / case / "sweep.out", folder)
        return set(remeasure.next_pass(first).confirming)


def verdict_of(case, confirmed=True, second=None):
    """The case's verdict over both passes, as LinkSweep judges it
    (`second`: the second pass's measurements, changed)."""
    first, again = passes(case)
    remeasured = set(again.by_host) if confirmed else None
    return judge.judge(
        judge.merge_passes([first.measurements(), second or again.measurements()]),
        remeasured=remeasured, confirming=remeasured and confirming_of(case))


def test_the_knob_is_data():
    assert RULE.confirm_partners == 2


def test_each_end_of_a_suspect_pair_gets_k_healthy_partners(tmp_path):
    """Three bad cables at n0: the suspect pairs are measured again, and
    each of their ends against 2 hosts in no suspect pair (n4, n5)."""
    pairs = listed(remeasure.pairs_to_measure_again(str(first_pass_alone(tmp_path,
                                                                         "three-cables"))))
    suspect = {(0, 1), (0, 2), (0, 3)}
    assert suspect <= set(pairs)
    confirmation = set(pairs) - suspect
    for end in (0, 1, 2, 3):
        partners = {b if a == end else a for a, b in confirmation if end in (a, b)}
        assert partners == {4, 5}, (end, pairs)


def test_a_slow_node_is_confirmed_against_the_hosts_it_slows(tmp_path):
    """A slow node makes every pair it is in a suspect: its partners are
    the healthy ones (none is in no suspect pair), its confirmation is
    those pairs measured again, and nothing could clear it into links, so
    the pass measures nothing more (its partners' own confirmations would
    only lengthen it)."""
    pairs = listed(remeasure.pairs_to_measure_again(str(first_pass_alone(tmp_path,
                                                                         "slow-node"))))
    assert pairs == [(0, 3), (1, 3), (2, 3), (3, 4), (3, 5)]


def test_a_suspect_node_in_a_partial_sweep_is_measured_against_new_partners():
    """In a partial sweep (LinkSweep.partners) the slow node has healthy
    hosts it never met: it meets K of them, and its partners meet K
    healthy hosts too, so a node cleared by its new partners leaves links
    whose ends each were measured against healthy partners."""
    hosts = [f"n{i}" for i in range(8)]
    rank_of = {h: i for i, h in enumerate(hosts)}
    undecided = [(hosts[a], hosts[b]) for a, b in attribution.partner_pairs(8, 2) if 3 in (a, b)]
    chosen = confirm.confirmation_pairs(undecided, hosts, RULE, 2, rank_of)
    suspect = {tuple(sorted(p)) for p in undecided}
    for end in {h for p in suspect for h in p}:
        fresh = {b if a == end else a for a, b in chosen if end in (a, b)}
        assert len(fresh) == 2 and "n3" not in fresh - {end}, (end, chosen)
        assert not {tuple(sorted((end, f))) for f in fresh} & suspect


@pytest.mark.parametrize("case", ["slow-node", "three-cables"])
def test_a_pass_runs_its_pairs_in_disjoint_rounds(tmp_path, case):
    """The benchmark runs a -L list in the tournament's rounds, each
    round's pairs at once (netbench.c sweep_schedule): every listed pair is
    in exactly one round, and no host is in two pairs of one round."""
    pairs = listed(remeasure.pairs_to_measure_again(str(first_pass_alone(tmp_path, case))))
    n = 6
    scheduled = [[p for p in r if p in set(pairs)] for r in round_robin(n)]
    assert sorted(p for r in scheduled for p in r) == sorted(pairs)
    for r in scheduled:
        hosts = [h for p in r for h in p]
        assert len(hosts) == len(set(hosts)), r
    assert all(confirm.round_of(a, b, n) == i for i, r in enumerate(round_robin(n))
               for a, b in r)
    # the recorded second pass ran just those pairs, in those rounds
    again = parse_sweep((DATA / case / "sweep-2.out").read_text())
    assert sorted({(a, b) for _, a, b in again.schedule}) == sorted(pairs)
    assert all(confirm.round_of(a, b, n) == r for r, a, b in again.schedule)


def test_confirmation_pairs_land_in_rounds_the_pass_runs_already():
    """Partners equal otherwise, the one whose pair meets in a round the
    pass already runs costs no round of its own: h0's partner's round
    (h0 and h1 meet in one of their own) is where h1's is chosen."""
    hosts = [f"h{i}" for i in range(8)]
    rank_of = {h: i for i, h in enumerate(hosts)}
    undecided = [("h0", "h1"), ("h1", "h0")]
    chosen = confirm.confirmation_pairs(undecided, hosts, RULE, 1, rank_of)
    rounds = {confirm.round_of(rank_of[a], rank_of[b], 8) for a, b in chosen}
    assert len(chosen) == 2 and len(rounds) == 1, chosen


def test_with_a_topology_partners_are_under_another_leaf(tmp_path):
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=spine Switches=leaf[1-3]\n"
                    + "".join(f"SwitchName=leaf{i} Nodes=n{i}[1-3]\n" for i in (1, 2, 3)))
    leaf_of = topology.load_topology(conf).leaf_of()
    hosts = sorted(leaf_of)
    rank_of = {h: i for i, h in enumerate(hosts)}
    undecided = [("n11", "n12"), ("n12", "n11")]
    chosen = confirm.confirmation_pairs(undecided, hosts, RULE, 2, rank_of, leaf_of)
    assert len(chosen) == 4
    for a, b in chosen:
        end, partner = (a, b) if a in ("n11", "n12") else (b, a)
        assert leaf_of[partner] != "leaf1", chosen
    # without one, the same leaf is as good as any
    plain = confirm.confirmation_pairs(undecided, hosts, RULE, 2, rank_of)
    assert any("n13" in p for p in plain)


def test_a_node_fine_with_its_healthy_partners_is_no_node_but_its_links():
    """The test that fails if confirmation is ignored: without it n0, bad
    with 3 of 5 partners, is the node; with it n0 is fine against n4 and
    n5, and so are n1-n3: three link suspects, each with its evidence."""
    assert [(s.kind, s.names) for s in verdict_of("three-cables", confirmed=False).suspects] \
        == [("node", ("n0",))]
    verdict = verdict_of("three-cables")
    assert [(s.kind, s.names) for s in verdict.suspects] == [
        ("pair", ("n0", "n1")), ("pair", ("n0", "n2")), ("pair", ("n0", "n3"))]
    for s in verdict.suspects:
        assert s.confirmed == suspects_format.ENDS_FINE
        partners = {e.dst if e.src in s.names else e.src for e in s.confirmation}
        assert partners == {"n4", "n5"}
        assert all(e.value > e.bound for e in s.confirmation)
        assert "confirmed: each end fine with the healthy partners measured again" \
            in reasons.describe(s)


def test_a_slow_node_is_named_with_the_healthy_partners_it_is_slow_with(tmp_path):
    verdict = verdict_of("slow-node")
    assert [(s.kind, s.names) for s in verdict.suspects] == [("node", ("n3",))]
    suspect = verdict.suspects[0]
    assert suspect.confirmed == suspects_format.SLOW_WITH_HEALTHY
    partners = {e.dst if e.src == "n3" else e.src for e in suspect.confirmation}
    assert partners == {"n0", "n1", "n2", "n4", "n5"}
    assert all(e.value < e.bound for e in suspect.confirmation)
    text = reasons.describe(suspect)
    assert "confirmed: bad with the healthy partners measured again [" in text
    # suspects.json carries it, and reads back through its schema
    path = tmp_path / "suspects.json"
    path.write_text(verdict.to_json())
    found, data = suspects_format.read_suspects(path)
    assert data["suspects"][0]["confirmation"]["code"] == "slow_with_healthy_partners"
    assert {e["src"] for e in data["suspects"][0]["confirmation"]["evidence"]} >= {"n4"}
    assert found[0] == suspect


def test_a_node_slow_in_one_pass_only_is_cleared_by_its_partners():
    """The first pass's slow node, fine in the second against the hosts it
    is measured with again: nobody is named (best of the passes)."""
    hosts = [f"node{i:02d}" for i in range(6)]
    first = make_fleet(6, 1, slow=["node02"], hosts=hosts)
    healthy = make_fleet(6, 2, hosts=hosts)
    rank_of = {h: i for i, h in enumerate(hosts)}
    undecided = judge.pairs_to_remeasure(judge.judge(first))
    extra = confirm.confirmation_pairs(undecided, hosts, RULE, 2, rank_of)
    again = {p: healthy[p] for p in set(undecided) | {q for a, b in extra
                                                      for q in ((a, b), (b, a))}}
    remeasured = {tuple(sorted(p)) for p in again}
    confirming = set(extra) - {tuple(sorted(p)) for p in undecided}
    verdict = judge.judge(judge.merge_passes([first, again]), remeasured=remeasured,
                          confirming=confirming)
    assert verdict.suspects == []


def test_a_slow_node_with_one_lucky_pair_is_still_the_node():
    """Confirmation holds a node to a majority of its healthy partners, the
    rule a node is named by: one of its pairs within the band in a pass
    (the best of the passes counts) does not turn a slow node into links."""
    second = passes("slow-node")[1].measurements()
    for pair in (("n0", "n3"), ("n3", "n0")):
        second[pair] = {**second[pair], "bw_Mbps": {1 << 20: 900.0}}
    verdict = verdict_of("slow-node", second=second)
    assert [(s.kind, s.names, s.confirmed) for s in verdict.suspects] == [
        ("node", ("n3",), suspects_format.SLOW_WITH_HEALTHY)]


def test_without_a_second_pass_nothing_is_confirmed():
    verdict = judge.judge(make_fleet(5, 3, slow=["node01"]))
    assert [s.confirmed for s in verdict.suspects] == [None]
    assert "confirmation" not in json.loads(verdict.to_json())["suspects"][0]
    assert "confirmed" not in reasons.describe(verdict.suspects[0])


def test_a_switch_link_is_not_confirmed_as_a_host(tmp_path):
    """Confirmation judges hosts: a switch link keeps its attribution."""
    fleet, lines = leaves_fleet(3, 3, 5, slow_uplinks=["leaf2"])
    conf = tmp_path / "topology.conf"
    conf.write_text("\n".join(lines) + "\n")
    topo = topology.load_topology(conf)
    verdict = judge.judge(fleet, topology=topo, remeasured=set(fleet))
    assert [(s.kind, s.component, s.confirmed) for s in verdict.suspects] == [
        ("switch-link", "leaf2<->spine", None)]


def test_the_remeasure_step_reads_the_topology_and_refuses_a_bad_one(tmp_path):
    first = first_pass_alone(tmp_path, "three-cables")
    good = tmp_path / "fabric.conf"
    good.write_text("SwitchName=spine Switches=leaf[1-2]\nSwitchName=leaf1 Nodes=n[0-2]\n"
                    "SwitchName=leaf2 Nodes=n[3-5]\n")
    proc = subprocess.run([sys.executable, "-m", "netbench.fleet.remeasure", "--topology",
                           str(good), str(first)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # n3 (leaf2) meets healthy n1 and n2 under leaf1, not n4 and n5 beside
    # it, which it meets without a topology (hosts in no suspect pair)
    pairs = set(listed(proc.stdout.strip()))
    assert {(1, 3), (2, 3)} <= pairs and not {(3, 4), (3, 5)} & pairs, pairs
    plain = set(listed(remeasure.pairs_to_measure_again(str(first))))
    assert {(3, 4), (3, 5)} <= plain and not {(1, 3), (2, 3)} & plain, plain
    bad = tmp_path / "topology.conf"
    bad.write_text("SwitchName=leaf1 Nodes=n[0-2\n")
    proc = subprocess.run([sys.executable, "-m", "netbench.fleet.remeasure", "--topology",
                           str(bad), str(first)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and str(bad) in proc.stderr, proc.stderr
    # a file that leaves a swept node (n5) under no switch is another
    # partition's: refused, not judged with n5 outside every switch
    other = tmp_path / "other.conf"
    other.write_text("SwitchName=spine Switches=leaf[1-2]\nSwitchName=leaf1 Nodes=n[0-2]\n"
                     "SwitchName=leaf2 Nodes=n[3-4]\n")
    proc = subprocess.run([sys.executable, "-m", "netbench.fleet.remeasure", "--topology",
                           str(other), str(first)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip() == (f"netbench.fleet.remeasure: {other}: node n5 of the "
                                   f"partition is under no switch (1 of its 6 nodes are not "
                                   f"in the file: not this partition's topology)"), proc.stderr


def test_the_suspect_record_keeps_its_confirmation_through_json():
    suspect = verdict_of("slow-node").suspects[0]
    again = suspects_format.suspect_from_json(
        json.loads(suspects_format.suspects_json([suspect], [], {}, []))["suspects"][0])
    assert dataclasses.astuple(again) == dataclasses.astuple(suspect)


def test_a_published_sweep_keeps_the_confirmation_in_suspects_json_and_the_page(tmp_path):
    """The record's suspect, with its confirmation, reaches suspects.json
    whole and the page in words (report.sweep), and a malformed code is
    refused naming its field."""
    from helpers.reports import sweep_report
    from netbench import report
    suspect = json.loads(verdict_of("slow-node").to_json())["suspects"][0]
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(sweep_report([suspect])))
    folder = report.publish(raw, tmp_path)
    published = json.loads((folder / "suspects.json").read_text())
    assert published["sweeps"][0]["suspects"][0]["confirmation"] == suspect["confirmation"]
    page = (folder / "index.html").read_text()
    assert "confirmed: bad with the healthy partners measured again: n0→n3" in page
    bad = dict(suspect, confirmation=dict(suspect["confirmation"], code="trust me"))
    raw.write_text(json.dumps(sweep_report([bad])))
    with pytest.raises(DataError, match=r"confirmation\.code"):
        report.publish(raw, tmp_path / "again")


def test_the_remeasure_step_writes_the_pairs_it_added_to_confirm(tmp_path):
    """The check takes the confirmation pairs from the re-measure step's
    --confirming file, not from judging the first pass again: three bad
    cables at n0, whose ends each meet n4 and n5."""
    first = first_pass_alone(tmp_path, "three-cables")
    written = tmp_path / "sweep-2.confirming.json"
    proc = subprocess.run([sys.executable, "-m", "netbench.fleet.remeasure", "--confirming",
                           str(written), str(first)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    confirming = remeasure.read_confirming(written.read_text(), written.name)
    assert confirming == {(end, p) for end in ("n0", "n1", "n2", "n3") for p in ("n4", "n5")}
    listed_pairs = set(listed(proc.stdout.strip()))
    assert listed_pairs == {(0, 1), (0, 2), (0, 3)} | {
        (int(a[1:]), int(b[1:])) for a, b in confirming}
    with pytest.raises(ValueError, match="^x.json: confirming: not a list of host pairs$"):
        remeasure.read_confirming('{"confirming": [["n0"]]}', "x.json")

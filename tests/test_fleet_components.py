"""The fault named as the component (netbench/fleet/components.py): on a
synthetic fleet of leaves under a spine, a slow leaf uplink is that switch
link alone (with its direction), a slow node is the node alone, a slow
leaf switch is the switch, two faults are two components, a healthy fleet
names nothing; the pairs a re-measurement clears name nothing; the
heat map's hosts follow the topology."""

import json

import pytest

from helpers.fleet import LATENCY_US, LINE_MBPS, leaves_fleet
from netbench import paths, references
from netbench.fleet import judge, topology
from netbench.results import suspects as suspects_format

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

DATA = paths.REPO / "tests" / "data" / "topology"


def judged(measurements, lines, tmp_path, profile=None):
    """The verdict with the fabric's topology; `profile`: a judging profile
    (the synthetic fleets' noise up to +-10 % is the virtual cluster's)."""
    path = tmp_path / "topology.conf"
    path.write_text("\n".join(lines) + "\n")
    topo = topology.load_topology(path)
    return judge.judge(measurements, reference_bw_mbps=LINE_MBPS,
                       reference_latency_us=LATENCY_US, topology=topo,
                       rule=references.sweep_thresholds(profile=profile))


def named(verdict):
    return sorted((s.kind, s.component, s.direction) for s in verdict.suspects)


@pytest.mark.parametrize("shape", [(3, 3), (4, 4), (3, 5)])
def test_a_slow_uplink_is_that_switch_link_alone(tmp_path, shape):
    for seed in range(20):
        fleet, lines = leaves_fleet(*shape, seed, slow_uplinks=["leaf2"])
        verdict = judged(fleet, lines, tmp_path)
        assert named(verdict) == [("switch-link", "leaf2<->spine", "both")], (shape, seed)
        suspect = verdict.suspects[0]
        assert suspect.names == ("leaf2", "spine")
        # the evidence: pairs that cross it, none under it, held to the fleet
        assert all(("n2" in e.src) != ("n2" in e.dst) for e in suspect.evidence)
        assert suspect.value < suspect.fleet_median / 2


@pytest.mark.parametrize("direction,expected", [("out", "egress"), ("in", "ingress")])
def test_one_direction_of_an_uplink_is_named_with_it(tmp_path, direction, expected):
    for seed in range(10):
        fleet, lines = leaves_fleet(3, 3, seed, slow_uplinks=["leaf3"], direction=direction)
        assert named(judged(fleet, lines, tmp_path)) == [
            ("switch-link", "leaf3<->spine", expected)], seed


def test_a_slow_node_is_the_node_alone(tmp_path):
    for seed in range(20):
        fleet, lines = leaves_fleet(3, 3, seed, slow_nodes=["n22"])
        assert named(judged(fleet, lines, tmp_path)) == [("node", "n22", "both")], seed


def test_a_slow_leaf_switch_is_the_switch(tmp_path):
    for seed in range(10):
        fleet, lines = leaves_fleet(3, 3, seed, slow_switches=["leaf1"])
        assert named(judged(fleet, lines, tmp_path)) == [("switch", "leaf1", "both")], seed


def test_two_faults_are_two_components(tmp_path):
    for seed in range(10):
        fleet, lines = leaves_fleet(4, 4, seed, slow_nodes=["n11"], slow_uplinks=["leaf3"])
        assert named(judged(fleet, lines, tmp_path)) == [
            ("node", "n11", "both"), ("switch-link", "leaf3<->spine", "both")], seed


def test_a_healthy_fleet_names_nothing(tmp_path):
    for seed in range(50):
        fleet, lines = leaves_fleet(3, 3, seed, noise=0.05)
        verdict = judged(fleet, lines, tmp_path, profile="virtual-cluster")
        assert verdict.suspects == [] and verdict.within_noise == [], seed


def test_a_component_cleared_by_measuring_again_is_not_named(tmp_path):
    """Confirm before blame: the sweep measures the pairs outside the band
    again in the same job (fleet.remeasure); a switch link whose pairs are
    fine in the second pass is not named."""
    first, lines = leaves_fleet(3, 3, 1, slow_uplinks=["leaf2"])
    again_full, _ = leaves_fleet(3, 3, 2)
    verdict = judged(first, lines, tmp_path)
    wanted = judge.pairs_to_remeasure(verdict)
    assert {p for p in wanted} >= {(s, d) for s, d in first if ("n2" in s) != ("n2" in d)}
    again = {p: again_full[p] for p in wanted}
    assert judged(judge.merge_passes([first, again]), lines, tmp_path).suspects == []


def test_suspects_json_carries_the_component_and_its_kind(tmp_path):
    fleet, lines = leaves_fleet(3, 3, 5, slow_uplinks=["leaf1"])
    path = tmp_path / "suspects.json"
    path.write_text(judged(fleet, lines, tmp_path).to_json())
    found, data = suspects_format.read_suspects(path)
    assert [(s["kind"], s["component"]) for s in data["suspects"]] == [
        ("switch-link", "leaf1<->spine")]
    assert found[0].component == "leaf1<->spine" and found[0].kind == "switch-link"
    # without a topology, a node's component is the node
    plain = judge.judge(fleet, reference_bw_mbps=LINE_MBPS)
    assert all(s["component"] for s in json.loads(plain.to_json())["suspects"])


def test_a_switch_link_is_named_in_the_reason_and_drains_nothing(tmp_path):
    from netbench.fleet import drain, reasons
    fleet, lines = leaves_fleet(3, 3, 7, slow_uplinks=["leaf2"])
    suspect = judged(fleet, lines, tmp_path).suspects[0]
    assert reasons.describe(suspect).startswith("switch-link leaf2<->spine (both): bw_Mbps")
    script = drain.drain_script([suspect])
    assert "link between switch leaf2 and its parent spine (both)" in script
    assert "scontrol" not in script.split("Suspect links")[1]


def test_the_heat_map_shows_a_leaf_as_a_block():
    """The page's rows follow the record's `leaves` (render only): the
    nodes of a leaf are next to each other, others after them."""
    from netbench.report import sweep
    fleet = {"hosts": ["a1", "b1", "c9", "a2", "b2"], "suspects": [],
             "leaves": {"a1": "leaf1", "a2": "leaf1", "b1": "leaf2", "b2": "leaf2"},
             "pairs": [{"src": "a1", "dst": "a2", "latency_us": 5.0,
                        "bw_Mbps": {"1048576": 90.0}}]}
    ordered = sweep.by_topology(fleet)
    assert ordered["hosts"] == ["a1", "a2", "b1", "b2", "c9"]
    grids, _ = sweep.matrices(ordered)
    assert grids["bandwidth"][0, 1] == 90.0
    assert sweep.by_topology({**fleet, "leaves": None})["hosts"] == fleet["hosts"]


# -- the fault that is the majority: two leaves (issue 54) -------------------------

TWO_LEAVES_PATH = "leaf1<->spine<->leaf2"


def crossing(e):
    return e.src[1] != e.dst[1]          # n<leaf><i>: the leaf is the name's 2nd character


@pytest.mark.parametrize("per_leaf", [2, 3, 4])
def test_a_slow_uplink_between_two_leaves_is_named_though_it_is_the_majority(
        tmp_path, per_leaf):
    """Every pair across two leaves runs through both uplinks and the
    spine: most of the fleet's pairs, so its median is the slow figure.
    Held to the pairs under the leaves, they are named, as the path
    between the leaves (no pair can tell leaf1's uplink from leaf2's), no
    node is blamed, and the fleet is not failed as a whole."""
    for seed in range(20):
        fleet, lines = leaves_fleet(2, per_leaf, seed, slow_uplinks=["leaf2"])
        verdict = judged(fleet, lines, tmp_path)
        assert named(verdict) == [("switch-link", TWO_LEAVES_PATH, "both")], (per_leaf, seed)
        suspect = verdict.suspects[0]
        assert suspect.names == ("leaf1", "leaf2")
        assert "cannot tell which is slow" in suspect.reason
        assert suspect.evidence and all(crossing(e) for e in suspect.evidence)
        assert suspect.value < suspect.fleet_median / 2
        assert verdict.findings == [], seed
        assert verdict.stats[suspect.metric].fleet_median > 0.9 * LINE_MBPS


@pytest.mark.parametrize("direction,expected", [("out", "leaf2->leaf1"), ("in", "leaf1->leaf2")])
def test_one_direction_between_two_leaves_is_named_with_it(tmp_path, direction, expected):
    for seed in range(10):
        fleet, lines = leaves_fleet(2, 3, seed, slow_uplinks=["leaf2"], direction=direction)
        assert named(judged(fleet, lines, tmp_path)) == [
            ("switch-link", TWO_LEAVES_PATH, expected)], seed


def test_a_leaf_under_another_names_its_one_link(tmp_path):
    """Two leaves joined by one link (leaf2's parent is leaf1): that link
    is the only component the crossing pairs share, and it is named."""
    lines = ["SwitchName=leaf1 Nodes=n1[1-3] Switches=leaf2", "SwitchName=leaf2 Nodes=n2[1-3]"]
    for seed in range(10):
        fleet, _ = leaves_fleet(2, 3, seed, slow_uplinks=["leaf2"])
        verdict = judged(fleet, lines, tmp_path)
        assert named(verdict) == [("switch-link", "leaf2<->leaf1", "both")], seed
        assert verdict.suspects[0].reason is None


def test_two_healthy_leaves_name_nothing(tmp_path):
    for seed in range(50):
        for per_leaf in (2, 3, 4):
            fleet, lines = leaves_fleet(2, per_leaf, seed, noise=0.05)
            verdict = judged(fleet, lines, tmp_path, profile="virtual-cluster")
            assert verdict.suspects == [] and verdict.within_noise == [], (per_leaf, seed)
            assert verdict.findings == []


def test_a_slow_node_on_two_leaves_is_the_node_alone(tmp_path):
    for seed in range(20):
        fleet, lines = leaves_fleet(2, 3, seed, slow_nodes=["n12"])
        assert named(judged(fleet, lines, tmp_path)) == [("node", "n12", "both")], seed


def test_without_pairs_under_the_leaves_nothing_is_named_and_the_finding_says_why(tmp_path):
    """Only pairs across the leaves measured (a partial sweep): nothing to
    hold the path to, so no component is named; the fleet fails on its
    line rate, and the finding says why the path is not named."""
    fleet, lines = leaves_fleet(2, 3, 4, slow_uplinks=["leaf2"])
    across = {p: f for p, f in fleet.items() if p[0][1] != p[1][1]}
    path = tmp_path / "topology.conf"
    path.write_text("\n".join(lines) + "\n")
    verdict = judge.judge(across, line_rate_mbps=LINE_MBPS, reference_latency_us=LATENCY_US,
                          topology=topology.load_topology(path))
    assert verdict.suspects == []
    [finding] = verdict.findings
    assert "not named as a component" in finding.text
    assert "leaf2<->spine (0 other)" in finding.text and "min_other_pairs" in finding.text


def test_the_path_between_two_leaves_in_suspects_json_the_reason_and_drain(tmp_path):
    from netbench.fleet import drain, reasons
    fleet, lines = leaves_fleet(2, 3, 7, slow_uplinks=["leaf2"], direction="out")
    verdict = judged(fleet, lines, tmp_path)
    path = tmp_path / "suspects.json"
    path.write_text(verdict.to_json())
    found, data = suspects_format.read_suspects(path)
    assert [(s["kind"], s["names"], s["component"], s["direction"])
            for s in data["suspects"]] == [
        ("switch-link", ["leaf1", "leaf2"], TWO_LEAVES_PATH, "leaf2->leaf1")]
    assert reasons.describe(found[0]).startswith(
        f"switch-link {TWO_LEAVES_PATH} (leaf2->leaf1): bw_Mbps")
    script = drain.drain_script(found)
    assert f"path {TWO_LEAVES_PATH} between switches leaf1 and leaf2 (leaf2->leaf1)" in script
    assert "scontrol" not in script.split("Suspect links")[1]


def test_the_pass_between_measures_again_the_pairs_across_two_leaves(tmp_path):
    """The re-measure step between a sweep's passes judges with the
    partition's topology as the check does: the pairs across two leaves
    whose path is slow are what it measures again (judged without it, the
    slow majority is the fleet's median, and a healthy pair under a leaf
    may be what stands out)."""
    from helpers.sweepfiles import sweep_text
    from netbench.fleet import remeasure
    hosts = ["a1", "a2", "a3", "b1", "b2", "b3"]
    (tmp_path / "sweep.out").write_text(
        sweep_text(hosts, lambda s, d: 1 / 3 if s[0] != d[0] else 1.0, seed=5))
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=spine Switches=leaf[1-2]\n"
                    "SwitchName=leaf1 Nodes=a[1-3]\nSwitchName=leaf2 Nodes=b[1-3]\n")
    listed = remeasure.next_pass(tmp_path / "sweep.out", topology=str(conf)).listed
    ranks = {tuple(map(int, p.split(":"))) for p in listed.split(",")}
    across = {(a, b) for a in range(3) for b in range(3, 6)}
    assert ranks == across

"""`netbench drain`'s plan (netbench.fleet.drain.drain_plan) and its report
reading (netbench.slurmdrain.read_report), without Slurm: which suspect
nodes are drained with netbench's reason, which are left alone because
someone else drained them, that a link drains nothing, and that a report
naming hosts the cluster does not have drains nothing (#36); how `netbench
resume` judges a re-test's output.  Through a real Slurm:
tests/test_slurm.py."""

import json
from pathlib import Path

import pytest

from netbench import slurmdrain
from netbench.datafiles import DataError
from netbench.fleet import drain
from netbench.results.suspects import Evidence, Suspect

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

SESSION = "20261127T160000-abcd1234"


def node_suspect(name, direction="both", reason=None):
    return Suspect("node", (name,), "bw_Mbps@1048576", 31.5, 94.0, None, direction,
                   (Evidence("n1", name, "bw_Mbps@1048576", 31.5, 70.5),), reason=reason)


def cluster(**states):
    """{name: SlurmNode}: n1-n4 idle unless given (state, reason)."""
    nodes = {f"n{i}": drain.SlurmNode(f"n{i}", "idle") for i in range(1, 5)}
    for name, (state, reason) in states.items():
        nodes[name] = drain.SlurmNode(name, state, reason)
    return nodes


def test_a_suspect_node_is_drained_with_netbench_s_reason_naming_the_report():
    plan = drain.drain_plan(SESSION, [node_suspect("n3")], cluster())
    ((host, reason),) = plan.drain
    assert host == "n3"
    assert reason == f"netbench: {SESSION}: bw_Mbps@1048576 31.5 vs fleet median 94"
    assert drain.is_netbench_reason(reason)


def test_an_unreachable_node_is_drained_with_ssh_s_words():
    why = "ssh: connect to host 198.18.0.13 port 22: No route to host"
    plan = drain.drain_plan(SESSION, [node_suspect("n3", "unreachable", why)], cluster())
    assert plan.drain == [("n3", f"netbench: {SESSION}: unreachable: {why}")]


def test_a_node_someone_else_drained_is_left_alone():
    nodes = cluster(n3=("drained", "admin: bad DIMM"), n4=("down", "Not responding"))
    plan = drain.drain_plan(SESSION, [node_suspect("n3"), node_suspect("n4")], nodes)
    assert plan.drain == []
    assert [n.name for n in plan.left_alone] == ["n3", "n4"]


def test_a_node_netbench_drained_already_is_not_drained_again():
    nodes = cluster(n3=("drained", f"netbench: {SESSION}: bw_Mbps@1048576 31 vs ..."))
    plan = drain.drain_plan(SESSION, [node_suspect("n3")], nodes)
    assert plan.drain == [] and [n.name for n in plan.already] == ["n3"]


def test_a_link_suspect_drains_nothing_and_names_the_link():
    pair = Suspect("pair", ("n1", "n2"), "bw_Mbps@1048576", 31.5, 94.0, None, "both",
                   (Evidence("n1", "n2", "bw_Mbps@1048576", 31.5, 70.5),))
    plan = drain.drain_plan(SESSION, [pair], cluster())
    assert plan.drain == [] and len(plan.links) == 1
    assert "link between n1 and n2" in plan.links[0] and "not drained" in plan.links[0]


def test_a_report_naming_hosts_the_cluster_does_not_have_drains_nothing():
    plan = drain.drain_plan(SESSION, [node_suspect("n3"), node_suspect("other-7"),
                                      node_suspect("other-9")], cluster())
    assert plan.drain == [] and plan.unknown == ["other-7", "other-9"]


def test_a_hostile_name_is_refused_not_drained():
    plan = drain.drain_plan(SESSION, [node_suspect("n1;reboot")], cluster())
    assert plan.drain == [] and plan.unknown == []
    assert len(plan.refused) == 1


def session_report(tmp_path, suspects):
    folder = tmp_path / SESSION
    folder.mkdir()
    (folder / "suspects.json").write_text(json.dumps(
        {"session": SESSION, "sweeps": [{"partition": "vc:nodes", "environ": "mpich",
                                         "label": "mpich", "nodes": ["n1", "n2", "n3"],
                                         "suspects": suspects}]}))
    return folder


def test_the_report_is_read_from_its_folder_or_its_suspects_json(tmp_path):
    why = "ssh: connect to host 198.18.0.13 port 22: No route to host"
    folder = session_report(tmp_path, [
        {"kind": "node", "names": ["n3"], "metric": "answered_pairs", "value": 0,
         "fleet_median": 0, "reference": None, "direction": "unreachable", "evidence": [],
         "reason": why}])
    for report in (folder, folder / "suspects.json"):
        session, suspects = slurmdrain.read_report(report)
        assert session == SESSION and suspects[0].names == ("n3",)
        assert suspects[0].reason == why


def test_a_malformed_report_names_its_file_and_field(tmp_path):
    folder = session_report(tmp_path, [{"kind": "node", "names": "n3"}])
    with pytest.raises(DataError) as err:
        slurmdrain.read_report(folder)
    assert str(folder / "suspects.json") in str(err.value)
    assert "sweeps[0].suspects[0]" in str(err.value)
    assert "\n" not in str(err.value)


DATA = Path(__file__).parent / "data"
SLOW_NODE_SWEEP = DATA / "sweep_confirm" / "slow-node" / "sweep.out"
ONE_HOST_SWEEP = DATA / "benchmark" / "sweep-3ranks.mpich-wheel.txt"


def test_a_retest_passes_a_node_nothing_names_and_fails_the_slow_one():
    output = SLOW_NODE_SWEEP.read_text()
    healthy = slurmdrain.judged_retest("n0", ["n1", "n2", "n3", "n4", "n5"], output, "")
    assert healthy["verdict"] == "pass" and len(healthy["pairs"]) == 30, healthy["why"]
    slow = slurmdrain.judged_retest("n3", ["n0", "n1", "n2", "n4", "n5"], output, "")
    assert slow["verdict"] == "fail" and slow["why"].startswith("node n3: bw_Mbps@1048576")


def test_a_retest_whose_ranks_shared_a_host_fails_and_says_why():
    """The fleet's judge refuses ranks on one host (ValueError): `netbench
    resume` stopped on it with a traceback; the node stays drained."""
    found = slurmdrain.judged_retest("vm", ["a", "b"], ONE_HOST_SWEEP.read_text(), "")
    assert found["verdict"] == "fail"
    assert found["why"].startswith("the re-test cannot be judged: ranks ran on one host (vm)")

"""`netbench drain`'s plan (netbench.fleet.drain.drain_plan) and its report
reading (netbench.slurmdrain.read_report), without Slurm: which suspect
nodes are drained with netbench's reason, which are left alone because
someone else drained them, that a link drains nothing, and that a report
naming hosts the cluster does not have drains nothing (#36); how `netbench
resume` judges a re-test's output.  Through a real Slurm:
tests/test_slurm.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.reports import minimal_report, sweep_report
from netbench import report, slurmdrain
from netbench.datafiles import DataError, validate
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


UNREACHABLE_N3 = {"kind": "node", "names": ["n3"], "metric": "answered_pairs", "value": 0,
                  "fleet_median": 2, "reference": None, "direction": "unreachable",
                  "evidence": [],
                  "reason": "ssh: connect to host 198.18.0.13 port 22: No route to host"}


def published(tmp_path, suspects, hosts=None, data=None):
    """A session folder publish made of a run report whose sweep over n1-n3
    (or `hosts`) named `suspects`: what `netbench drain` takes."""
    data = data or sweep_report(suspects)
    if hosts is not None:
        data["runs"][0]["testcases"][0]["record"]["fleet"]["hosts"] = hosts
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(data))
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    return report.publish(raw, reports, results_db=tmp_path / "none.db")


def refusal(report_path):
    with pytest.raises(DataError) as err:
        slurmdrain.read_report(report_path)
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_the_report_is_read_from_its_folder_or_its_suspects_json(tmp_path):
    folder = published(tmp_path, [UNREACHABLE_N3])
    for given in (folder, folder / "suspects.json"):
        session, suspects = slurmdrain.read_report(given)
        assert session == folder.name and suspects[0].names == ("n3",)
        assert suspects[0].reason == UNREACHABLE_N3["reason"]


def test_a_crafted_suspects_json_is_not_drained(tmp_path):
    """Naming every node of the cluster: today it drains every node in
    service.  The session's run report names n3 alone, and the file given
    is not what it gives (sha256): refused; the folder drains n3 alone."""
    folder = published(tmp_path, [UNREACHABLE_N3])
    crafted = json.loads((folder / "suspects.json").read_text())
    crafted["sweeps"][0]["suspects"] = [dict(UNREACHABLE_N3, names=[n])
                                        for n in ("n1", "n2", "n3", "n4")]
    (folder / "suspects.json").write_text(json.dumps(crafted, indent=2) + "\n")
    message = refusal(folder / "suspects.json")
    assert message == (f"{folder / 'suspects.json'}: is not the suspects of its session's "
                       f"run report ({folder / 'run-report.json'}): a suspects file is "
                       f"drained only as the session published it")
    session, suspects = slurmdrain.read_report(folder)
    assert [s.names for s in suspects] == [("n3",)]


def test_a_suspects_json_outside_a_published_session_is_refused(tmp_path):
    loose = tmp_path / "suspects.json"
    loose.write_text(json.dumps({"session": SESSION, "sweeps": [
        {"nodes": ["n1", "n2", "n3"], "suspects": [UNREACHABLE_N3]}]}))
    assert refusal(loose) == (f"{loose}: no run-report.json beside it: netbench drain "
                              f"takes a session published under reports/ (its folder)")


def test_suspects_naming_a_node_the_sweep_did_not_measure_are_refused(tmp_path):
    """A record whose suspects name n9, a node outside its sweep's n1-n3."""
    folder = published(tmp_path, [dict(UNREACHABLE_N3, names=["n9"])])
    assert refusal(folder) == (f"{folder / 'suspects.json'}: sweeps[0].suspects[0].names: "
                               f"'n9' is not one of the sweep's 3 nodes")


def test_a_majority_of_the_sweeps_nodes_is_never_drained(tmp_path):
    """The judgement names a node that is the odd one out among its
    partners: two of three (or half of four) cannot be."""
    folder = published(tmp_path, [UNREACHABLE_N3, dict(UNREACHABLE_N3, names=["n2"])])
    assert refusal(folder).endswith("sweeps[0].suspects: names 2 of the sweep's 3 nodes: a "
                                    "sweep names fewer than half (a majority of nodes cannot "
                                    "be the odd ones out)")
    other = tmp_path / "four"
    other.mkdir()
    folder = published(other, [UNREACHABLE_N3, dict(UNREACHABLE_N3, names=["n2"])],
                       hosts=["n1", "n2", "n3", "n4"])
    assert "names 2 of the sweep's 4 nodes" in refusal(folder)


def test_more_suspects_than_a_sweep_can_name_are_refused(tmp_path):
    pair = {"kind": "pair", "names": ["n1", "n2"], "metric": "bw_Mbps@8388608",
            "value": 300.0, "fleet_median": 950.0, "reference": None, "direction": "both",
            "evidence": [{"src": "n1", "dst": "n2", "metric": "bw_Mbps@8388608",
                          "value": 300.0, "bound": 712.5}]}
    folder = published(tmp_path, [pair] * 19)
    assert refusal(folder).endswith("sweeps[0].suspects: 19 suspects: more than a sweep of "
                                    "3 nodes can name (18)")


def test_a_session_that_swept_nothing_says_so(tmp_path):
    folder = published(tmp_path, None, data=minimal_report())
    for given in (folder, folder / "suspects.json"):
        message = refusal(given)
        assert message.endswith(": this session swept nothing: no suspects to drain"), message


def test_an_unknown_top_level_key_of_suspects_json_is_refused():
    data = {"session": SESSION, "sweeps": [], "drain_everything": True}
    with pytest.raises(DataError, match=r"^s.json: drain_everything: unknown key"):
        validate(data, slurmdrain.SESSION_SUSPECTS_SCHEMA, "s.json")


@pytest.mark.parametrize("given", ["/dev/zero", "fifo", "big"])
def test_a_suspects_file_that_is_no_bounded_regular_file_is_refused(tmp_path, given):
    if given == "fifo":
        given = str(tmp_path / "suspects.json")
        os.mkfifo(given)
        expected = "not a regular file (a FIFO)"
    elif given == "big":
        given = str(tmp_path / "suspects.json")
        with open(given, "wb") as f:
            f.truncate(50 << 20)
        expected = "larger than 32 MiB (the most netbench reads of a suspects file)"
    else:
        expected = "not a regular file (a character device)"
    assert refusal(given) == f"{given}: {expected}"


def test_drain_shows_a_hostile_path_as_its_escapes(tmp_path):
    """What `netbench drain` prints of what it was given never drives the
    terminal (here the path; a report's names reach the same line)."""
    hostile = tmp_path / "s\x1b]0;owned\x07\u202e"
    hostile.mkdir()
    proc = subprocess.run([sys.executable, "-m", "netbench.cli", "drain", "--dry-run",
                           str(hostile)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "\\x1b]0;owned\\x07\\u202e" in proc.stderr, proc.stderr
    assert not any(c in proc.stderr for c in "\x1b\x07\u202e"), proc.stderr


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

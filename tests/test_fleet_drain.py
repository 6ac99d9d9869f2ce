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
from netbench import report, slurmdrain, slurmresume
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
    healthy = slurmresume.judged_retest("n0", ["n1", "n2", "n3", "n4", "n5"], output, "")
    assert healthy["verdict"] == "pass" and len(healthy["pairs"]) == 30, healthy["why"]
    slow = slurmresume.judged_retest("n3", ["n0", "n1", "n2", "n4", "n5"], output, "")
    assert slow["verdict"] == "fail" and slow["why"].startswith("node n3: bw_Mbps@1048576")


def test_a_retest_whose_ranks_shared_a_host_fails_and_says_why():
    """The fleet's judge refuses ranks on one host (ValueError): `netbench
    resume` stopped on it with a traceback; the node stays drained."""
    found = slurmresume.judged_retest("vm", ["a", "b"], ONE_HOST_SWEEP.read_text(), "")
    assert found["verdict"] == "fail"
    assert found["why"].startswith("the re-test cannot be judged: ranks ran on one host (vm)")


# ---- netbench resume: the plan, without Slurm (#54) --------------------------

OURS = f"netbench: {SESSION}: bw_Mbps@1048576 31.5 vs fleet median 94"
SLURM_RESUME = DATA / "slurm_resume"


@pytest.mark.parametrize("partners", [1, 0, -1])
def test_resume_refuses_fewer_than_two_partners_in_one_line(partners):
    """One pair cannot say which end is slow: `--partners 1`, `0` and `-1`
    were accepted, and a node slowed to a fifth of its rate "passed"
    against its one partner.  Refused before Slurm is asked anything."""
    with pytest.raises(ValueError):
        drain.resume_plan(cluster(n1=("drained", OURS)), partners)
    with pytest.raises(DataError) as err:
        slurmresume.resume(dry_run=True, partners=partners)
    assert str(err.value) == (f"--partners: {partners}: use 2 or more (one pair cannot say "
                              f"which end is slow)")


def test_a_node_with_fewer_than_two_healthy_partners_stays_drained_inconclusive():
    """n1 is netbench's; of the others one is an administrator's, one is
    down: one healthy partner is not enough, and the node's new reason
    says so, still netbench's own."""
    nodes = cluster(n1=("drained", OURS), n2=("drained", "admin: bad DIMM"),
                    n3=("down", "Not responding"))
    plan = drain.resume_plan(nodes)
    assert plan.retest == []
    ((node, why),) = plan.inconclusive
    assert (node.name, why) == ("n1", "only 1 healthy partner(s) in service")
    reason = drain.inconclusive_reason(why)
    assert reason == "netbench: re-test inconclusive: only 1 healthy partner(s) in service"
    assert drain.is_netbench_reason(reason)
    assert [n.name for n in plan.left_alone] == ["n2"]


def test_resume_re_tests_only_netbench_s_drained_nodes_against_healthy_partners():
    nodes = {f"n{i}": drain.SlurmNode(f"n{i}", "idle") for i in range(1, 9)}
    nodes.update(n1=drain.SlurmNode("n1", "drained", OURS),
                 n2=drain.SlurmNode("n2", "drained", OURS),
                 n3=drain.SlurmNode("n3", "draining", OURS),       # jobs still on it
                 n4=drain.SlurmNode("n4", "drained", "admin: bad DIMM"),
                 n5=drain.SlurmNode("n5", "allocated"))
    plan = drain.resume_plan(nodes, partners=2)
    assert [n.name for n in plan.draining] == ["n3"]
    assert [n.name for n in plan.left_alone] == ["n4"]
    chosen = {node.name: partners for node, partners in plan.retest}
    assert set(chosen) == {"n1", "n2"}
    # partners in turn, each idle with no reason of anyone's
    assert chosen == {"n1": ["n6", "n7"], "n2": ["n8", "n6"]}


def test_a_node_read_again_is_changed_only_with_the_reason_netbench_planned_on():
    """LBNL NHC's rule: an administrator who drained the node with their own
    reason while resume re-tested it (or resumed it, or took it down) owns
    it: resume read Slurm's list once and returned such a node."""
    planned = drain.SlurmNode("n1", "drained", OURS)
    assert drain.unchanged_since_planned(planned, drain.SlurmNode("n1", "drained", OURS)) \
        is None
    for now in (drain.SlurmNode("n1", "drained", "admin: reseat the cable"),
                drain.SlurmNode("n1", "idle"), drain.SlurmNode("n1", "down", OURS),
                drain.SlurmNode("n1", "drained", "netbench: another session: ...")):
        why = drain.unchanged_since_planned(planned, now)
        assert why.startswith(f"n1 is now {now.state}") and "left as it is" in why
    assert drain.unchanged_since_planned(planned, None) == \
        "n1 is no longer in Slurm's node list"


def test_sinfo_as_captured_is_planned():
    nodes = drain.parse_sinfo((SLURM_RESUME / "sinfo-4.txt").read_text())
    plan = drain.resume_plan(nodes)
    assert [(n.name, p) for n, p in plan.retest] == [("rsmxpl-n1", ["rsmxpl-n3", "rsmxpl-n4"])]
    assert [(n.name, n.reason) for n in plan.left_alone] == [("rsmxpl-n2", "admin: bad DIMM")]


def test_a_resume_of_1000_drained_nodes_is_planned_from_sinfo_s_listing():
    """The listing of tests/data/slurm_resume (its README): the plan the
    dry run prints (`make bench-report` times it: resumebench)."""
    nodes = drain.parse_sinfo((SLURM_RESUME / "sinfo-1000-drained.txt").read_text())
    assert len(nodes) == 4000
    plan = drain.resume_plan(nodes)
    assert len(plan.retest) == 1000 and len(plan.draining) == 5
    assert len(plan.left_alone) == 20 and plan.inconclusive == []
    retested = {n.name for n, _ in plan.retest}
    partners = {p for _, ps in plan.retest for p in ps}
    assert not partners & retested
    assert all(nodes[p].state == "idle" and not nodes[p].reason for p in partners)
    lines = list(slurmresume.plan_lines(plan))
    assert len(lines) == 1025 and sum(line.startswith("would re-test ") for line in lines) == 1000


# ---- the re-test judged as the sweep judges (#54) ------------------------------

def sweep_of(output, hosts):
    """The benchmark's sweep output cut down to the pairs among `hosts`
    (its rank lines name each rank's host; pairs are ranks)."""
    ranks = {line.split()[2]: line.split()[4] for line in output.splitlines()
             if line.startswith("# rank ")}
    kept = []
    for line in output.splitlines():
        words = line.split()
        if line.startswith("# rank ") and words[4] not in hosts:
            continue
        if words and words[0].isdigit() and (ranks[words[1]] not in hosts
                                            or ranks[words[2]] not in hosts):
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def profile_judging():
    from netbench import paths, references
    from netbench.judgement import knobs
    return slurmresume.Judging(latency_judged=False,
                              knobs=knobs.load(paths.REFERENCES, "virtual-cluster"),
                              rule=references.sweep_thresholds(paths.REFERENCES,
                                                               "virtual-cluster"))


def node_lines(pressures):
    """The benchmark's `# node` lines (reframe_checks/src/netbench.c,
    print_node_conditions) for {host: CPU pressure %}."""
    return "".join(f"# node {host} cpu_pressure {p:.2f} ranks 1 cpus 2 rank_wait 1.00\n"
                   for host, p in pressures.items())


HOSTS6 = ["n0", "n1", "n2", "n3", "n4", "n5"]


def test_a_retest_never_names_a_partner_in_its_evidence():
    """n3, a partner, is slow: the re-test of n0 passes (four healthy
    partners), and its evidence names no partner as a slow node."""
    found = slurmresume.judged_retest("n0", HOSTS6[1:], SLOW_NODE_SWEEP.read_text(), "",
                                     profile_judging())
    assert found["verdict"] == "pass", found["why"]
    assert found["suspects"] == []


def test_a_retest_whose_partner_measures_slow_cannot_pass_the_node():
    """Two partners, one of them slow: the node's pairs with the other are
    all the re-test holds it to, as with one partner: inconclusive, and
    the partner is not named."""
    output = sweep_of(SLOW_NODE_SWEEP.read_text(), {"n0", "n1", "n3"})
    found = slurmresume.judged_retest("n0", ["n1", "n3"], output, "", profile_judging())
    assert found["verdict"] == "inconclusive"
    assert found["why"] == ("re-test inconclusive: only 1 of its 2 partners measured healthy "
                            "(a partner's own state is Slurm's to say)")
    assert found["suspects"] == [] and "n3" not in found["why"]


def test_a_slow_node_fails_against_two_healthy_partners():
    output = sweep_of(SLOW_NODE_SWEEP.read_text(), {"n0", "n1", "n3"})
    found = slurmresume.judged_retest("n3", ["n0", "n1"], output, "", profile_judging())
    assert found["verdict"] == "fail" and found["why"].startswith("node n3: bw_Mbps@1048576")
    assert [s["names"] for s in found["suspects"]] == [["n3"]]


def test_a_retest_on_a_busy_host_is_judged_with_the_sweep_s_conditions_rule():
    """The host's CPU pressure on the node explains its miss (fleet.judge.
    unconfirmed, as the sweep judges): not a pass, not a fail: the node
    stays drained, inconclusive, with the conditions named."""
    output = SLOW_NODE_SWEEP.read_text() + node_lines(
        {h: 85.0 if h == "n3" else 5.0 for h in HOSTS6})
    found = slurmresume.judged_retest("n3", [h for h in HOSTS6 if h != "n3"], output, "",
                                     profile_judging())
    assert found["verdict"] == "inconclusive"
    assert found["why"].startswith("re-test inconclusive: outside the band, but ")
    assert "on n3" in found["why"] and "85 %" in found["why"]
    # on a quiet host the same figures fail it
    quiet = SLOW_NODE_SWEEP.read_text() + node_lines(dict.fromkeys(HOSTS6, 5.0))
    assert slurmresume.judged_retest("n3", [h for h in HOSTS6 if h != "n3"], quiet, "",
                                    profile_judging())["verdict"] == "fail"


# ---- the evidence: checked first, written after each node (#54) ----------------

def test_the_evidence_path_is_refused_before_anything_changes(tmp_path):
    """A folder, or a path netbench cannot write: one line naming
    --evidence (resume re-tested and resumed nodes, then died with a
    traceback and lost the record of what it resumed)."""
    with pytest.raises(DataError) as err:
        slurmresume.checked_evidence_path(tmp_path)
    assert str(err.value) == f"--evidence: {tmp_path}: a folder: name a file to write"
    (tmp_path / "file").write_text("")
    with pytest.raises(DataError) as err:
        slurmresume.checked_evidence_path(tmp_path / "file" / "resume.json")
    assert str(err.value).startswith(f"--evidence: {tmp_path}/file/resume.json: cannot be "
                                     f"written: ")
    assert "\n" not in str(err.value)
    # checked, not written: a refusal after it leaves nothing behind
    assert not slurmresume.checked_evidence_path(tmp_path / "resume.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_the_evidence_is_written_after_each_node(tmp_path):
    import io
    path = slurmresume.checked_evidence_path(tmp_path / "resume.json")
    results = []
    slurmresume.record(results, {"node": "n1", "partners": ["n2", "n3"], "verdict": "pass",
                                "why": "no suspect", "action": "resumed"}, path, io.StringIO())
    written = json.loads(path.read_text())
    assert written["finished"] is False
    assert [(n["node"], n["action"]) for n in written["nodes"]] == [("n1", "resumed")]

"""A virtual cluster built from a topology (`vcluster up --topology`,
netbench/vcluster/fabric.py) and the fabric sweep on it (issue 36).

Without a sweep: the switches are bridges, each joined to its parent by a
shaped link, the nodes hang on their leaf; `fault --switch-link` slows
one direction of one such link and clears it; a bad topology is refused
in one line with nothing left; `down` leaves nothing.

With a sweep (a 9-node cluster from a topology.conf of three leaves under
one spine, 100mbit links): a slowed uplink of one leaf is named as that
switch link alone, and no node or other link with it.  On a host this
busy the suspects come as unconfirmed (judgement.conditions: named, not
drained); they must still be the right component.  That a healthy fabric
names nothing and a slowed node is the node alone is counted, 5 sweeps
each, by `make bench-sweep-topology` (validation.md); a slowed node on a
flat fabric is tests/test_link_sweep.py's."""

import json
import os
import subprocess

import pytest

from helpers.vcluster import cluster, netbench_cli, require_root
from netbench import vcluster
from helpers import conditions_differed
from netbench.rfm import session


def write_topology(tmp_path, name, leaves=3, per_leaf=3):
    path = tmp_path / "topology.conf"
    lines = [f"SwitchName=spine Switches=leaf[1-{leaves}]"]
    for leaf in range(leaves):
        first = leaf * per_leaf + 1
        lines.append(f"SwitchName=leaf{leaf + 1} Nodes={name}-n[{first}-{first + per_leaf - 1}]")
    path.write_text("\n".join(lines) + "\n")
    return path


def master_of(link):
    info = json.loads(subprocess.run(["ip", "-j", "link", "show", "dev", link],
                                     capture_output=True, text=True, check=True).stdout)
    return info[0].get("master")


def tbf_mbit(dev):
    out = subprocess.run(["tc", "-j", "qdisc", "show", "dev", dev], capture_output=True,
                         text=True, check=True).stdout
    for q in json.loads(out):
        if q.get("kind") == "tbf":
            return round(q["options"]["rate"] * 8 / 1e6)
    return None


def test_the_fabric_is_built_faulted_and_taken_down(tmp_path):
    topology = write_topology(tmp_path, "tofab", leaves=2, per_leaf=2)
    with cluster("tofab", rate="100mbit", topology=str(topology)) as state:
        assert len(state["nodes"]) == 4
        switches = {s["name"]: s for s in state["fabric"]["switches"]}
        assert switches["spine"]["bridge"] == state["bridge"]
        for leaf in ("leaf1", "leaf2"):
            s = switches[leaf]
            assert master_of(s["up"]) == s["bridge"] and master_of(s["down"]) == state["bridge"]
            # a non-blocking uplink: the nodes' rate times the nodes below
            assert tbf_mbit(s["up"]) == tbf_mbit(s["down"]) == 200
        assert [master_of(n["veth"]) for n in state["nodes"]] == [
            switches["leaf1"]["bridge"]] * 2 + [switches["leaf2"]["bridge"]] * 2
        # a node on leaf1 reaches one on leaf2 across the spine
        across = vcluster.ssh_command(
            state, state["nodes"][0]["name"],
            f"bash -c 'exec 3<>/dev/tcp/{state['nodes'][3]['address']}/22'")
        assert subprocess.run(across, capture_output=True, timeout=30).returncode == 0
        extras = json.loads(open(state["files"]["reframe_system"]).read())[0][
            "partitions"][0]["extras"]
        assert open(extras["topology"]).read().count("SwitchName=") == 3

        proc = netbench_cli("vcluster", "fault", "--name", "tofab", "--switch-link", "leaf2",
                            "--rate", "50mbit", "--direction", "out")
        assert proc.returncode == 0, proc.stderr
        assert (tbf_mbit(switches["leaf2"]["up"]), tbf_mbit(switches["leaf2"]["down"])) == \
            (50, 200)
        assert tbf_mbit(switches["leaf1"]["up"]) == 200
        status = json.loads(netbench_cli("vcluster", "status", "--name", "tofab",
                                         "--json").stdout)[0]
        assert status["faults"] == [{"switch_link": "leaf2", "rate": "50mbit",
                                     "rate_mbps": 50.0, "direction": "out"}]
        assert status["drift"] == []
        for args, message in ((["--switch-link", "spine", "--rate", "1mbit"],
                               "switch spine is the top switch"),
                              (["--switch-link", "leaf9", "--rate", "1mbit"], "no switch 'leaf9'"),
                              (["--switch-link", "leaf1"], "needs --rate")):
            proc = netbench_cli("vcluster", "fault", "--name", "tofab", *args)
            assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1
        assert netbench_cli("vcluster", "fault", "--name", "tofab", "--switch-link", "leaf2",
                            "--clear").returncode == 0
        assert tbf_mbit(switches["leaf2"]["up"]) == 200
    assert not [link for link in subprocess.run(["ip", "-br", "link"], capture_output=True,
                                                text=True).stdout.split()
                if link.startswith("nb-tofab")]


@pytest.mark.parametrize("text,problem", [
    ("SwitchName=top Switches=a\nSwitchName=a Nodes=tobad-n[1-2],other\n",
     "line 2: unknown node other"),
    ("SwitchName=top Switches=a\nSwitchName=a Switches=top Nodes=tobad-n[1-2]\n",
     "switch loop"),
    ("SwitchName=a Nodes=tobad-n[1-2]\nSwitchName=b Nodes=tobad-n2\n",
     "line 2: node tobad-n2 is under two leaves"),
    ("SwitchName=a Nodes=tobad-n[1-2\n", "line 1: hostlist"),
    ("SwitchName=a Nodes=tobad-n[1-2]\nSwitchName=b Nodes=tobad-n3\n",
     "2 top switches"),
])
def test_a_bad_topology_is_refused_in_one_line_and_nothing_is_left(tmp_path, text, problem):
    require_root()
    path = tmp_path / "topology.conf"
    path.write_text(text)
    proc = netbench_cli("vcluster", "up", "--name", "tobad", "--topology", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(path) in proc.stderr and problem in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert vcluster.leftovers("tobad") == []


def test_a_topology_of_too_many_nodes_is_refused_for_what_it_names(tmp_path):
    """Not as `--nodes N`, an option never given, and before a name is
    made for each of its nodes."""
    path = tmp_path / "topology.conf"
    path.write_text("SwitchName=a Nodes=tobig-n[1-100000]\n")
    with pytest.raises(vcluster.VclusterError) as err:
        vcluster.up("tobig", topology=str(path))
    assert str(err.value) == f"--topology {path}: names 100000 nodes: a cluster has 1 to 64"
    with pytest.raises(vcluster.VclusterError, match=r"^--nodes 100000: use 1 to 64$"):
        vcluster.up("tobig", nodes=100000, topology=str(path))


def test_a_topology_the_caller_cannot_read_is_never_quoted(tmp_path):
    """Through sudo, root reads what the user names: a file the user could
    not read themselves (/etc/shadow's mode) is refused without its lines;
    one they could read keeps the line that says what is wrong."""
    require_root()
    path = tmp_path / "topology.conf"
    path.write_text("S3cret-entry:x:0:0\n")
    for mode, quoted in ((0o600, False), (0o644, True)):
        path.chmod(mode)
        proc = netbench_cli("vcluster", "up", "--name", "tosec", "--topology", str(path),
                            env={**os.environ, "SUDO_UID": "65534"})
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.startswith(f"netbench vcluster: --topology {path}: line 1: ")
        assert ("S3cret-entry" in proc.stderr) == quoted, proc.stderr
    assert vcluster.leftovers("tosec") == []


# ---- the sweep on a 9-node fabric ------------------------------------------------

#: one MPI, one pair at a time and 64 KiB streams, which reach a 100 Mbit/s
#: link's rate as 1 MiB ones do, in a third of the time (docs/validation.md,
#: "The test suite's time"); bench-sweep's topology sweeps count 1 MiB
SWEEP = ["-t", "sweep", "-p", "^mpich$", "-S", "LinkSweep.sizes=65536",
         "-S", "LinkSweep.concurrent=false"]


@pytest.fixture(scope="module")
def nine(tmp_path_factory):
    topology = write_topology(tmp_path_factory.mktemp("fabric"), "tosw")
    with cluster("tosw", rate="100mbit", topology=str(topology)) as state:
        yield state


def swept(state):
    """(the ReFrame process, what the sweep named or left unconfirmed
    because the host was too busy to tell: judgement.conditions), each
    {(kind, component, direction)}."""
    proc = session.run_reframe(state["system"], *SWEEP, timeout=900)
    cases = [tc for run in session.latest_report()["runs"][-1:] for tc in run["testcases"]
             if tc["name"].startswith("LinkSweep")]
    assert len(cases) == 1, proc.stdout[-3000:]
    fleet = cases[0]["record"]["fleet"]
    if fleet.get("unconfirmed"):
        assert conditions_differed(cases[0]["record"]["host"]), cases[0]["record"]["host"]
    assert list(fleet["leaves"]) == [n["name"] for n in state["nodes"]]
    return proc, {(s["kind"], s["component"], s["direction"])
                  for s in fleet["suspects"] + fleet.get("unconfirmed", [])}


def swept_with_fault(nine, set_fault, target):
    """swept(nine) while `set_fault(cluster, target, ...)` slows `target`
    to 50mbit, cleared after even on failure."""
    set_fault("tosw", target, rate="50mbit")
    try:
        return swept(nine)
    finally:
        set_fault("tosw", target, clear_fault=True)


def test_a_slowed_uplink_is_that_switch_link_alone(nine):
    proc, found = swept_with_fault(nine, vcluster.set_switch_link_fault, "leaf2")
    assert proc.returncode in (1, 3), proc.stdout[-3000:]
    assert found == {("switch-link", "leaf2<->spine", "both")}


def test_a_fabric_that_fails_half_way_leaves_nothing(tmp_path, monkeypatch):
    """A failure while the switches are built (here shaping the second
    uplink) takes back every bridge and link made before it."""
    require_root()
    from netbench.vcluster import fabric
    real_shape = fabric.shape

    def failing_shape(prefix, dev, link):
        if dev.endswith("-u2"):
            raise vcluster.VclusterError("tc: injected failure")
        return real_shape(prefix, dev, link)
    monkeypatch.setattr(fabric, "shape", failing_shape)
    topology = write_topology(tmp_path, "tofail", leaves=2, per_leaf=1)
    vcluster.down("tofail")
    with pytest.raises(vcluster.VclusterError, match="injected failure"):
        vcluster.up("tofail", rate="100mbit", topology=str(topology))
    assert vcluster.leftovers("tofail") == []


# ---- two leaves: the fault is the majority (issue 54) ------------------------------

@pytest.fixture(scope="module")
def two_leaves(tmp_path_factory):
    """Two leaves of three nodes under one spine, 100mbit: 9 of its 15
    pairs cross the leaves."""
    topology = write_topology(tmp_path_factory.mktemp("fabric2"), "tomaj", leaves=2,
                              per_leaf=3)
    with cluster("tomaj", rate="100mbit", topology=str(topology)) as state:
        yield state


def sweep_case(state, *extra):
    """(the ReFrame process, the LinkSweep case of its run report)."""
    proc = session.run_reframe(state["system"], *SWEEP, *extra, timeout=900)
    cases = [tc for run in session.latest_report()["runs"][-1:] for tc in run["testcases"]
             if tc["name"].startswith("LinkSweep")]
    assert len(cases) == 1, proc.stdout[-3000:]
    return proc, cases[0]


def test_a_slowed_uplink_between_two_leaves_is_named_as_their_path(two_leaves):
    """Every pair across the leaves is slow, most of the fleet's pairs:
    held to the pairs under the leaves, they name the path between them
    (no pair can tell leaf1's uplink from leaf2's), and no node."""
    vcluster.set_switch_link_fault("tomaj", "leaf2", rate="50mbit")
    try:
        proc, case = sweep_case(two_leaves)
    finally:
        vcluster.set_switch_link_fault("tomaj", "leaf2", clear_fault=True)
    fleet = case["record"]["fleet"]
    if fleet.get("unconfirmed"):
        assert conditions_differed(case["record"]["host"]), case["record"]["host"]
    named = fleet["suspects"] + fleet.get("unconfirmed", [])
    assert proc.returncode in (1, 3), proc.stdout[-3000:]
    # the path, once, and no node nor other switch link; a pair under one
    # leaf measured slow in both passes beside it was seen once in CI (a
    # pair suspect, not the fault: what this test holds is the path)
    assert [(s["component"], s["direction"]) for s in named if s["kind"] != "pair"] == \
        [("leaf1<->spine<->leaf2", "both")], fleet
    assert not any(s["kind"] == "node" for s in named)


def test_a_sweep_that_outlives_its_limit_keeps_its_measured_pairs(two_leaves):
    """A time limit too short for the sweep (20 timed batches a direction,
    1 MiB, against 30 s): its launch ends before the job's limit, and the
    case judges the pairs measured, naming the ones it did not reach;
    never ReFrame's "job timed out" with nothing kept."""
    proc, case = sweep_case(two_leaves, "-S", "LinkSweep.sizes=1048576",
                            "-S", "LinkSweep.min_samples=20", "-S", "LinkSweep.time_limit=30")
    fleet = case["record"]["fleet"]
    reason = case["fail_reason"] or ""
    assert case["result"] == "fail", proc.stdout[-3000:]
    assert "timed out" not in reason, reason
    assert "the sweep reached the job's 30 s time limit after " in reason, reason
    measured = {(p["src"], p["dst"]) for p in fleet["pairs"]}
    assert measured, reason
    assert fleet["not_measured"] and fleet["time_limit_s"] == 30
    every = {(a["name"], b["name"]) for a in two_leaves["nodes"] for b in two_leaves["nodes"]
             if a != b}
    assert {tuple(d.split("->")) for d in fleet["not_measured"]} == every - measured
    assert fleet["no_answer"] == "the sweep reached the job's time limit"

"""A fabric's topology from the site's files (netbench/fleet/topology.py):
Slurm's topology.conf and netbench's YAML give the same tree, hostlists
expand as Slurm's do, and every bad file is refused in one line naming
the file, the line and the problem."""

import pytest

from netbench import paths
from netbench.datafiles import DataError
from netbench.fleet import topology

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

DATA = paths.REPO / "tests" / "data" / "topology"
NINE = [f"node{i:02d}" for i in range(1, 10)]


@pytest.mark.parametrize("text,names", [
    ("tux[0-3,12]", ["tux0", "tux1", "tux2", "tux3", "tux12"]),
    ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
    ("a,b[1-2],c", ["a", "b1", "b2", "c"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
    ("plain", ["plain"]),
])
def test_hostlists_expand_as_slurms_do(text, names):
    assert topology.expand_hostlist(text) == names


@pytest.mark.parametrize("name", ["three_leaves.conf", "three_leaves.yaml"])
def test_both_files_give_the_same_tree(name):
    topo = topology.load_topology(DATA / name, known=set(NINE))
    assert topo.roots == ["spine"]
    assert topo.children["spine"] == ["leaf1", "leaf2", "leaf3"]
    assert topo.all_nodes() == NINE
    assert topo.leaf_of()["node05"] == "leaf2"
    assert topo.path_up("leaf3") == ["leaf3", "spine"]
    assert topo.below()["spine"] == set(NINE) and topo.below()["leaf1"] == set(NINE[:3])


BAD = [
    ("SwitchName=s1 Nodes=n[1-3]\nSwitchName=s2 Nodes=n9\n", "line 2", "unknown node n9"),
    ("SwitchName=s1 Switches=s2\nSwitchName=s2 Switches=s1 Nodes=n[1-3]\n", "line",
     "switch loop"),
    ("SwitchName=s1 Switches=s1 Nodes=n[1-3]\n", "line 1", "switch loop: s1 is under itself"),
    ("SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n[2-3]\n", "line 2",
     "node n2 is under two leaves: s1 and s2"),
    ("SwitchName=s1 Nodes=n[1-3\n", "line 1", "'[' without ']'"),
    ("SwitchName=s1 Nodes=n[1-x]\n", "line 1", "'1-x' is not a number or a range"),
    ("SwitchName=s1 Nodes=n[3-1]\n", "line 1", "runs backwards"),
    ("SwitchName=s1 Nodes=n1,,n2\n", "line 1", "an empty name"),
    ("# comment\nSwitchName=top Switches=s[1-2]\nSwitchName=s1 Nodes=n[1-3]\n", "line 2",
     "switch s2 under top is defined by no line"),
    ("SwitchName=s1 Nodes=n[1-3] Bogus=1\n", "line 1", "unknown parameter 'Bogus'"),
    ("BlockName=b1 Nodes=n[1-3]\n", "line 1", "unknown parameter 'BlockName'"),
    ("SwitchName=s1 Nodes=n[1-2]\n", "", "node n3 of the cluster is under no switch"),
    ("# nothing\n", "", "no SwitchName line"),
]


@pytest.mark.parametrize("text,where,problem", BAD)
def test_a_bad_topology_conf_is_refused_in_one_line(tmp_path, text, where, problem):
    path = tmp_path / "topology.conf"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        topology.load_topology(path, known={"n1", "n2", "n3"})
    message = str(err.value)
    assert message.startswith(f"{path}: {where}") and problem in message, message
    assert "\n" not in message


def test_a_bad_yaml_topology_names_the_switch(tmp_path):
    path = tmp_path / "fabric.yaml"
    path.write_text("switches:\n  top: {switches: [a]}\n  a: {nodes: 'n[1-2'}\n")
    with pytest.raises(DataError, match=r"fabric.yaml: switches.a: hostlist 'n\[1-2'"):
        topology.load_topology(path)


def test_case_insensitive_keys_and_comments(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("switchname=s1 NODES=n[1-2]  # the only leaf\n")
    assert topology.load_topology(path).nodes == {"s1": ["n1", "n2"]}


@pytest.mark.parametrize("text,problem", [
    # counted from its brackets before any name is built: a product of 10^9
    ("n[1-1000]x[1-1000]y[1-1000]", f"names more than {topology.MAX_NAMES} hosts"),
    ("n[1-1048576],extra", f"names more than {topology.MAX_NAMES} hosts"),
    # Slurm reads ASCII digits; Python's int() and \d take Arabic-Indic ones
    ("n[\u0661-\u0663]", "is not a number or a range (ASCII digits)"),
    ("n[1-\u0663]", "is not a number or a range (ASCII digits)"),
    # a traceback (int() of 5000 digits) before; shown cut short
    ("n[" + "9" * 5000 + "]", "a number of more than"),
    ("n[1-" + "9" * 5000 + "]", "a number of more than"),
])
def test_a_hostlist_is_checked_before_it_is_built(text, problem):
    with pytest.raises(topology._Problem) as err:
        topology.expand_hostlist(text)
    message = str(err.value)
    assert problem in message and len(message) < 200, message


def test_a_hostlist_at_the_limit_still_expands():
    names = topology.expand_hostlist(f"n[1-{topology.MAX_NAMES}]")
    assert len(names) == topology.MAX_NAMES and names[-1] == f"n{topology.MAX_NAMES}"


def test_a_huge_hostlist_in_a_topology_file_is_one_line(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("SwitchName=s1 Nodes=n[1-1000]x[1-1000]y[1-1000]\n")
    with pytest.raises(DataError, match=rf"^{path}: line 1: hostlist .* names more than"):
        topology.load_topology(path)


@pytest.mark.parametrize("kind", ["device", "directory", "fifo"])
def test_a_topology_that_is_no_regular_file_is_refused(tmp_path, kind):
    import os
    path = {"device": "/dev/zero", "directory": str(tmp_path)}.get(kind)
    if kind == "fifo":
        path = str(tmp_path / "topology.conf")
        os.mkfifo(path)
    with pytest.raises(DataError) as err:
        topology.load_topology(path)
    assert str(err.value).startswith(f"{path}: not a regular file"), err.value


def test_a_partitions_topology_must_name_every_swept_node():
    """The sweep's judgement leaves a node the file does not name out of
    every switch: a file for another partition is refused, one line."""
    path = DATA / "three_leaves.conf"
    assert topology.partition_topology(path, NINE[:4]).leaf_of()["node01"] == "leaf1"
    with pytest.raises(DataError) as err:
        topology.partition_topology(path, NINE + ["node10", "node11"])
    assert str(err.value) == (f"{path}: node node10 of the partition is under no switch "
                              f"(2 of its 11 nodes are not in the file: not this "
                              f"partition's topology)")

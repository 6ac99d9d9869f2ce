"""A cluster built from a topology (`vcluster up --topology FILE`): a bridge
per switch, a shaped link between each switch and its parent, each node on
its leaf.

The file is Slurm's topology.conf or netbench's YAML
(netbench.fleet.topology), naming the cluster's own nodes (`<name>-n1` ...
`<name>-nN`) under one top switch.  The top switch is the cluster's bridge
`nb-<name>` (the head and Slurm's controller hang on it); every other
switch k (in depth-first order, from 1) is the bridge `nb-<name>-s<k>`,
joined to its parent's bridge by a veth pair: `nb-<name>-u<k>` on the
switch's side, `nb-<name>-d<k>` on the parent's.  Each end's egress is
shaped (tbf): `u<k>` what leaves the switch's subtree (`out`, as for a
node), `d<k>` what enters it (`in`), at the cluster's rate times the nodes
below the switch, a non-blocking fabric's uplink: a healthy uplink is
never what limits a pair, nor a round of pairs at once.  (At the nodes'
own rate, four token buckets of one rate in a row halved a third of the
crossing pairs of a healthy 9-node sweep on a busy host.)  `vcluster
fault --switch-link SWITCH --rate R` slows one direction or both to R.

The cluster keeps its own copy of the topology, written from what was
parsed (`topology.conf` in its root-owned folder), which its ReFrame
partition names (extras `topology`) for the sweep's judgement.
"""

from ..datafiles import DataError, caller_may_read, without_contents
from ..fleet.topology import load_topology
from .names import MAX_NODES, VclusterError, bridge_name, host_name, link_settings
from .netns import delete_link, run, shape

#: the file the cluster's folder keeps (systems.py names it to ReFrame)
TOPOLOGY_FILE = "topology.conf"
#: what a topology file that does not read is not, in an error that must
#: not quote it (datafiles.without_contents)
TOPOLOGY_KIND = ("a topology netbench reads (Slurm's topology.conf, or netbench's topology "
                 "YAML by its .yaml suffix)")
#: switch k's bridge and link ends must fit IFNAMSIZ: nb-<6>-s<2 digits>
MAX_SWITCHES = 99


def read_topology(path, name, nodes=None):
    """The Topology of `path` for cluster `name`: its nodes are the
    cluster's (`nodes` of them, else as many as the file names), under
    one top switch.  VclusterError in one line naming the file otherwise."""
    try:
        count = nodes or len(load_topology(path).all_nodes())
        if not 1 <= count <= MAX_NODES:     # before a name is made for each
            raise VclusterError(f"--topology {path}: names {count} nodes: a cluster has 1 "
                                f"to {MAX_NODES}")
        topology = load_topology(path, known={host_name(name, i)
                                              for i in range(1, count + 1)})
    except DataError as err:
        # root reads it: quoted only where the caller could read it anyway
        shown = err if caller_may_read(path) else without_contents(err, TOPOLOGY_KIND)
        raise VclusterError(f"--topology {shown}") from err
    if len(topology.roots) != 1:
        raise VclusterError(f"--topology {path}: {len(topology.roots)} top switches "
                            f"({', '.join(topology.roots)}): a cluster's fabric is one tree")
    if len(topology.switches) > MAX_SWITCHES:
        raise VclusterError(f"--topology {path}: {len(topology.switches)} switches: at most "
                            f"{MAX_SWITCHES}")
    return topology


def conf_text(topology):
    """topology.conf of a Topology, as Slurm reads it (one switch a line)."""
    lines = ["# written by netbench vcluster from the topology it was brought up with"]
    for switch in topology.ordered_switches():
        parts = [f"SwitchName={switch}"]
        if topology.children[switch]:
            parts.append("Switches=" + ",".join(topology.children[switch]))
        if topology.nodes[switch]:
            parts.append("Nodes=" + ",".join(topology.nodes[switch]))
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def fabric_of(name, topology):
    """The state's `fabric`: {"conf": topology.conf text, "switches":
    [{"name", "parent", "bridge", and below the top "up", "down"}],
    "leaf_of": {node: switch}}."""
    switches = []
    below = topology.below()
    for k, switch in enumerate(topology.ordered_switches()):
        entry = {"name": switch, "parent": topology.parent[switch],
                 "bridge": bridge_name(name) if k == 0 else f"nb-{name}-s{k}",
                 "nodes_below": len(below[switch])}
        if k:
            entry.update(up=f"nb-{name}-u{k}", down=f"nb-{name}-d{k}")
        switches.append(entry)
    return {"conf": conf_text(topology), "switches": switches,
            "leaf_of": topology.leaf_of()}


def switch_of(fabric, switch):
    for entry in fabric["switches"]:
        if entry["name"] == switch:
            return entry
    names = ", ".join(s["name"] for s in fabric["switches"] if s["parent"])
    raise VclusterError(f"no switch {switch!r} with a link to a parent (switches: {names})")


def uplink_link(link, switch):
    """The link settings of `switch`'s link to its parent, healthy: the
    cluster's `link` at its rate times the nodes below the switch
    (unshaped when the cluster's links are)."""
    if link["rate_mbps"] is None:
        return link
    return link_settings(f"{link['rate_mbps'] * switch['nodes_below']:g}mbit", link["mtu"],
                         link["interconnect"], switch_mtu=link["switch_mtu"], validate=False)


def build_switches(fabric, link, undo):
    """Every switch below the top (whose bridge the cluster makes): its
    bridge, and its link to its parent, shaped both ways (uplink_link).
    Parents come first (depth-first order)."""
    bridges = {s["name"]: s["bridge"] for s in fabric["switches"]}
    mtu = str(link["switch_mtu"])
    for switch in fabric["switches"][1:]:
        undo.push(delete_link, switch["bridge"])
        run(["ip", "link", "add", switch["bridge"], "mtu", mtu, "type", "bridge"])
        run(["ip", "link", "set", switch["bridge"], "up"])
        undo.push(delete_link, switch["up"])
        run(["ip", "link", "add", switch["up"], "mtu", mtu, "type", "veth",
             "peer", "name", switch["down"], "mtu", mtu])
        run(["ip", "link", "set", switch["up"], "master", switch["bridge"], "up"])
        run(["ip", "link", "set", switch["down"], "master", bridges[switch["parent"]], "up"])
        shape([], switch["up"], uplink_link(link, switch))
        shape([], switch["down"], uplink_link(link, switch))


def leaf_bridge(fabric, node_name):
    """The bridge of the leaf `node_name` hangs on."""
    leaf = fabric["leaf_of"][node_name]
    return next(s["bridge"] for s in fabric["switches"] if s["name"] == leaf)

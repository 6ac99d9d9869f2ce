"""Faults on one node of a running cluster, the kinds a fabric sweep must
find on a real one: a link at the wrong rate (a cable that negotiated
100 Mbit/s, a port at a third of its speed), in one direction or both, and
a node whose interface MTU is smaller than the switch's (a node left
untuned among jumbo-frame nodes).  `netbench vcluster fault` sets one,
`--clear` restores the node to the cluster's link settings; the cluster's
state records them, so `status` shows a degraded cluster as such.

Directions are the node's: `out` shapes what the node sends (its own
interface, inside its namespace), `in` what it receives (the host end of
its link, the switch port's egress).
"""

from .cluster import require_root, running_state
from .names import (STATE_FILE, VclusterError, check_name, cluster_folder, link_settings,
                    parse_rate)
from .netns import run, shape
from .registry import locked, write_json

DIRECTIONS = ("in", "out", "both")


def node_of(state, node):
    """The node of `state` named `node` (its name, or its index from 1)."""
    for i, n in enumerate(state["nodes"], 1):
        if node in (n["name"], str(i)):
            return n
    names = ", ".join(n["name"] for n in state["nodes"])
    raise VclusterError(f"no node {node!r} in cluster {state['name']} (nodes: {names})")


def degraded_link(state, rate):
    """The cluster's link settings at another rate (its MTU, its bucket)."""
    link = state["link"]
    return link_settings(rate, link["mtu"], link["interconnect"],
                         switch_mtu=link.get("switch_mtu"), validate=False)


def apply(state, node, rate=None, direction="both", mtu=None):
    """Shape `node`'s link to `rate` in `direction` and/or set its interface
    MTU to `mtu`; returns the fault as recorded."""
    if direction not in DIRECTIONS:
        raise VclusterError(f"--direction {direction}: one of {', '.join(DIRECTIONS)}")
    if rate is None and mtu is None:
        raise VclusterError("a fault needs --rate, --mtu or both")
    fault = {"node": node["name"]}
    if rate is not None:
        if parse_rate(rate) is None:
            raise VclusterError(f"--rate {rate}: a fault needs a rate (e.g. 333mbit)")
        link = degraded_link(state, rate)
        if direction in ("out", "both"):
            shape(["ip", "netns", "exec", node["namespace"]], "eth0", link)
        if direction in ("in", "both"):
            shape([], node["veth"], link)
        fault.update(rate=link["rate"], rate_mbps=link["rate_mbps"], direction=direction)
    if mtu is not None:
        if not 576 <= int(mtu) <= state["link"].get("switch_mtu", state["link"]["mtu"]):
            raise VclusterError(f"--mtu {mtu}: use 576 to the switch's "
                                f"{state['link'].get('switch_mtu', state['link']['mtu'])}")
        run(["ip", "-n", node["namespace"], "link", "set", "eth0", "mtu", str(mtu)])
        fault["mtu"] = int(mtu)
    return fault


def clear(state, node):
    """`node` back to the cluster's link settings (rate both ways, MTU)."""
    link = state["link"]
    run(["ip", "-n", node["namespace"], "link", "set", "eth0", "mtu", str(link["mtu"])])
    if link["rate_mbps"] is None:
        for argv in (["ip", "netns", "exec", node["namespace"], "tc", "qdisc", "del", "dev",
                      "eth0", "root"], ["tc", "qdisc", "del", "dev", node["veth"], "root"]):
            run(argv, check=False)          # no qdisc: nothing to remove
    else:
        shape(["ip", "netns", "exec", node["namespace"]], "eth0", link)
        shape([], node["veth"], link)


def set_fault(name, node, rate=None, direction="both", mtu=None, clear_fault=False):
    """Set (or with `clear_fault` remove) a fault on one node of cluster
    `name`; returns the cluster's state with its `faults`."""
    check_name(name)
    require_root()
    with locked():
        state = running_state(name)
        target = node_of(state, str(node))
        faults = [f for f in state.get("faults", []) if f["node"] != target["name"]]
        clear(state, target)
        if not clear_fault:
            faults.append(apply(state, target, rate, direction, mtu))
        state["faults"] = faults
        write_json(cluster_folder(name) / STATE_FILE, state)
        return state

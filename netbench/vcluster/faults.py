"""Faults on one node of a running cluster, the kinds a fabric sweep must
find on a real one: a link at the wrong rate (a cable that negotiated
100 Mbit/s, a port at a third of its speed), in one direction or both,
a node whose interface MTU is smaller than the switch's (a node left
untuned among jumbo-frame nodes), and a node whose link is down (a cable
pulled, a switch port shut: the node cannot be reached at all).  `netbench vcluster fault` sets one,
`--clear` restores the node to the cluster's link settings; the cluster's
state records them, so `status` shows a degraded cluster as such.

A fault is validated whole before any link changes, applied all or
nothing, and recorded only once it is on the links (netbench.vcluster
.linkstate); `vcluster mtu` keeps it.  Only the checkout that owns the
cluster sets one, unless told --force.
"""

from .cluster import commit_links, require_changer, require_root, running_state
from .fabric import switch_of
from .linkstate import degraded_link
from .names import VclusterError, check_name, parse_rate
from .registry import locked

DIRECTIONS = ("in", "out", "both")


def node_of(state, node):
    """The node of `state` named `node` (its name, or its index from 1)."""
    for i, n in enumerate(state["nodes"], 1):
        if node in (n["name"], str(i)):
            return n
    names = ", ".join(n["name"] for n in state["nodes"])
    raise VclusterError(f"no node {node!r} in cluster {state['name']} (nodes: {names})")


def fault_of(state, node, rate=None, direction="both", mtu=None, link_down=False):
    """The fault as recorded: `node`'s link at `rate` in `direction`
    and/or its interface at `mtu`, or its link down.  Every option is
    checked here, before anything changes."""
    if direction not in DIRECTIONS:
        raise VclusterError(f"--direction {direction}: one of {', '.join(DIRECTIONS)}")
    if link_down:
        if rate is not None or mtu is not None:
            raise VclusterError("--link-down: a link that is down has no --rate or --mtu")
        return {"node": node["name"], "link": "down"}
    if rate is None and mtu is None:
        raise VclusterError("a fault needs --rate, --mtu, both, or --link-down")
    fault = {"node": node["name"]}
    if rate is not None:
        if parse_rate(rate, "--rate") is None:
            raise VclusterError(f"--rate {rate}: a fault needs a rate (e.g. 333mbit)")
        link = degraded_link(state, rate)
        fault.update(rate=link["rate"], rate_mbps=link["rate_mbps"], direction=direction)
    if mtu is not None:
        largest = state["link"].get("switch_mtu", state["link"]["mtu"])
        if not 576 <= int(mtu) <= largest:
            raise VclusterError(f"--mtu {mtu}: use 576 to the switch's {largest}")
        fault["mtu"] = int(mtu)
    return fault


def set_fault(name, node, rate=None, direction="both", mtu=None, clear_fault=False,
              force=False, link_down=False):
    """Set (or with `clear_fault` remove) a fault on one node of cluster
    `name`; returns the cluster's state with its `faults`.  A cluster
    another checkout owns is refused unless `force`."""
    check_name(name)
    require_root()
    with locked():
        require_changer(name, force, None, "netbench vcluster fault")
        state = running_state(name)
        target = node_of(state, str(node))
        faults = [f for f in state.get("faults", []) if f.get("node") != target["name"]]
        if not clear_fault:
            faults.append(fault_of(state, target, rate, direction, mtu, link_down))
        new = {**state, "faults": faults}
        commit_links(state, new, [target])
        return new


def switch_link_fault(state, switch, rate, direction):
    """The fault of the link between `switch` (a fabric entry) and its
    parent, as recorded: its rate in `direction` (`out`: what leaves the
    switch's subtree), checked before anything changes."""
    if direction not in DIRECTIONS:
        raise VclusterError(f"--direction {direction}: one of {', '.join(DIRECTIONS)}")
    if rate is None or parse_rate(rate, "--rate") is None:
        raise VclusterError("a switch link's fault needs --rate (e.g. 33mbit)")
    link = degraded_link(state, rate)
    return {"switch_link": switch["name"], "rate": link["rate"],
            "rate_mbps": link["rate_mbps"], "direction": direction}


def set_switch_link_fault(name, switch, rate=None, direction="both", clear_fault=False,
                          force=False):
    """Slow (or with `clear_fault` restore) the link between `switch` and
    its parent on cluster `name`, brought up with --topology; returns the
    cluster's state with its `faults`."""
    check_name(name)
    require_root()
    with locked():
        require_changer(name, force, None, "netbench vcluster fault")
        state = running_state(name)
        if not state.get("fabric"):
            raise VclusterError(f"cluster {name} has no switches: bring it up with "
                                f"--topology FILE")
        target = switch_of(state["fabric"], str(switch))
        if not target.get("parent"):
            raise VclusterError(f"switch {target['name']} is the top switch: it has no link "
                                f"to a parent")
        faults = [f for f in state.get("faults", [])
                  if f.get("switch_link") != target["name"]]
        if not clear_fault:
            faults.append(switch_link_fault(state, target, rate, direction))
        new = {**state, "faults": faults}
        commit_links(state, new, [], uplinks=[target])
        return new

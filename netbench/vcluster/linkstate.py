"""What each node's link of a running cluster must be, putting it there,
and reading back what it is.

A node's link is the cluster's (the state's `link`: rate both ways, the
node's interface MTU, the switch port's MTU) unless a fault (the state's
`faults`, netbench.vcluster.faults) gives it another rate in one direction
or both, or another interface MTU.  Everything that changes links (`fault`,
`mtu`) computes the new state first, puts every link there, and writes the
state only when that succeeded; on a failure it puts the links back where
the old state says.  `drift` compares the links with the state, so that
`status` reports what is on the links, not what was meant to be.

Directions are the node's: `out` shapes what the node sends (its own
interface, inside its namespace), `in` what it receives (the host end of
its link, the switch port's egress).
"""

import json

from .fabric import uplink_link
from .names import link_settings
from .netns import run, shape

#: a tbf rate read back is the one set, in bytes/s: within this of it
RATE_TOLERANCE = 0.01


def degraded_link(state, rate, option="--rate"):
    """The cluster's link settings at another rate (its MTU, its bucket)."""
    link = state["link"]
    return link_settings(rate, link["mtu"], link["interconnect"],
                         switch_mtu=link.get("switch_mtu"), validate=False, option=option)


def fault_of(state, node):
    return next((f for f in state.get("faults", []) if f.get("node") == node["name"]), {})


def uplink_fault_of(state, switch):
    return next((f for f in state.get("faults", [])
                 if f.get("switch_link") == switch["name"]), {})


def fabric_uplinks(state):
    """The fabric's switches that have a link to a parent (none without
    a topology)."""
    return [s for s in (state.get("fabric") or {}).get("switches", []) if s.get("parent")]


def uplink_settings(state, switch):
    """The link between `switch` and its parent by `state`: {"out": what
    leaves the switch's subtree (its `up` end's egress), "in": what enters
    it (the `down` end's), "switch_mtu"}."""
    link, fault = uplink_link(state["link"], switch), uplink_fault_of(state, switch)
    slow = degraded_link(state, fault["rate"]) if fault.get("rate") else None
    direction = fault.get("direction", "both")
    return {"out": slow if slow and direction in ("out", "both") else link,
            "in": slow if slow and direction in ("in", "both") else link,
            "switch_mtu": int(link.get("switch_mtu", link["mtu"]))}


def put_uplink(state, switch):
    """The link between `switch` and its parent as `state` says."""
    want = uplink_settings(state, switch)
    for end in (switch["bridge"], switch["up"], switch["down"]):
        run(["ip", "link", "set", end, "mtu", str(want["switch_mtu"])])
    shape_or_unshape([], switch["up"], want["out"])
    shape_or_unshape([], switch["down"], want["in"])


def node_settings(state, node):
    """The links `node` must have by `state`: {"out": link settings of what
    it sends, "in": of what it receives, "mtu": its interface's MTU,
    "switch_mtu": its switch port's}."""
    link, fault = state["link"], fault_of(state, node)
    slow = degraded_link(state, fault["rate"]) if fault.get("rate") else None
    direction = fault.get("direction", "both")
    return {"out": slow if slow and direction in ("out", "both") else link,
            "in": slow if slow and direction in ("in", "both") else link,
            "mtu": int(fault.get("mtu", link["mtu"])),
            "switch_mtu": int(link.get("switch_mtu", link["mtu"])),
            "up": fault.get("link") != "down"}


def shape_or_unshape(argv_prefix, dev, link):
    """tbf at the link's rate on `dev`, or no qdisc for an unshaped link."""
    if link["rate_mbps"] is None:
        run(argv_prefix + ["tc", "qdisc", "del", "dev", dev, "root"], check=False)
    else:
        shape(argv_prefix, dev, link)


def put_node(state, node):
    """`node`'s link as `state` says: both MTUs, the rate both ways."""
    want = node_settings(state, node)
    in_ns = ["ip", "netns", "exec", node["namespace"]]
    run(["ip", "link", "set", node["veth"], "mtu", str(want["switch_mtu"])])
    run(["ip", "-n", node["namespace"], "link", "set", "eth0", "mtu", str(want["mtu"])])
    shape_or_unshape(in_ns, "eth0", want["out"])
    shape_or_unshape([], node["veth"], want["in"])
    # the switch's end: down, the node has no carrier and nothing reaches it
    run(["ip", "link", "set", node["veth"], "up" if want["up"] else "down"])


def put_switch(state):
    """The bridge and the head's link (a switch port too) at the state's
    switch MTU; the head's link is never shaped (control traffic)."""
    mtu = str(state["link"].get("switch_mtu", state["link"]["mtu"]))
    head = state.get("launcher")
    if head:
        run(["ip", "link", "set", head["veth"], "mtu", mtu])
        run(["ip", "-n", head["namespace"], "link", "set", "eth0", "mtu", mtu])
    run(["ip", "link", "set", state["bridge"], "mtu", mtu])
    for switch in fabric_uplinks(state):
        put_uplink(state, switch)


def change_links(old, new, nodes, switch=False, uplinks=()):
    """Put `nodes` (and with `switch` the bridges and the head's link;
    `uplinks`: the fabric switches whose link to their parent) where state
    `new` says, all or nothing: on a failure, put them back where `old`
    says and raise the failure (VclusterError).  Call with Ctrl-C
    deferred (netns.deferred_interrupts)."""
    steps = ([put_switch] if switch else []) + [
        (lambda state, n=n: put_node(state, n)) for n in nodes] + [
        (lambda state, s=s: put_uplink(state, s)) for s in uplinks]
    # a larger switch MTU first, a smaller one last: a port never drops
    # the frames of a node still at the larger MTU
    growing = switch and new["link"]["switch_mtu"] >= old["link"].get("switch_mtu", 0)
    order = steps if growing or not switch else steps[1:] + steps[:1]
    try:
        for step in order:
            step(new)
    except Exception:
        for step in reversed(order):
            try:
                step(old)
            except Exception:           # put back what can be: drift shows the rest
                pass
        raise


def qdisc_rates(argv):
    """{device: tbf rate in Mbit/s, or None without tbf} from `tc -j qdisc show`."""
    out = run(argv, check=False).stdout
    try:
        entries = json.loads(out or "[]")
    except ValueError:
        return {}
    rates = {}
    for q in entries:
        if q.get("root") and q.get("kind") == "tbf":
            rates[q.get("dev")] = q.get("options", {}).get("rate", 0) * 8 / 1e6
        elif q.get("root"):
            rates.setdefault(q.get("dev"), None)
    return rates


def link_mtu(argv):
    try:
        return json.loads(run(argv, check=False).stdout or "[]")[0]["mtu"]
    except (ValueError, IndexError, KeyError):
        return None


def observed(state, node, host_rates=None):
    """What `node`'s link is now: {"out", "in": Mbit/s or None, "mtu",
    "switch_mtu"}; None where it cannot be read."""
    host_rates = qdisc_rates(["tc", "-j", "qdisc", "show"]) if host_rates is None else host_rates
    inside = qdisc_rates(["tc", "-j", "-n", node["namespace"], "qdisc", "show"])
    return {"out": inside.get("eth0"), "in": host_rates.get(node["veth"]),
            "mtu": link_mtu(["ip", "-j", "-n", node["namespace"], "link", "show", "dev",
                             "eth0"]),
            "switch_mtu": link_mtu(["ip", "-j", "link", "show", "dev", node["veth"]]),
            "up": link_is_up(["ip", "-j", "link", "show", "dev", node["veth"]])}


def link_is_up(argv):
    """Whether the link is administratively up (None when unreadable)."""
    try:
        return "UP" in json.loads(run(argv, check=False).stdout or "[]")[0]["flags"]
    except (ValueError, IndexError, KeyError):
        return None


def same_rate(seen, wanted):
    if seen is None or wanted is None:
        return seen is None and wanted is None
    return abs(seen - wanted) <= RATE_TOLERANCE * wanted


def drift(state, present_namespaces):
    """Where the nodes' links differ from what `state` (with its faults)
    says, as text: empty when `status` tells the truth about them."""
    found = []
    host_rates = qdisc_rates(["tc", "-j", "qdisc", "show"])
    for node in state.get("nodes", []):
        if node.get("namespace") not in present_namespaces:
            continue                     # reported as missing already
        want, seen = node_settings(state, node), observed(state, node, host_rates)

        def rate(value):
            return "unshaped" if value is None else f"{value:g} Mbit/s"
        for key, what in (("out", "sends at"), ("in", "receives at")):
            if not same_rate(seen[key], want[key]["rate_mbps"]):
                found.append(f"{node['name']} {what} {rate(seen[key])}, recorded "
                             f"{rate(want[key]['rate_mbps'])}")
        for key, what in (("mtu", "interface MTU"), ("switch_mtu", "switch port MTU")):
            if seen[key] != want[key]:
                found.append(f"{node['name']}: {what} {seen[key]}, recorded {want[key]}")
        if seen["up"] != want["up"]:
            found.append(f"{node['name']}: link {'up' if seen['up'] else 'down'}, recorded "
                         f"{'up' if want['up'] else 'down'}")
    return found + uplink_drift(state, host_rates)


def uplink_drift(state, host_rates):
    """Where the links between switches differ from what `state` says."""
    found = []
    for switch in fabric_uplinks(state):
        want = uplink_settings(state, switch)
        for key, end, what in (("out", "up", "sends up at"), ("in", "down", "receives at")):
            seen = host_rates.get(switch[end])
            if not same_rate(seen, want[key]["rate_mbps"]):
                shown = "unshaped" if seen is None else f"{seen:g} Mbit/s"
                wanted = want[key]["rate_mbps"]
                found.append(f"switch link {switch['name']} {what} {shown}, recorded "
                             f"{'unshaped' if wanted is None else f'{wanted:g} Mbit/s'}")
    return found

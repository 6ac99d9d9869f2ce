"""Synthetic fleets: every ordered pair of hosts measured, with noise and
the faults a test asks for (test_fleet, test_fleet_safety,
test_fleet_components, test_fleet_confirm)."""

import random

SIZES = (1 << 20, 8 << 20)
LINE_MBPS = 900.0
LATENCY_US = 20.0
NOISE = 0.02


def make_fleet(n, seed, slow=(), egress_only=(), slow_latency=(), bad_cables=(),
               scale=1.0, hosts=None, noise=NOISE):
    """Measurements of every ordered pair of `n` hosts with +-8 % noise.
    slow: nodes at 1/3 rate both ways; egress_only: only from them;
    slow_latency: 3x latency; bad_cables: (a, b) links at 1/3 rate.
    Latency is measured one way only (src < dst), as a sweep may."""
    rng = random.Random(seed)
    hosts = hosts or [f"node{i:02d}" for i in range(n)]
    out = {}
    for src in hosts:
        for dst in hosts:
            if src == dst:
                continue
            rate = scale * LINE_MBPS
            if src in slow or dst in slow or src in egress_only:
                rate /= 3
            if {src, dst} in [set(c) for c in bad_cables]:
                rate /= 3
            figures = {"bw_Mbps": {s: rate * rng.uniform(1 - noise, 1 + noise)
                                   for s in SIZES}}
            if src < dst:
                latency = LATENCY_US * (3 if {src, dst} & set(slow_latency) else 1)
                figures["latency_us"] = latency * rng.uniform(1 - noise, 1 + noise)
            out[(src, dst)] = figures
    return out


def leaves_fleet(leaves, per_leaf, seed, slow_nodes=(), slow_uplinks=(), direction="both",
                 slow_switches=(), noise=NOISE):
    """(measurements, Topology): `leaves` leaf switches of `per_leaf` nodes
    under one spine; slow components at a third of the rate.  A slow
    uplink's `direction`: out (what leaves the leaf), in, both."""
    rng = random.Random(seed)
    leaf_of = {f"n{leaf}{i}": f"leaf{leaf}" for leaf in range(1, leaves + 1)
               for i in range(1, per_leaf + 1)}
    lines = [f"SwitchName=spine Switches=leaf[1-{leaves}]"] + [
        f"SwitchName=leaf{leaf} Nodes=n{leaf}[1-{per_leaf}]" for leaf in range(1, leaves + 1)]
    out = {}
    for src, a in leaf_of.items():
        for dst, b in leaf_of.items():
            if src == dst:
                continue
            rate = LINE_MBPS
            crossing = a != b
            if src in slow_nodes or dst in slow_nodes:
                rate /= 3
            for up in slow_uplinks:
                if crossing and ((a == up and direction in ("out", "both"))
                                 or (b == up and direction in ("in", "both"))):
                    rate /= 3
            if a in slow_switches or b in slow_switches:
                rate /= 3
            figures = {"bw_Mbps": {s: rate * rng.uniform(1 - noise, 1 + noise) for s in SIZES}}
            if src < dst:
                figures["latency_us"] = LATENCY_US * rng.uniform(1 - noise, 1 + noise)
            out[(src, dst)] = figures
    return out, lines

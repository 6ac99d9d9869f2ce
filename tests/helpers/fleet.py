"""Synthetic fleets: every ordered pair of hosts measured, with noise and
the faults a test asks for (test_fleet, test_fleet_safety)."""

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

"""What the host was doing while a replicate ran, against what it did
while the reference was measured: the one mechanism by which the host's
state keeps a miss from being called a loss.

A replicate's conditions: {"nodes": {host: {"cpu_pressure": %,
"rank_wait": %}}, "core_round_trip_ns": ns}, read by the benchmark on every
node of the job for each launch (Linux's PSI, /proc/pressure/cpu "some
total": the share of the launch's own time some task waited for a CPU; and
the longest share any of the node's ranks itself waited on a run queue)
and, where ranks 0 and 1 share a host, the time a cache line takes between
their cores.  A node's reading is the larger of its two shares: PSI is
averaged over the node's CPUs, so one rank that lost its core reads near
1/N of it on N CPUs, while the rank's own wait reads what it lost; older
benchmarks print PSI alone.  A reference's: {"cpu_pressure": %,
"core_round_trip_ns": ns} of the runs it was learned from (the largest
node reading); None for a documented figure (a quiet host).

A difference is one of (each with its node and both readings):

    cores_short    a node's reading says its ranks could not each have a
                   core of their own (a rank, or other work, waited for a
                   CPU most of the time): a busy-polling rank that loses its
                   core waits a scheduler time slice, so it explains a miss
                   of any size
    time_sliced    ranks 0 and 1 took a time slice to pass a cache line:
                   the same, seen from the ranks themselves
    cpu_pressure   a node's reading beyond the reference's by the knob's
                   points: a task that waits a share p of the time for a CPU
                   holds one a share 1 - p of it (over the reference's own)
    core_mode      the cores passed a cache line the knob's factor slower
                   than in the reference's runs (a VM's vCPUs moved): a
                   message between them is at most that many times slower

A node's difference also says which share it read (`reading`:
"cpu_pressure" or "rank_wait").

What the pressures explain together: a message between busy-polling ranks
moves only while the rank it waits for holds a core, and a round trip (or a
stream's acknowledgements) waits for each rank in turn; when a rank loses its
core for a time slice, the message stops there, so the figure runs at the
rate at which all its ranks hold a core at once.  With each rank on a node at
pressure p holding one a share 1 - p of the time, independently, a figure
whose ranks sit on nodes at p1, p2, ... runs 1 / ((1 - p1)(1 - p2)...) times
slower: two ranks on one busy host square the factor, a busy node facing a
quiet one explains its own factor alone.  A core_mode difference explains at
most its own factor.
"""

import math

UNBOUNDED = ("cores_short", "time_sliced")
#: the largest message whose time the host's CPUs, not a real link, bound
#: (the benchmark's latency takes sizes under 64 bytes; 4 KiB is one page,
#: within the eager limit of the TCP transports)
CPU_BOUND_BYTES = 4096


def cpu_bound(placement, link_emulated, nbytes=None, latency=False):
    """Whether the host's CPUs bound a figure: every figure between ranks
    of one node or across emulated links (forwarded by the host's CPUs),
    and across real links latency and messages up to CPU_BOUND_BYTES; a
    link bounds bandwidth."""
    if placement != "internode" or link_emulated:
        return True
    if nbytes is not None:
        return nbytes <= CPU_BOUND_BYTES
    return latency


def as_reference(conditions):
    """A launch's conditions ({"nodes": ..., "core_round_trip_ns": ...}) in
    the form of a reference's ({"cpu_pressure": the busiest node's,
    "core_round_trip_ns": ...}): what another session's launch ran under,
    when it is the bound."""
    if not conditions:
        return None
    if "nodes" not in conditions:
        return conditions       # a reference's already (a learned baseline's)
    pressures = node_readings(conditions).values()
    return {"cpu_pressure": max(pressures, default=None),
            "core_round_trip_ns": _reading(conditions, "core_round_trip_ns")}


def _reading(conditions, key):
    value = (conditions or {}).get(key)
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def node_readings(conditions):
    """{host: reading} of a replicate's nodes that read one: the larger of
    the node's PSI and its ranks' own wait (the module's docstring)."""
    return {host: value for host, (value, _) in _node_shares(conditions).items()}


def _node_shares(conditions):
    """{host: (reading, which share it is)} of a replicate's nodes."""
    nodes = (conditions or {}).get("nodes") or {}
    found = {}
    for host, r in sorted(nodes.items()):
        if not isinstance(r, dict):
            continue
        shares = [(_reading(r, key), key) for key in ("cpu_pressure", "rank_wait")]
        shares = [(value, key) for value, key in shares if value is not None]
        if shares:
            found[host] = max(shares, key=lambda share: share[0])
    return found


def differences(now, reference, knobs):
    """The differences (see the module's docstring) between a replicate's
    conditions `now` and the reference's, each {"code", "node", "now",
    "then"}; [] when none goes beyond the knobs' limits."""
    then_pressure = _reading(reference, "cpu_pressure") or 0.0
    found = []
    for host, (pressure, reading) in _node_shares(now).items():
        if pressure >= knobs.cores_short_pressure > then_pressure:
            found.append({"code": "cores_short", "node": host, "now": pressure,
                          "then": then_pressure, "reading": reading})
        elif pressure - then_pressure >= knobs.cpu_pressure_points:
            found.append({"code": "cpu_pressure", "node": host, "now": pressure,
                          "then": then_pressure, "reading": reading})
    trip, then_trip = _reading(now, "core_round_trip_ns"), _reading(reference,
                                                                    "core_round_trip_ns")
    if trip is not None and trip >= knobs.time_slice_ns > (then_trip or 0):
        found.append({"code": "time_sliced", "node": None, "now": trip, "then": then_trip})
    elif trip is not None and then_trip and trip >= then_trip * knobs.core_round_trip_factor:
        found.append({"code": "core_mode", "node": None, "now": trip, "then": then_trip})
    return found


def explained_factor(found, ranks=None):
    """How many times beyond its bound a CPU-bound figure may be and still
    be explained by the differences `found` (see the module's docstring):
    the pressures of its ranks' nodes together, or a core_mode difference,
    whichever explains more.  `ranks`: {node: the figure's ranks on it}
    (node_ranks); without it, each node found holds one."""
    if any(d["code"] in UNBOUNDED for d in found):
        return math.inf
    pressure = math.prod(_factor(d) ** (1 if ranks is None else ranks.get(d["node"], 0))
                         for d in found if d["code"] == "cpu_pressure")
    cores = max((_factor(d) for d in found if d["code"] == "core_mode"), default=1.0)
    return max(pressure, cores)


def node_ranks(conditions):
    """{host: how many of the launch's ranks ran there} of a replicate's
    conditions; a node that did not say holds one."""
    nodes = (conditions or {}).get("nodes") or {}
    return {host: r["ranks"] if isinstance(r.get("ranks"), int) else 1
            for host, r in nodes.items() if isinstance(r, dict)}


def _factor(difference):
    now, then = difference["now"], difference["then"] or 0.0
    if difference["code"] == "core_mode":
        return now / then if then else math.inf
    if now >= 100:
        return math.inf
    return (1 - then / 100) / (1 - now / 100)


def of_launch(launch):
    """A parsed launch's conditions (results.benchmark.parse_run): its
    nodes' readings and, where ranks 0 and 1 share a host, the faster of
    its core round trips before and after (one reading alone can be a
    spike)."""
    trips = [t for t in launch.get("core_round_trip_ns") or [] if _reading({"t": t}, "t")]
    nodes = dict(launch.get("nodes") or {})
    if not nodes and _reading(launch, "cpu_pressure") is not None:
        # a benchmark that printed the job's one reading (an older
        # netbench, another benchmark): the job's first node's
        nodes = {"first node": {"cpu_pressure": launch["cpu_pressure"]}}
    return {"nodes": nodes, "core_round_trip_ns": min(trips) if trips else None}

"""What the loaded ReFrame configuration offers the checks: its MPI
environments, their transports, the placements its partitions allow.

The checks' parameters are computed from these when ReFrame loads the check
files, so require_netbench_config stops a session whose configuration is not
netbench's with one line saying how to load it: ReFrame would otherwise skip
the check files silently and report 0 test cases.
"""

import os

from .. import paths

LOAD_HINT = (f"source {paths.REPO}/.venv/bin/activate "
             f"(or export RFM_CONFIG_FILES={paths.CONFIG})")


def _loaded_config_files():
    from reframe.core.runtime import runtime
    return [s for s in runtime().site_config.sources if s != "<builtin>"]


def require_netbench_config():
    """SystemExit (which ReFrame lets through, exit code 1) unless the
    netbench configuration is loaded and found at least one MPI."""
    try:
        sources = _loaded_config_files()
    except Exception:
        raise SystemExit(f"netbench: checks must be loaded by ReFrame: {LOAD_HINT}")
    if not any(os.path.exists(s) and os.path.samefile(s, paths.CONFIG) for s in sources):
        raise SystemExit("netbench: the netbench ReFrame configuration is not loaded "
                         f"(loaded: {', '.join(sources) or 'none'}): {LOAD_HINT}")
    if not configured_environments():
        raise SystemExit("netbench: no MPI found (no .mpi/ wheel prefix, Spack view or "
                         "mpicc/mpirun pair on PATH): run `make setup`")


def configured_environments():
    """Names of the MPI environments of the loaded configuration."""
    from reframe.core.runtime import runtime
    envs = runtime().site_config.get("environments") or []
    return [e["name"] for e in envs if "mpi" in e.get("features", [])]


def configured_transports():
    """Every transport some configured MPI offers, in a stable order."""
    from reframe.core.runtime import runtime
    order = ["shm", "tcp", "ofi-tcp", "ucx-tcp"]
    found = set()
    for env in runtime().site_config.get("environments") or []:
        found.update(env.get("extras", {}).get("transports", {}))
    return [t for t in order if t in found] + sorted(found - set(order))


def configured_placements():
    """`intranode`, plus `internode` when some partition has 2+ nodes."""
    from reframe.core.runtime import runtime
    nodes = [p.extras.get("nodes", 1) for p in runtime().system.partitions]
    return ["intranode"] + (["internode"] if max(nodes, default=1) >= 2 else [])


def throughput_transports():
    """Shared memory, plus the network transports where ranks can span
    nodes (the chain then crosses the interconnect)."""
    if "internode" in configured_placements():
        return configured_transports()
    return ["shm"]


def max_nodes():
    """Nodes of the largest partition of the selected system."""
    from reframe.core.runtime import runtime
    return max((p.extras.get("nodes", 1) for p in runtime().system.partitions), default=1)


def max_ranks():
    """Processes the largest partition can host without oversubscription."""
    from reframe.core.runtime import runtime
    best = 2
    for p in runtime().system.partitions:
        cpus = p.processor.num_cpus or 1
        best = max(best, cpus * p.extras.get("nodes", 1))
    return best

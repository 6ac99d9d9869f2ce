"""Real launches of the benchmark, as the checks make them."""

import os
from pathlib import Path

#: the rank's number in its environment, as each launcher sets it
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK")

#: the transport each MPI takes between nodes (data/mpi_families.yaml)
INTERNODE = {"mpich": "ofi-tcp", "system-mpich": "ucx-tcp", "openmpi": "tcp",
             "system-openmpi": "tcp"}


def rank_pid(binary, rank):
    """PID of `rank` among the running processes of `binary`, or None."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.readlink(proc / "exe") != str(binary):
                continue
            env = dict(item.split("=", 1) for item in
                       (proc / "environ").read_text(errors="replace").split("\0") if "=" in item)
        except OSError:
            continue
        if any(env.get(v) == str(rank) for v in RANK_VARIABLES):
            return int(proc.name)
    return None

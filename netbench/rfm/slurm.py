"""SLURM_CONF for ReFrame's own Slurm commands, when one virtual cluster of
this checkout runs Slurm."""

import os

from .. import vcluster


def point_slurm_clients_at_running_cluster():
    """With one virtual cluster of this checkout running Slurm and
    SLURM_CONF unset, set SLURM_CONF for this process to that cluster's.
    Otherwise SLURM_CONF stays as the user set it (the checks fail with a
    message when it names another cluster than the partition's).

    The process's own environment, not the partition's: the partition's
    `env_vars` (vcluster/systems.py) reach the job script only, while
    ReFrame runs sbatch, squeue, scancel and scontrol in its own
    environment (reframe/core/schedulers/slurm.py), and has no setting for
    a scheduler's environment."""
    confs = slurm_confs(vcluster.running_systems())
    if len(confs) == 1 and not os.environ.get("SLURM_CONF"):
        os.environ["SLURM_CONF"] = confs.pop()


def slurm_confs(systems):
    """The Slurm configuration files the partitions of `systems` submit to."""
    return {p["extras"]["slurm_conf"] for s in systems for p in s["partitions"]
            if "slurm_conf" in p.get("extras", {})}

"""The ReFrame system descriptions of a cluster: the ssh one, and with Slurm
one per Slurm launch path; and the environment its MPI launches need.
"""

import contextlib
import json
import sys

from .names import (LOCK_NAME, STATE_FILE, SYSTEM_FILE, cluster_folder, slurm_system_names,
                    system_name, this_checkout)
from .registry import read_entry, registered_names


def reframe_system(state):
    """The ReFrame system of a cluster; netbench's configuration adds the
    discovered MPI environments to its partition."""
    link = state["link"]
    extras = {"interconnect": link["interconnect"], "nodes": len(state["nodes"]),
              "mtu": link["mtu"], "vcluster": state["name"],
              # a shared 2-core host's knobs (references/profiles/virtual-cluster.yaml)
              "judging_profile": "virtual-cluster",
              # sysfs counters of the host ends of the links: the checks
              # prove that internode traffic crossed them
              "link_counters": [f"/sys/class/net/{n['veth']}/statistics"
                                for n in state["nodes"]],
              # the MTU checks' command: it acts for the checkout that owns
              # the cluster (whichever netbench the job's python imports),
              # and is refused if another checkout's cluster has the name now
              "set_mtu": [sys.executable, "-m", "netbench.cli", "vcluster", "mtu",
                          "--name", state["name"], "--owner", state["owner"]],
              # held by a job that needs every node to itself (the sweep)
              "partition_lock": str(cluster_folder(state["name"]) / LOCK_NAME),
              # the nodes share the host's cores: a round's pairs at once
              # contend for them (a healthy 5-node 1 Gbit/s sweep came out
              # inconclusive), so the sweep measures one pair at a time
              # unless asked (-S LinkSweep.concurrent=true), as its line-rate
              # fraction was calibrated
              "sweep_rounds_contend": True}
    if state.get("fabric"):
        # the sweep names the switch link or switch that explains its slow
        # pairs (netbench.fleet.components); the cluster's own copy
        extras["topology"] = str(cluster_folder(state["name"]) / "topology.conf")
    if link["rate_mbps"]:
        # the token bucket's rate is the line rate: the veth under it
        # reports 10000 Mb/s whatever it carries (netbench/probe/linerate.py)
        extras["line_rate_mbps"] = link["rate_mbps"]
        extras["line_rate_source"] = "tbf"
        # a token bucket on a veth emulates the line's rate, not its wire:
        # small messages never wait in the bucket (links.yaml), so their
        # latency is this host's scheduler's (checks/judging.py)
        extras["emulates"] = "rate"
    partitions = [{
        "name": "nodes",
        "descr": "MPI launched from this host over ssh into every node",
        "scheduler": "local",
        "launcher": "netbench-ssh",
        "environs": [],
        "max_jobs": 1,
        "env_vars": [[k, v] for k, v in launch_environment(state).items()],
        "extras": extras,
    }]
    return {
        "name": system_name(state["name"]),
        "descr": (f"netbench virtual cluster {state['name']}: {len(state['nodes'])} namespace "
                  f"nodes, links {link['rate']} MTU {link['mtu']}"),
        "hostnames": [rf"^{state['name']}-n\d+$"],
        "modules_system": "nomod",
        "partitions": partitions,
    }


def reframe_systems(state):
    """The cluster's ReFrame systems: the ssh one, and with Slurm one per
    Slurm launch path.  One partition each: ReFrame runs the partitions of
    a system side by side, and the nodes (and their 2 shared CPUs, and the
    links whose MTU the checks change) cannot take two suites at once."""
    system = reframe_system(state)
    if not state.get("slurm"):
        return [system]
    return [system] + slurm_systems(state, system)


def slurm_systems(state, base):
    """The cluster's Slurm as ReFrame systems, one partition each (see
    reframe_systems): `srun`, where srun starts the ranks (PMI per
    MPI through SLURM_MPI_TYPE), and `mpirun`, the MPI's own launcher
    inside the allocation.  ReFrame's `squeue` scheduler: there is no
    accounting, which its `slurm` scheduler needs (sacct)."""
    slurm = state["slurm"]
    extras = base["partitions"][0]["extras"]
    env_vars = [["SLURM_CONF", slurm["conf"]], ["NETBENCH_NETWORK", state["network"]],
                # with srun there is no mpirun to pass --mca: keep Open MPI's
                # TCP traffic on the cluster network
                ["OMPI_MCA_btl_tcp_if_include", state["network"]]]
    # the MTU checks change the links from inside their job, which Slurm
    # runs in a node: the links are the host's, so step into the host's
    # network and mount namespaces, those of the cluster's munged (nodes
    # share the host's PID namespace; PID 1's are not readable everywhere)
    set_mtu = ["nsenter", "-t", str(slurm["pids"]["munged"]), "-n", "-m",
               *extras["set_mtu"]]
    common = {"scheduler": "squeue", "environs": [], "max_jobs": 1,
              "access": [f"--partition={slurm['partition']}", "--exclusive"],
              "time_limit": "10m", "env_vars": env_vars,
              "extras": {**extras, "slurm_conf": slurm["conf"], "set_mtu": set_mtu}}
    systems = []
    for path, (launcher, descr) in {
            "srun": ("srun", "sbatch, srun with the MPI's PMI"),
            "mpirun": ("netbench-alloc", "sbatch, the MPI's own launcher inside the "
                                         "allocation")}.items():
        system, partition = slurm_system_names(state["name"])[path].split(":")
        systems.append({**{k: v for k, v in base.items() if k != "partitions"},
                        "name": system,
                        "descr": f"{base['descr']}; jobs through Slurm ({descr})",
                        "partitions": [{"name": partition, "descr": descr,
                                        "launcher": launcher, **common}]})
    return systems


def launch_environment(state):
    """What netbench.rfm.launch needs to know about the cluster (the variables
    its ReFrame partition sets)."""
    launcher = state["launcher"]
    return {"NETBENCH_HOSTFILE": state["files"]["hostfile"],
            "NETBENCH_SSH_AGENT": state["files"]["ssh_agent"],
            "NETBENCH_HEAD_ADDRESS": launcher["address"],
            "NETBENCH_LAUNCH_NETNS": launcher["namespace"],
            "NETBENCH_NETWORK": state["network"]}


def running_systems():
    """ReFrame system descriptions of the clusters this checkout has up
    (read from their root-owned folders)."""
    systems = []
    for name in registered_names():
        entry = read_entry(name) or {}
        if entry.get("owner") != this_checkout():
            continue
        path = cluster_folder(name) / SYSTEM_FILE
        with contextlib.suppress(OSError, ValueError):
            if (cluster_folder(name) / STATE_FILE).exists():
                found = json.loads(path.read_text())
                # one system (a cluster brought up before Slurm), or a list
                systems += [found] if isinstance(found, dict) else found
    return systems

"""Start an MPI job across the nodes of a cluster partition.

    python -m netbench.launch -np N --ppn K [--allocation] -- PROGRAM [ARGS...]

ReFrame's `netbench-ssh` launcher writes this line into the job script; the
environment says the rest: the MPI (`NETBENCH_MPIRUN`, `NETBENCH_MPI_FAMILY`,
set by the programming environment) and the cluster (`NETBENCH_HOSTFILE`,
`NETBENCH_SSH_AGENT`, `NETBENCH_HEAD_ADDRESS`, `NETBENCH_NETWORK`,
`NETBENCH_LAUNCH_NETNS`, set by the partition).  The launcher itself runs in
the cluster's head namespace (`NETBENCH_LAUNCH_NETNS`): MPI launchers listen
on every address they have, and there every address is the cluster's.  Each family's flags for this live in data/mpi_families.yaml
(`remote_flags`, `forward_env`).  With `--allocation` the job runs inside a
Slurm allocation instead: the MPI's launcher takes the nodes from Slurm and
starts its daemons with srun (`allocation_flags`); only NETBENCH_NETWORK is
needed.  The command is printed to stderr before it runs, so the job's output
says exactly what was launched.
"""

import argparse
import os
import shlex
import sys

from . import discovery

CLUSTER_VARIABLES = {"hostfile": "NETBENCH_HOSTFILE", "agent": "NETBENCH_SSH_AGENT",
                     "head": "NETBENCH_HEAD_ADDRESS", "network": "NETBENCH_NETWORK",
                     "netns": "NETBENCH_LAUNCH_NETNS"}
ALLOCATION_VARIABLES = {"network": "NETBENCH_NETWORK"}


class LaunchError(Exception):
    pass


def required(env, name):
    value = env.get(name, "")
    if not value:
        raise LaunchError(f"{name} is not set: run through a netbench cluster partition")
    return value


def forwarded(spec, env):
    """`-x NAME` for every variable the family does not forward itself."""
    flag = spec["forward_env"].get("flag")
    if not flag:
        return []
    names = sorted(n for n in env if n.startswith(tuple(spec["forward_env"]["prefixes"])))
    return [arg for n in names for arg in (flag, n)]


def command(nprocs, ppn, program, env=None, families=None, allocation=False):
    """The launcher command line for `program` on the partition's nodes
    (over ssh; inside a Slurm allocation with `allocation`)."""
    env = os.environ if env is None else env
    families = families or discovery.load_families()
    family = required(env, "NETBENCH_MPI_FAMILY")
    if family not in families:
        raise LaunchError(f"NETBENCH_MPI_FAMILY={family}: not in {discovery.FAMILIES_FILE}")
    spec = families[family]
    variables, flags = (ALLOCATION_VARIABLES, spec["allocation_flags"]) if allocation \
        else (CLUSTER_VARIABLES, spec["remote_flags"])
    values = {key: required(env, var) for key, var in variables.items()}
    values["ppn"] = str(ppn)
    flags = [flag.format(**values) for flag in flags]
    # over ssh the launcher starts on this host: in the head namespace, so
    # that its listening sockets are on the cluster's network only; inside
    # an allocation it already runs on a node
    where = [] if allocation else ["ip", "netns", "exec", values["netns"]]
    return (where + [required(env, "NETBENCH_MPIRUN")] + flags + forwarded(spec, env)
            + ["-np", str(nprocs)] + list(program))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.launch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-np", type=int, required=True, help="number of processes")
    parser.add_argument("--ppn", type=int, required=True, help="processes per node")
    parser.add_argument("--allocation", action="store_true",
                        help="inside a Slurm allocation: nodes and daemons through Slurm")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program to launch")
    try:
        argv = command(args.np, args.ppn, program, allocation=args.allocation)
    except LaunchError as err:
        print(f"netbench.launch: {err}", file=sys.stderr)
        return 2
    print("# launch: " + shlex.join(argv), file=sys.stderr, flush=True)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main())

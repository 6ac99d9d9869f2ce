"""Start an MPI job across the nodes of a cluster partition.

    python -m netbench.rfm.launch -np N --ppn K [--allocation] -- PROGRAM [ARGS...]

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
needed.  With `--here` it is the environment's own launcher on this host
(`NETBENCH_MPIRUN` with `NETBENCH_MPIRUN_FLAGS`: ReFrame's `netbench-mpirun`).
The command is printed to stderr before it runs, so the job's output says
exactly what was launched.

The launch runs under netbench.rfm.supervise: with `--time-limit` (the job's,
ReFrame's) it ends all of the launch, the ranks, proxies and ssh sessions on
the nodes included, a little before that limit or when cancelled, and says
on stderr what it saw (no progress, a link that stopped carrying traffic,
the ranks that had not finished).

A launch on this host (`--here`) gets a temporary folder of its own as
TMPDIR, removed when the launch ends: Open MPI names its session folder
`$TMPDIR/ompi.<launcher pid>`, a launch that was ended leaves it behind, and
a later launcher given the same pid (pid_max is 32768 on many hosts) stops
at once with "The PMIx server's listener thread failed to start".  Only on
this host: MPICH passes its environment to remote ranks, where the folder
does not exist.
"""

import argparse
import contextlib
import os
import shlex
import shutil
import sys
import tempfile

from . import supervise
from ..probe import discovery

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
    values["bind"] = spec["bind"]["one_node" if nprocs <= ppn else "across_nodes"]
    flags = [flag.format(**values) for flag in flags]
    # over ssh the launcher starts on this host: in the head namespace, so
    # that its listening sockets are on the cluster's network only; inside
    # an allocation it already runs on a node
    where = [] if allocation else ["ip", "netns", "exec", values["netns"]]
    return (where + [required(env, "NETBENCH_MPIRUN")] + flags + forwarded(spec, env)
            + ["-np", str(nprocs)] + list(program))


def here_command(nprocs, program, env=None):
    """The environment's own launcher on this host, with its family's flags."""
    env = os.environ if env is None else env
    return ([required(env, "NETBENCH_MPIRUN")] + env.get("NETBENCH_MPIRUN_FLAGS", "").split()
            + ["-np", str(nprocs)] + list(program))


@contextlib.contextmanager
def private_tmpdir(env):
    """`env` with TMPDIR set to a new folder only this launch uses (mode
    0700, under the caller's TMPDIR); removed, with what the launch left in
    it, when the launch ends."""
    folder = tempfile.mkdtemp(prefix="netbench-launch-", dir=env.get("TMPDIR"))
    try:
        yield {**env, "TMPDIR": folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.rfm.launch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-np", type=int, required=True, help="number of processes")
    parser.add_argument("--ppn", type=int, help="processes per node (required but --here)")
    parser.add_argument("--allocation", action="store_true",
                        help="inside a Slurm allocation: nodes and daemons through Slurm")
    parser.add_argument("--here", action="store_true",
                        help="on this host: NETBENCH_MPIRUN with NETBENCH_MPIRUN_FLAGS")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="the job's time limit: the launch is ended, and why said, "
                             "a little before it")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program to launch")
    # the launch's tag, in the environment the launcher's flags are made
    # from: Open MPI forwards NETBENCH_* to its ranks (-x)
    env = {**os.environ, supervise.TAG: supervise.new_tag()}
    try:
        argv = here_command(args.np, program, env) if args.here else \
            command(args.np, args.ppn or 1, program, env=env, allocation=args.allocation)
    except LaunchError as err:
        # the lines' tag stays `netbench.launch:` (as supervise.py's):
        # checks/slurm.py reads it in job outputs old and new
        print(f"netbench.launch: {err}", file=sys.stderr)
        return 2
    print("# launch: " + shlex.join(argv), file=sys.stderr, flush=True)
    if args.here:
        with private_tmpdir(env) as own:
            return supervise.supervise(argv, own, time_limit=args.time_limit)
    hostfile = None if args.allocation else env.get("NETBENCH_HOSTFILE")
    return supervise.supervise(argv, env, time_limit=args.time_limit, hostfile=hostfile)


if __name__ == "__main__":
    sys.exit(main())

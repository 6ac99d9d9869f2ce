"""netbench's ReFrame job launchers, which the partitions name
(`netbench-mpirun`, `netbench-ssh`, `netbench-alloc`); each runs the job's
ranks through `python -m netbench.rfm.launch`.  reframe_checks/settings.py
registers them, once per interpreter."""

import sys


def _register_launcher(name, command):
    """Register a ReFrame job launcher whose `command(job)` is `command`;
    once per interpreter (the configuration may be loaded twice)."""
    from reframe.core.backends import getlauncher
    from reframe.core.backends import register_launcher as register
    from reframe.core.launchers import JobLauncher

    try:
        return getlauncher(name)
    except Exception:
        pass
    class Launcher(JobLauncher):
        def command(self, job):
            return command(job)

    return register(name)(Launcher)


def register_launchers():
    """netbench's ReFrame job launchers, which the partitions name: once
    per interpreter."""
    register_mpirun_launcher()
    register_cluster_launcher()
    register_allocation_launcher()


#: put before each launcher's command line in the job script: the script's
#: shell then waits for the launch when ReFrame cancels the job.  ReFrame
#: cancels a local job (Ctrl-C, its time limit) with SIGTERM to the job's
#: process group and SIGKILLs the group once the script's shell has exited;
#: a shell without a trap exits at once, and the SIGKILL then ended
#: netbench.rfm.launch before it had ended the ranks (Open MPI puts them in
#: process groups of their own) and removed its TMPDIR.  A shell runs a
#: trap only once its running command has ended.
SCRIPT_WAITS_FOR_THE_LAUNCH = ["trap", "'exit 143'", "TERM;"]


#: the job's attribute naming a shell variable of the job script that holds
#: a launch's own time limit (checks.base.launch_prefix): a later launch of
#: the job has what is left of the job's limit, not all of it
TIME_LIMIT_VARIABLE = "netbench_time_limit_variable"


def time_limit_flags(job):
    """`--time-limit S`: netbench.rfm.launch ends the whole launch (remote
    ranks, proxies and ssh sessions included) and says why, before ReFrame's
    own time limit ends the job script alone with "job timed out"."""
    variable = getattr(job, TIME_LIMIT_VARIABLE, None)
    if variable:
        return ["--time-limit", f'"${variable}"']
    return ["--time-limit", f"{job.time_limit:g}"] if job.time_limit else []


def register_mpirun_launcher():
    """`netbench-mpirun`: the environment's own launcher (NETBENCH_MPIRUN,
    set per programming environment, with NETBENCH_MPIRUN_FLAGS), so one
    partition serves MPICH's mpiexec.hydra and Open MPI's prterun alike;
    through netbench.rfm.launch --here, which ends all of the launch when its
    time is up (Open MPI's ranks have process groups of their own)."""
    return _register_launcher("netbench-mpirun", lambda job: [
        *SCRIPT_WAITS_FOR_THE_LAUNCH, sys.executable, "-m", "netbench.rfm.launch", "--here",
        "-np", str(job.num_tasks),
        *time_limit_flags(job), "--"])


def register_cluster_launcher():
    """`netbench-ssh`: MPI across the nodes of a cluster partition, through
    netbench.rfm.launch, which adds the family's flags for hostfile, ssh agent
    and cluster network (data/mpi_families.yaml, `remote_flags`)."""
    return _register_launcher("netbench-ssh", lambda job: [
        *SCRIPT_WAITS_FOR_THE_LAUNCH, sys.executable, "-m", "netbench.rfm.launch",
        "-np", str(job.num_tasks),
        "--ppn", str(job.num_tasks_per_node or 1), *time_limit_flags(job), "--"])


def register_allocation_launcher():
    """`netbench-alloc`: the MPI's own launcher inside a Slurm allocation
    (the alternative to srun), through netbench.rfm.launch --allocation."""
    return _register_launcher("netbench-alloc", lambda job: [
        *SCRIPT_WAITS_FOR_THE_LAUNCH, sys.executable, "-m", "netbench.rfm.launch",
        "--allocation", "-np", str(job.num_tasks),
        "--ppn", str(job.num_tasks_per_node or 1), *time_limit_flags(job), "--"])

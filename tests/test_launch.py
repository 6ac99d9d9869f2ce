"""The command lines netbench.rfm.launch builds for each MPI family."""

import pytest

from netbench.rfm import launch

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

CLUSTER = {"NETBENCH_HOSTFILE": "/c/hostfile", "NETBENCH_SSH_AGENT": "/c/ssh",
           "NETBENCH_HEAD_ADDRESS": "198.18.0.3", "NETBENCH_NETWORK": "198.18.0.0/24",
           "NETBENCH_LAUNCH_NETNS": "nb-c-hd"}
#: over ssh the launcher runs in the cluster's head namespace
IN_HEAD = ["ip", "netns", "exec", "nb-c-hd"]


def test_mpich_goes_through_hydra_with_the_cluster_agent(families):
    env = {**CLUSTER, "NETBENCH_MPI_FAMILY": "mpich", "NETBENCH_MPIRUN": "/m/mpiexec",
           "UCX_TLS": "tcp,self"}
    argv = launch.command(4, 2, ["./netbench", "pingpong"], env=env, families=families)
    assert argv[:5] == IN_HEAD + ["/m/mpiexec"]
    assert argv[-4:] == ["-np", "4", "./netbench", "pingpong"]
    joined = " ".join(argv)
    for part in ("-f /c/hostfile", "-launcher ssh", "-launcher-exec /c/ssh",
                 "-localhost 198.18.0.3", "-ppn 2", "-bind-to none"):
        assert part in joined
    assert "-x" not in argv      # Hydra forwards the environment itself


def test_open_mpi_forwards_the_transport_variables_it_would_drop(families):
    env = {**CLUSTER, "NETBENCH_MPI_FAMILY": "openmpi", "NETBENCH_MPIRUN": "/o/mpirun",
           "UCX_TLS": "tcp,self", "FI_PROVIDER": "tcp", "OMPI_MCA_pml": "ucx", "HOME": "/root"}
    argv = launch.command(2, 1, ["./netbench"], env=env, families=families)
    joined = " ".join(argv)
    for part in ("--hostfile /c/hostfile", "--mca plm_rsh_agent /c/ssh",
                 "--mca oob_tcp_if_include 198.18.0.0/24",
                 "--mca btl_tcp_if_include 198.18.0.0/24", "--map-by ppr:1:node",
                 "--bind-to none", "-x FI_PROVIDER", "-x UCX_TLS"):
        assert part in joined
    assert "-x HOME" not in joined and "-x OMPI_MCA_pml" not in joined


def test_ranks_of_one_node_pin_one_a_core_and_ranks_across_nodes_none(families):
    """Namespace nodes all see the host's CPUs: across nodes each would pin
    its first rank to core 0; on one node, unbound, both ranks of a job
    could share a CPU and take a time slice per message."""
    for family, one_node in (("mpich", "-bind-to core"),
                             ("openmpi", "--bind-to core:overload-allowed")):
        env = {**CLUSTER, "NETBENCH_MPI_FAMILY": family, "NETBENCH_MPIRUN": "/m/run"}
        across = " ".join(launch.command(2, 1, ["./netbench"], env=env, families=families))
        assert one_node.split()[0] + " none" in across
        here = " ".join(launch.command(2, 2, ["./netbench"], env=env, families=families))
        assert one_node in here
        on_slurm = " ".join(launch.command(2, 2, ["./netbench"], env=env, families=families,
                                           allocation=True))
        assert one_node in on_slurm


def test_outside_a_cluster_partition_one_clear_error(families):
    env = {"NETBENCH_MPI_FAMILY": "mpich", "NETBENCH_MPIRUN": "/m/mpiexec"}
    with pytest.raises(launch.LaunchError, match="NETBENCH_HOSTFILE is not set"):
        launch.command(2, 1, ["./netbench"], env=env, families=families)


def test_the_reframe_launchers_hand_the_time_limit_to_the_supervisor():
    """netbench.rfm.launch ends the whole launch a little before the job's time
    limit and says why (netbench/rfm/supervise.py): ReFrame's launchers tell it
    that limit, and the local one goes through it too (issue #23, 11)."""
    import types

    from netbench.rfm import launchers
    launchers.register_launchers()
    from reframe.core.backends import getlauncher
    job = types.SimpleNamespace(num_tasks=2, num_tasks_per_node=1, time_limit=120.0)
    for name in ("netbench-mpirun", "netbench-ssh", "netbench-alloc"):
        argv = getlauncher(name)().command(job)
        # the job script's shell waits for the launch when the job is cancelled
        assert argv[:3] == launchers.SCRIPT_WAITS_FOR_THE_LAUNCH, (name, argv)
        assert argv[4:6] == ["-m", "netbench.rfm.launch"], (name, argv)
        assert argv[argv.index("--time-limit") + 1] == "120" and argv[-1] == "--", (name, argv)
    assert "--here" in getlauncher("netbench-mpirun")().command(job)


def test_here_is_the_environments_own_launcher_with_its_flags():
    env = {"NETBENCH_MPIRUN": "/m/mpiexec", "NETBENCH_MPIRUN_FLAGS": "-bind-to core"}
    assert launch.here_command(2, ["./netbench", "pingpong"], env=env) == \
        ["/m/mpiexec", "-bind-to", "core", "-np", "2", "./netbench", "pingpong"]


def test_the_supervisors_line_is_the_fail_reason():
    from netbench.checks.slurm import job_failure
    line = ("stopped the job 110 s into its 120 s time limit: no progress for 95 s; the link "
            "to node c-n2 stopped carrying traffic 94 s ago (it is down)")
    # the MPI launcher's words about the ranks the supervisor killed come after
    err = (f"netbench.launch: {line}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION "
           f"PROCESSES\n=   PID 7 RUNNING AT c-n1\n=   EXIT CODE: 9\n")
    assert job_failure("", err) == line

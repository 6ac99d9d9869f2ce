"""Diagnosis names the cause injected into real runs (netbench/tuning/
diagnosis.py): real ReFrame sessions with real Open MPI launches, across
a virtual cluster's links and over this machine's shared memory, each
with one cause injected, each run's session diagnosed as `netbench tune`
and the report diagnose it; the same runs without the cause name nothing.

What a veth cannot take (interrupt coalescing: `ethtool -C` is refused)
is tested on recorded curves (test_diagnosis.py)."""

from netbench import vcluster
from netbench.report import sessions
from netbench.report import diagnosis
from netbench.tuning import loop

from helpers.vcluster import cluster

TCP = ["-p", "^openmpi$", "-n", "^PingPong",
       "-E", "placement=='internode' and transport=='tcp' and variant=='blocking'"]
SHM = ["-p", "^openmpi$", "-n", "^PingPong%variant=blocking%transport=shm%placement=intranode$"]


def named(system, selection, *extra):
    """The rules the diagnosis names on one real session, with the evidence."""
    path, _ = loop.measure(system, [*selection, *extra], "diagnosed")
    found = diagnosis.diagnose(sessions.load_session(path))
    return sorted(d.rule for d in found), found


def test_mtu_mismatch_and_a_moved_eager_limit_are_named_across_a_cluster(host_untouched):
    # unshaped links (a tbf link's bursts make steps of their own) whose
    # switch carries jumbo frames, so that one node can be raised to 9000
    with cluster("dgl", nodes=2, switch_mtu=9000) as state:
        system = state["system"]
        rules, found = named(system, TCP)
        assert rules == [], found

        vcluster.set_fault("dgl", 2, mtu=9000)
        rules, found = named(system, TCP)
        assert rules == ["mtu_path_mismatch"], found
        assert "the nodes' MTUs differ" in found[0].evidence and "9000" in found[0].evidence
        vcluster.set_fault("dgl", 2, clear_fault=True)

        rules, found = named(system, TCP, "-S", "env_vars=OMPI_MCA_btl_tcp_eager_limit:4096")
        assert rules == ["eager_rendezvous_step"], found
        assert found[0].setting == "OMPI_MCA_btl_tcp_eager_limit"


def test_shared_memory_without_single_copy_is_named():
    rules, found = named("local", SHM)
    assert "shm_without_single_copy" not in rules, found
    rules, found = named("local", SHM, "-S", "env_vars=OMPI_MCA_smsc:^cma")
    assert "shm_without_single_copy" in rules, found
    (nocma,) = [d for d in found if d.rule == "shm_without_single_copy"]
    assert "OMPI_MCA_smsc=^cma" in nocma.evidence

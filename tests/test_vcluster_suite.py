"""The internode checks on a virtual cluster: ReFrame launches both MPIs
over ssh into namespace nodes, forces TCP, and proves the bytes crossed the
emulated links."""

import os
import re
import subprocess

from conftest import require
from netbench import vcluster
from netbench.rfm import launch, session
from helpers.suite import cases_of, perf
from helpers.vcluster import cluster

MiB = 1024 * 1024


def run_reframe(system, *selection, env=None, action="-r"):
    return session.run_reframe(system, *selection, env=env, timeout=900, action=action)


def mtu_figures(cases):
    """{(environment, MTU): 8 MiB bandwidth} of the MTU ping-pongs."""
    return {(tc["environ"], tc["mtu"]): perf(tc, "bw_8MiB") for tc in cases
            if tc["name"].startswith("MtuPingPong")}


def jumbo_frames_win(by_mtu, gain=1.03):
    """Seed 004: MTU 9000 beats 1500 on large messages, for every MPI."""
    return all(by_mtu[(env, 9000)] > gain * by_mtu[(env, 1500)]
               for env in {env for env, _ in by_mtu})


def test_internode_checks_run_on_both_mpis_over_the_emulated_links():
    with cluster("tsuite", nodes=3, rate="1gbit", mtu=9000) as state:
        proc = run_reframe(state["system"], "-p", "^(mpich|openmpi)$",
                           "-n", "^(PingPong|MpiVsTcp|MtuPingPong)",
                           "-n", "ThroughputPerNode%pattern=exchange%layout=1ppn-3",
                           "-x", "intranode|shm|native|nonblocking|mtu=(4000|7000)")
        out = proc.stdout[-6000:] + proc.stderr[-2000:]
        assert proc.returncode in session.NO_FAILURE, out
        report = session.latest_report()
        by_mtu = mtu_figures(cases_of(report))
        if not jumbo_frames_win(by_mtu):
            # repeat before alarm: one sweep on a busy 2-core host can dip
            # by a third; a jumbo frame that gains nothing loses twice
            again = run_reframe(state["system"], "-p", "^(mpich|openmpi)$",
                                "-n", "^MtuPingPong%mtu=(1500|9000)%variant=blocking")
            assert again.returncode in session.NO_FAILURE, again.stdout[-4000:]
            for key, value in mtu_figures(cases_of(session.latest_report())).items():
                by_mtu[key] = max(by_mtu[key], value)
    every = cases_of(report)
    assert all(tc["system"] == "vcluster-tsuite" for tc in every)
    # MPICH has no native TCP module of its own (tcp is Open MPI's btl):
    # those cases are not generated rather than skipped
    assert not [tc for tc in every if tc["result"] == "skip"]
    cases = list(every)
    assert all(tc["result"] == "pass" for tc in cases), out
    assert {tc["environ"] for tc in cases} == {"mpich", "openmpi"}
    names = {tc["name"].split()[0] for tc in cases}
    assert names == {"PingPong", "MpiVsTcp", "MtuPingPong", "ThroughputPerNode"}, names
    for tc in cases:
        # each case moved its largest message through the veths many times
        assert perf(tc, "link_traffic") > 2 * 8 * MiB / 1e6, tc["display_name"]
        assert tc["partition_info"]["interconnect"] == "gige"
        # what each node ran under, read on the node itself (netbench.probe.nodestate)
        states = tc["record"]["node_state"]
        assert len(states) >= 2, (tc["display_name"], sorted(states))
        assert all(s["interfaces"]["eth0"]["mtu"] in (1500, 9000) for s in states.values())
        # tbf shapes the rate only: latency across it is reported, not held
        # to a GigE wire's 17.53 us (the host's scheduler decides it)
        latencies = [k for k in tc["perfvalues"] if k.endswith("latency")]
        assert latencies or tc["name"].startswith("ThroughputPerNode"), tc["display_name"]
        for key in latencies:
            assert tc["perfvalues"][key][1] in (None, 0), (tc["display_name"], key)
            assert "emulates only its rate" in tc["record"]["unjudged"][key.split(":")[-1]]

    # shaped links: large messages run close to the 1 Gbit/s token rate
    # (MTU 9000; at 1500 this VM's per-packet cost caps them near 0.6)
    for tc in cases:
        if tc["name"].startswith("PingPong"):
            assert 800 < perf(tc, "bw_8MiB") < 1050, tc["display_name"]
    # seed 004: jumbo frames beat the default MTU for large messages
    for env in ("mpich", "openmpi"):
        # measured 1.05-1.12x on these 2-core machines (a fresh CI machine:
        # Open MPI 892 vs 850 Mbit/s); 1.03 still fails a jumbo frame that
        # gains nothing, without failing on the host's noise
        assert by_mtu[(env, 9000)] > 1.03 * by_mtu[(env, 1500)], by_mtu
    ring = [tc for tc in cases if tc["name"].startswith("ThroughputPerNode")]
    assert len(ring) == 2
    assert all(len(set(tc["record"]["series"][0]["rows"][0]) & {"bytes", "MBps"}) == 2 for tc in ring)


def test_link_counters_see_a_path_outside_the_network(mpis, build_benchmark, families):
    """The proof the checks rely on can fail: Debian's MPICH without UCX_TLS
    talks shared memory between namespace nodes, and the links stay quiet,
    while with TCP forced they carry every message."""
    require("system-mpich" in mpis, "Debian's mpich package (mpiexec.mpich)")
    mpi = mpis["system-mpich"]
    bench = build_benchmark(mpi)
    with cluster("tproof", nodes=2) as state:
        env = dict(os.environ, NETBENCH_MPI_FAMILY=mpi.family, NETBENCH_MPIRUN=mpi.launcher,
                   **vcluster.launch_environment(state))
        env.pop("UCX_TLS", None)
        moved = {}
        for label, extra in (("default", {}), ("tcp", mpi.transports["ucx-tcp"])):
            argv = launch.command(2, 1, [str(bench.binary), "pingpong", "-x", str(8 * MiB)],
                                  env={**env, **extra}, families=families)
            before = vcluster.link_bytes(state)
            proc = subprocess.run(argv, env={**env, **extra}, capture_output=True, text=True,
                                  timeout=120)
            assert proc.returncode == 0, proc.stderr
            assert "host tproof-n1" in proc.stdout and "host tproof-n2" in proc.stdout
            after = vcluster.link_bytes(state)
            moved[label] = min(after[n] - before[n] for n in after)
    print(f"\nbytes on the quieter link: {moved}")
    assert moved["default"] < 8 * MiB < moved["tcp"]


def test_runs_that_would_measure_the_scheduler_or_a_known_hang_are_not_generated(mpis):
    """A 3-node cluster on this machine's cores: 4 ranks on one node would
    oversubscribe it, and Debian's MPICH 4.0.2 hangs over UCX tcp across
    nodes (mpi_families.yaml known_defects); neither is generated, each
    reason is said once with its count, and nothing is run into its time
    limit or printed as a SKIP line."""
    envs = "^(mpich|system-mpich)$" if "system-mpich" in mpis else "^mpich$"
    with cluster("tskip", nodes=3) as state:
        proc = run_reframe(state["system"], "-p", envs, "-n", "^(MtuRing|Throughput)",
                           "-x", "bcast|shm", action="--dry-run")
    assert proc.returncode == 0, proc.stdout[-4000:]
    out = proc.stdout
    assert "SKIP" not in out, out[-4000:]
    dropped = re.findall(r"^\d+ cases? not generated: (.*)$", out, re.M)
    assert any(line.startswith("more ranks per node than CPUs") for line in dropped) == \
        (os.cpu_count() == 2), dropped
    # the wheel's MPICH 5 has no such defect: its ring runs
    assert re.search(r"^\[.*\] MtuRing .*@\S+\+mpich$", out, re.M), out[-4000:]
    if "system-mpich" in mpis and mpis["system-mpich"].version == "4.0.2":
        defect = [line for line in dropped if line.startswith("known defect")]
        assert defect and "system-mpich ucx-tcp internode" in defect[0], dropped

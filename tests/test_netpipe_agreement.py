"""netbench against an independent tool: NetPIPE from Debian, built against
the same MPI and run on the same transport, must agree within 15% on
latency and peak bandwidth (medians of repeated, interleaved runs)."""

import shutil

import pytest

from conftest import require
from netbench import netpipe

TOLERANCE = 0.15
REPEATS = 3


def assert_agree(np_runs, nb_runs, what):
    np_med, nb_med = netpipe.medians(np_runs), netpipe.medians(nb_runs)
    detail = (f"{what}: NetPIPE {np_med.latency_us:.3f} us {np_med.peak_mbps:.0f} Mbit/s, "
              f"netbench {nb_med.latency_us:.3f} us {nb_med.peak_mbps:.0f} Mbit/s")
    print(detail)
    assert nb_med.latency_us == pytest.approx(np_med.latency_us, rel=TOLERANCE), detail
    assert nb_med.peak_mbps == pytest.approx(np_med.peak_mbps, rel=TOLERANCE), detail


@pytest.mark.parametrize("family", ["mpich", "openmpi"])
def test_mpi_pingpong_agrees_with_netpipe(family, mpis, build_benchmark):
    system = mpis.get(f"system-{family}")
    require(system is not None, f"Debian's {family} is not installed")
    binary = netpipe.netpipe_for(system)
    require(binary is not None, f"Debian's NetPIPE for {family} "
                                f"({netpipe.NETPIPE_MPI[family]}) is not installed")
    bench = build_benchmark(system)
    np_runs, nb_runs = netpipe.side_by_side(lambda: netpipe.netpipe_mpi(binary, bench),
                                            lambda: netpipe.netbench_mpi(bench), REPEATS)
    assert_agree(np_runs, nb_runs, system.name)


def test_tcp_pingpong_agrees_with_nptcp(wheel_mpis, build_benchmark):
    require(shutil.which(netpipe.NETPIPE_TCP) is not None, "netpipe-tcp is not installed")
    bench = build_benchmark(wheel_mpis["mpich"])
    np_runs, nb_runs = netpipe.side_by_side(netpipe.netpipe_tcp,
                                            lambda: netpipe.netbench_tcp(bench), REPEATS)
    assert_agree(np_runs, nb_runs, "tcp loopback")


def test_netpipe_units_are_converted():
    points = netpipe.parse_netpipe("       1 2.000000   0.00000381\n 1048576 8000.0 0.001\n")
    assert points[0] == (1, pytest.approx(2.097152), 0.00000381)
    figures = netpipe.figures_from_points(points, 1.0)
    assert figures.latency_us == pytest.approx(3.81)
    assert figures.peak_mbps == pytest.approx(8388.608)

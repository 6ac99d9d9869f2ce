"""netbench against an independent tool: NetPIPE from Debian, built against
the same MPI and run on the same transport, must agree on latency and peak
bandwidth within 25%, over 15 interleaved launches of each.

This shared 2-vCPU machine puts each launch in a fast or a slow mode for
its whole life: Debian MPICH's shared-memory latency is 0.13-0.15 us in
about one launch in five and 0.37-0.48 us in the others, for either tool;
peaks are 150 or 70 Gbit/s the same way.  Earlier versions compared one
or three runs per tool and failed whenever one tool happened to catch the
fast mode and the other did not (CI: NetPIPE 0.33 us three times against
netbench's best of about 20 launches, 0.15).  So NetPIPE runs with a fixed
repeat count (-n), a launch takes about a second, both tools get the same
number of launches, and `netpipe.agree_by_mode` compares their best and
their median launches.  25%, not less: pinned TCP loopback peaks spread
55-91 Gbit/s between launches of one tool, and the errors this test is for
are factors of 2 or 8 (round trip for one way, bytes for bits; a MiB/MB
mix-up, 5%, is below any honest bound here).
"""

import shutil

import pytest

from conftest import require
from netbench.results.netpipe import parse_netpipe
from netbench.tools import netpipe

TOLERANCE = 0.25
LAUNCHES = 15


def assert_agree(np_runs, nb_runs, what):
    for attr, unit, best in (("latency_us", "us", min), ("peak_mbps", "Mbit/s", max)):
        np_values = [getattr(r, attr) for r in np_runs]
        nb_values = [getattr(r, attr) for r in nb_runs]
        detail = (f"{what} {attr} per launch: NetPIPE {[round(v, 3) for v in np_values]} "
                  f"{unit}, netbench {[round(v, 3) for v in nb_values]} {unit}")
        print(detail)
        assert netpipe.agree_by_mode(np_values, nb_values, TOLERANCE, best), detail


def test_agreement_fails_a_factor_of_two():
    fast, slow = 0.14, 0.42
    netpipe_launches = [fast] * 3 + [slow] * 12
    assert netpipe.agree_by_mode(netpipe_launches, [fast] * 2 + [slow] * 13, TOLERANCE)
    # one tool missed the fast mode, the medians still agree
    assert netpipe.agree_by_mode(netpipe_launches, [slow] * 15, TOLERANCE)
    # round trip for one way
    assert not netpipe.agree_by_mode(netpipe_launches, [2 * v for v in netpipe_launches],
                                     TOLERANCE)
    # bytes for bits, on peaks where the fast mode is the larger value
    peaks = [150e3] + [70e3] * 14
    assert netpipe.agree_by_mode(peaks, [72e3] * 15, TOLERANCE, max)
    assert not netpipe.agree_by_mode(peaks, [v / 8 for v in peaks], TOLERANCE, max)


@pytest.mark.parametrize("family", ["mpich", "openmpi"])
def test_mpi_pingpong_agrees_with_netpipe(family, mpis, build_benchmark):
    system = mpis.get(f"system-{family}")
    require(system is not None, f"Debian's {family} is not installed")
    binary = netpipe.netpipe_for(system)
    require(binary is not None, f"Debian's NetPIPE for {family} "
                                f"({netpipe.NETPIPE_MPI[family]}) is not installed")
    bench = build_benchmark(system)
    np_runs, nb_runs = netpipe.side_by_side(
        lambda: netpipe.netpipe_mpi(binary, bench, repeats=netpipe.SHM_REPEATS),
        lambda: netpipe.netbench_mpi(bench), LAUNCHES)
    assert_agree(np_runs, nb_runs, system.name)


def test_tcp_pingpong_agrees_with_nptcp(wheel_mpis, build_benchmark):
    require(shutil.which(netpipe.NETPIPE_TCP) is not None, "netpipe-tcp is not installed")
    bench = build_benchmark(wheel_mpis["mpich"])
    np_runs, nb_runs = netpipe.side_by_side(
        lambda: netpipe.netpipe_tcp(repeats=netpipe.TCP_REPEATS),
        lambda: netpipe.netbench_tcp(bench), LAUNCHES)
    assert_agree(np_runs, nb_runs, "tcp loopback")


def test_netpipe_units_are_converted():
    points = parse_netpipe("       1 2.000000   0.00000381\n 1048576 8000.0 0.001\n")
    assert points[0] == (1, pytest.approx(2.097152), 0.00000381)
    figures = netpipe.figures_from_points(points, 1.0)
    assert figures.latency_us == pytest.approx(3.81)
    assert figures.peak_mbps == pytest.approx(8388.608)

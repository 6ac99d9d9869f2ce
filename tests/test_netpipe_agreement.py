"""netbench against an independent tool: NetPIPE from Debian, built against
the same MPI and run on the same transport, must agree on latency and peak
bandwidth over repeated, interleaved runs, within 25%.

This shared 2-vCPU machine changes speed from second to second: Debian
MPICH's shared-memory latency is 0.14 or 0.47 us depending on the moment,
even between two sizes of one NetPIPE sweep.  NetPIPE's sweep takes about
ten times netbench's, so it is far likelier to catch a fast moment: its
latency was 0.14 us in 6 of 6 runs while netbench's 1-second sweeps gave
0.40-0.44.  So each netbench run repeats its sweep for as long as the
NetPIPE run before it took (`netpipe.best_within`), and the two tools'
ranges of runs must meet: a unit or method error (bytes for bits, round
trip for one way) still fails wherever a tool's spread is under 2x.
25%, not less: pinned TCP loopback peaks spread 58-90 Gbit/s between runs
of one tool, and the errors this test is for are factors of 2 or 8 (a
MiB/MB mix-up, 5%, is below any honest bound here).

Shared-memory peak bandwidth is the exception: each run lands at 68-76 or
at 127-162 Gbit/s, for either tool, and netbench's repeated sweeps nearly
always reach the upper band while a NetPIPE sweep mostly does not (3 of 3
runs each way, twice).  Its ranges need only meet within 2.2x, which still
fails bytes for bits (8x); pinned TCP loopback keeps the 25% bound on the
same timing and accounting code.
"""

import shutil

import pytest

from conftest import require
from netbench import netpipe

TOLERANCE = 0.25
SHM_PEAK_TOLERANCE = 1.2
REPEATS = 3


def overlap(a, b, tolerance=TOLERANCE):
    """The ranges of values `a` and `b` meet, allowing `tolerance`."""
    return min(a) <= max(b) * (1 + tolerance) and min(b) <= max(a) * (1 + tolerance)


def assert_agree(np_runs, nb_runs, what, peak_tolerance=TOLERANCE):
    for attr, unit, tolerance in (("latency_us", "us", TOLERANCE),
                                  ("peak_mbps", "Mbit/s", peak_tolerance)):
        np_values = [getattr(r, attr) for r in np_runs]
        nb_values = [getattr(r, attr) for r in nb_runs]
        detail = (f"{what} {attr}: NetPIPE {[round(v, 3) for v in np_values]} {unit}, "
                  f"netbench {[round(v, 3) for v in nb_values]} {unit}")
        print(detail)
        assert overlap(np_values, nb_values, tolerance), detail


def test_overlap_fails_a_factor_of_two():
    assert overlap([3.5, 4.1], [3.2, 4.0])
    assert not overlap([3.5, 4.1], [7.0, 8.2])          # round trip for one way
    assert not overlap([68e3, 80e3], [8.5e3, 10e3])     # bytes for bits
    assert overlap([70e3, 74e3], [142e3, 147e3], SHM_PEAK_TOLERANCE)
    assert not overlap([70e3, 74e3], [8 * 70e3, 8 * 74e3], SHM_PEAK_TOLERANCE)


@pytest.mark.parametrize("family", ["mpich", "openmpi"])
def test_mpi_pingpong_agrees_with_netpipe(family, mpis, build_benchmark):
    system = mpis.get(f"system-{family}")
    require(system is not None, f"Debian's {family} is not installed")
    binary = netpipe.netpipe_for(system)
    require(binary is not None, f"Debian's NetPIPE for {family} "
                                f"({netpipe.NETPIPE_MPI[family]}) is not installed")
    bench = build_benchmark(system)
    np_runs, nb_runs = netpipe.side_by_side(lambda: netpipe.netpipe_mpi(binary, bench),
                                            lambda: netpipe.netbench_mpi(bench), REPEATS,
                                            match_time=True)
    assert_agree(np_runs, nb_runs, system.name, peak_tolerance=SHM_PEAK_TOLERANCE)


def test_tcp_pingpong_agrees_with_nptcp(wheel_mpis, build_benchmark):
    require(shutil.which(netpipe.NETPIPE_TCP) is not None, "netpipe-tcp is not installed")
    bench = build_benchmark(wheel_mpis["mpich"])
    np_runs, nb_runs = netpipe.side_by_side(netpipe.netpipe_tcp,
                                            lambda: netpipe.netbench_tcp(bench), REPEATS,
                                            match_time=True)
    assert_agree(np_runs, nb_runs, "tcp loopback")


def test_netpipe_units_are_converted():
    points = netpipe.parse_netpipe("       1 2.000000   0.00000381\n 1048576 8000.0 0.001\n")
    assert points[0] == (1, pytest.approx(2.097152), 0.00000381)
    figures = netpipe.figures_from_points(points, 1.0)
    assert figures.latency_us == pytest.approx(3.81)
    assert figures.peak_mbps == pytest.approx(8388.608)

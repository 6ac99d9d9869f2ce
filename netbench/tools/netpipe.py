"""NetPIPE as an independent reference for the netbench benchmark.

Debian ships NetPIPE 3.7 built against its own MPIs (`NPmpich2`,
`NPopenmpi`) and for TCP (`NPtcp`).  NetPIPE's choices differ from
netbench's, and the comparison aligns them where they change the figures:

* NetPIPE's "Mbps" is bits / (s x 2^20); converted here to 10^6 bit/s;
* in its default cache mode each process sends and receives from one buffer:
  netbench runs with `-1` to do the same;
* it keeps the fastest of three trials per size; netbench's headline is the
  median of its samples, so the comparison reads netbench's fastest sample
  (`usec_min`) too: like for like.  On this shared 2-vCPU machine the
  median of blocking TCP drifted 50% above NetPIPE's best-of-three while
  the fastest samples agreed.
"""

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass

from .. import benchspec
from ..results.netpipe import NETPIPE_MPI, SMALL, parse_netpipe
from .benchrun import MPI_TIMEOUT, job_environment

NETPIPE_TCP = "NPtcp"
# Where each tool looks for its figures: a short latency sweep and a
# bandwidth sweep over the sizes where the peak lies (NetPIPE's full 1 B -
# 8 MiB sweep takes 45-60 s; these two take about 10 s)
LATENCY_RANGE = (1, 63)
PEAK_RANGE = (131072, 8388608)
# NetPIPE's -n per range: a fixed repeat count instead of its calibration,
# so that a launch takes about a second and many launches fit in a test.
# Trials near netbench's own samples: a few ms of round trips.
SHM_REPEATS = {LATENCY_RANGE: 5000, PEAK_RANGE: 30}     # 0.15-0.5 us
TCP_REPEATS = {LATENCY_RANGE: 1000, PEAK_RANGE: 30}     # 3-5 us pinned


@dataclass
class Figures:
    latency_us: float
    peak_mbps: float      # 10^6 bit/s
    seconds: float        # wall time of the run(s)


def netpipe_for(mpi):
    """NetPIPE's MPI binary built against `mpi`, or None.  Debian's NetPIPE
    links Debian's MPIs: only the system MPI whose launcher sits beside it."""
    name = NETPIPE_MPI.get(mpi.family)
    path = shutil.which(name) if name else None
    if not path or mpi.source != "system":
        return None
    return path if os.path.dirname(path) == os.path.dirname(mpi.launcher) else None


def figures_from_points(points, seconds):
    small = [t for size, _, t in points if size < SMALL]
    return Figures(latency_us=min(small) * 1e6 if small else float("nan"),
                   peak_mbps=max(bw for _, bw, _ in points), seconds=seconds)


def _sweep_args(lo, hi, repeats):
    """NetPIPE's sizes lo..hi without perturbation, `repeats` per trial
    (None: NetPIPE calibrates)."""
    return ["-l", str(lo), "-u", str(hi), "-p", "0",
            *(["-n", str(repeats)] if repeats else [])]


def _netpipe_mpi_run(binary, mpi, families, bench, lo, hi, repeats=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "np.out")
        argv = [*bench.launch_command(2), binary, *_sweep_args(lo, hi, repeats), "-o", out]
        subprocess.run(argv, capture_output=True, text=True, timeout=MPI_TIMEOUT, check=True,
                       env=job_environment(mpi, families), cwd=tmp)
        with open(out) as f:
            return parse_netpipe(f.read())


def netpipe_mpi(binary, bench, ranges=(LATENCY_RANGE, PEAK_RANGE), repeats=None):
    """NetPIPE's figures for the MPI `bench` was built with.  `repeats`:
    {range: -n} (SHM_REPEATS), or None for NetPIPE's own calibration."""
    start, points = time.monotonic(), []
    for lo, hi in ranges:
        points += _netpipe_mpi_run(binary, bench.mpi, bench.families, bench, lo, hi,
                                   (repeats or {}).get((lo, hi)))
    return figures_from_points(points, time.monotonic() - start)


def _nptcp_run(lo, hi, cpu, repeats=None):
    """NPtcp receiver and transmitter on loopback, both pinned to `cpu`: a
    sleeping TCP reader woken from the other vCPU costs 35-44 us here
    (docs/explanation/platform-facts.md), on one CPU about 3 us."""
    with tempfile.TemporaryDirectory() as tmp:
        pin = ["taskset", "-c", str(cpu)]
        bounds = _sweep_args(lo, hi, repeats)
        receiver = subprocess.Popen([*pin, NETPIPE_TCP, *bounds], cwd=tmp,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            out = os.path.join(tmp, "np.out")
            subprocess.run([*pin, NETPIPE_TCP, "-h", "127.0.0.1", *bounds, "-o", out],
                           capture_output=True, timeout=MPI_TIMEOUT, check=True, cwd=tmp)
            with open(out) as f:
                return parse_netpipe(f.read())
        finally:
            receiver.terminate()
            receiver.wait(timeout=10)


def netpipe_tcp(ranges=(LATENCY_RANGE, PEAK_RANGE), cpu=0, repeats=None):
    start, points = time.monotonic(), []
    for lo, hi in ranges:
        points += _nptcp_run(lo, hi, cpu, (repeats or {}).get((lo, hi)))
    return figures_from_points(points, time.monotonic() - start)


def _netbench_figures(bench, mode_args, ranges, one_buffer=True, **run_options):
    start, rows = time.monotonic(), []
    for lo, hi in ranges:
        rows += bench.measure(2, *mode_args, *benchspec.options(one_buffer=one_buffer,
                                                                min_bytes=lo, max_bytes=hi),
                              **run_options)["rows"]
    elapsed = time.monotonic() - start
    small = [r["usec_min"] for r in rows if r["bytes"] < SMALL]
    return Figures(latency_us=min(small),
                   peak_mbps=max(8 * r["bytes"] / r["usec_min"] for r in rows),
                   seconds=elapsed)


def netbench_mpi(bench, ranges=(LATENCY_RANGE, PEAK_RANGE)):
    return _netbench_figures(bench, ["pingpong"], ranges)


def netbench_tcp(bench, ranges=(LATENCY_RANGE, PEAK_RANGE), cpu=0, one_buffer=True):
    """netbench's TCP mode with both ranks pinned to one CPU, as NPtcp."""
    return _netbench_figures(bench, ["tcp"], ranges, one_buffer,
                             launcher_flags=_unbound_flags(bench.mpi.family),
                             prefix=("taskset", "-c", str(cpu)))


def _unbound_flags(family):
    # the launcher must not re-bind the ranks away from taskset's CPU
    return {"mpich": "-bind-to none", "openmpi": "--bind-to none"}[family]


def medians(runs):
    return Figures(latency_us=statistics.median(r.latency_us for r in runs),
                   peak_mbps=statistics.median(r.peak_mbps for r in runs),
                   seconds=statistics.median(r.seconds for r in runs))


def spread(runs, attr):
    """(max - min) / median of one figure over repeated runs."""
    values = [getattr(r, attr) for r in runs]
    return (max(values) - min(values)) / statistics.median(values)


def side_by_side(run_netpipe, run_netbench, launches):
    """Alternate the two tools `launches` times, so drifting load hits both
    alike: a list of Figures, one per launch, for each."""
    np_runs, nb_runs = [], []
    for _ in range(launches):
        np_runs.append(run_netpipe())
        nb_runs.append(run_netbench())
    return np_runs, nb_runs


def close(a, b, tolerance):
    return max(a, b) <= min(a, b) * (1 + tolerance)


def agree_by_mode(a, b, tolerance, best=min):
    """Two tools' per-launch values of one figure agree, on a machine where
    each launch lands in one of two speed modes: their best launches agree
    (both reached the fast mode) or their median launches do (most launches
    of each landed in the same mode).

    Here, shared-memory ping-pong is 0.13-0.15 us in about one launch in
    five and 0.3-0.48 us in the rest, for NetPIPE and netbench alike; the
    peak is 150 or 70 Gbit/s the same way.  A mode is kept for a launch's
    whole life (pinning and ASLR do not change it), so a tool with more
    launches, not a better method, shows the fast mode more often.  Either
    test alone fails now and then: one tool misses the fast mode in 15
    launches, or lands a median in it.  A factor of 2 between the tools
    still fails both, unless one tool's slow mode falls on the other's
    doubled fast one, which needs it to miss the fast mode as well."""
    return close(best(a), best(b), tolerance) or close(statistics.median(a),
                                                       statistics.median(b), tolerance)

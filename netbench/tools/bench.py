"""`make bench`: figures about the suite itself.

1. Wall times of ReFrame sessions as a user starts them, each beside its
   target: the focused default run here (under 60 s), the same on a 3-node
   virtual cluster (under 3 minutes) and the source documents' experiments
   there (`-t seeds`, under 10 minutes).  The cluster runs need root; the
   cluster is brought up for them and taken down after.
2. netbench's default sweep against NetPIPE's full sweep on the same MPI
   (and TCP), repeated and interleaved: median latency, peak bandwidth and
   sweep time, and the run-to-run spread of each (target: netbench at least
   3x faster at equal or better spread).  netbench runs twice: as the suite
   runs it (separate send and receive buffers, peak in cache) and with -1,
   NetPIPE's one-buffer mode, the like-for-like spread comparison.

Prints figures; asserts nothing.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from .. import benchspec, paths
from ..probe import discovery
from . import netpipe
from .benchrun import Benchmark, job_environment

FULL = ((1, 8388608),)      # NetPIPE's default range; netbench's default sweep


#: (label, system (None: this machine's), selection, target seconds)
SESSIONS = [("default run, this machine", None, (), 60),
            ("default run, 3-node virtual cluster", "vcluster", (), 180),
            ("-t seeds, 3-node virtual cluster", "vcluster", ("-t", "seeds"), 600)]
BENCH_CLUSTER = "bench"


def suite_wall_time(system=None, selection=()):
    """(seconds, exit code, ReFrame's summary line) of one session."""
    env = dict(os.environ, RFM_CONFIG_FILES=str(paths.CONFIG))
    reframe = os.path.join(os.path.dirname(sys.executable), "reframe")
    where = ["--system", system] if system else []
    start = time.monotonic()
    proc = subprocess.run([reframe, "-c", str(paths.CHECKS), *where, *selection, "-r"],
                          env=env, capture_output=True, text=True, cwd=paths.REPO)
    elapsed = time.monotonic() - start
    summary = re.findall(r"Ran \d+/\d+ test case.*", proc.stdout)
    return elapsed, proc.returncode, summary[-1] if summary else "no summary"


def print_session(label, target, elapsed, rc, summary):
    verdict = "meets" if elapsed < target else "MISSES"
    print(f"{label:38} {elapsed:6.0f} s wall ({verdict} target < {target} s), "
          f"exit {rc}: {summary}")


def session_wall_times():
    """The three sessions of SESSIONS; the cluster ones on a 3-node cluster
    brought up here (root only) and taken down after, even on failure."""
    from .. import vcluster
    cluster, created = None, False
    try:
        for label, system, selection, target in SESSIONS:
            if system == "vcluster":
                if os.geteuid() != 0:
                    print(f"{label:38} not measured: a virtual cluster needs root")
                    continue
                if cluster is None:
                    cluster, created = vcluster.up(BENCH_CLUSTER, nodes=3)
                system = cluster["system"]
            print_session(label, target, *suite_wall_time(system, selection))
    finally:
        if created:         # a cluster that was up before is left as it was
            vcluster.down(BENCH_CLUSTER)


def full_netpipe_mpi(binary, bench):
    """NetPIPE as a user runs it: defaults, perturbation included."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "np.out")
        start = time.monotonic()
        subprocess.run([*bench.launch_command(2), binary, "-o", out], check=True, cwd=tmp,
                       capture_output=True, env=job_environment(bench.mpi, bench.families))
        elapsed = time.monotonic() - start
        with open(out) as f:
            return netpipe.figures_from_points(netpipe.parse_netpipe(f.read()), elapsed)


def full_netbench(bench, mode, one_buffer=False):
    start = time.monotonic()
    summary = bench.measure(2, mode, *benchspec.option("one_buffer", one_buffer))["summary"]
    return netpipe.Figures(summary["latency_usec"], summary["peak_Mbps"],
                           time.monotonic() - start)


def row(tool, target, runs):
    med = netpipe.medians(runs)
    return (f"{tool:9} {target:15} {med.latency_us:10.3f} {med.peak_mbps:12.0f} "
            f"{med.seconds:9.2f} {100 * netpipe.spread(runs, 'latency_us'):9.1f} "
            f"{100 * netpipe.spread(runs, 'peak_mbps'):9.1f}")


def compare(label, run_np, run_nb, run_nb_one_buffer, repeats):
    """NetPIPE, netbench as the suite runs it, and netbench in NetPIPE's
    one-buffer mode, interleaved; the speed-up and spreads of the second."""
    np_runs, nb_runs, nb1_runs = [], [], []
    for _ in range(repeats):
        np_runs.append(run_np())
        nb_runs.append(run_nb())
        nb1_runs.append(run_nb_one_buffer())
    print(row("NetPIPE", label, np_runs))
    print(row("netbench", label, nb_runs))
    print(row("nb -1", label, nb1_runs))
    speedup = netpipe.medians(np_runs).seconds / netpipe.medians(nb_runs).seconds
    print(f"{'':9} {label:15} netbench sweep {speedup:.1f}x faster; spread "
          f"latency {100 * netpipe.spread(nb_runs, 'latency_us'):.1f}% vs "
          f"{100 * netpipe.spread(np_runs, 'latency_us'):.1f}%, peak "
          f"{100 * netpipe.spread(nb_runs, 'peak_mbps'):.1f}% vs "
          f"{100 * netpipe.spread(np_runs, 'peak_mbps'):.1f}%")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-suite", action="store_true")
    args = parser.parse_args(argv)

    if not args.skip_suite:
        session_wall_times()

    families = discovery.load_families()
    mpis = discovery.discover(families=families)
    print(f"\n{args.repeats} interleaved runs each; medians; spread = (max-min)/median")
    print(f"{'tool':9} {'MPI':15} {'lat (us)':>10} {'peak Mbit/s':>12} {'sweep (s)':>9} "
          f"{'lat sprd%':>9} {'bw sprd%':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        compared = 0
        for mpi in mpis:
            binary = netpipe.netpipe_for(mpi)
            if not binary:
                continue
            bench = Benchmark.build(mpi, families, tempfile.mkdtemp(dir=tmp))
            compare(mpi.name, lambda: full_netpipe_mpi(binary, bench),
                    lambda: full_netbench(bench, "pingpong"),
                    lambda: full_netbench(bench, "pingpong", one_buffer=True), args.repeats)
            compared += 1
        if shutil.which(netpipe.NETPIPE_TCP) and mpis:
            bench = Benchmark.build(mpis[0], families, tempfile.mkdtemp(dir=tmp))
            compare("tcp loopback", lambda: netpipe.netpipe_tcp(FULL),
                    lambda: netpipe.netbench_tcp(bench, FULL, one_buffer=False),
                    lambda: netpipe.netbench_tcp(bench, FULL), args.repeats)
            compared += 1
    if not compared:
        print("no NetPIPE found: apt-get install netpipe-mpich2 netpipe-openmpi netpipe-tcp "
              "mpich openmpi-bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())

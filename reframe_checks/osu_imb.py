"""The OSU Micro-Benchmarks (osu_latency, osu_bw, osu_bibw, osu_mbw_mr),
IMB-MPI1 (PingPong, Sendrecv, Exchange) and NetPIPE (NPmpi, seed 000's tool)
from each environment's Spack view (spack.yaml builds them against every
MPI build), over every transport the MPI offers.  Every message size is parsed into the curve the reports draw;
the documented references judge them like netbench's own checks.  Where a
view has no such binary (the PyPI wheels, a system MPI) the case is skipped
and says so.  Every case records the path its MPI library said it took and
fails when it is not the one asked for, as netbench's own ping-pong does
(netbench/checks/datapath.py: the same switches, parser and verdict)."""

import glob
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from netbench import checks
from netbench.results import osu_imb
from netbench.results.netpipe import NETPIPE_MPI, SMALL, parse_netpipe

checks.require_netbench_config()

#: which package of spack.yaml ships each binary
PACKAGES = {"osu": "osu-micro-benchmarks", "IMB-MPI1": "intel-mpi-benchmarks",
            "NPmpi": "netpipe"}
#: fewest sizes a complete sweep reports (OSU: 1 B to 4 MiB; IMB -msglog 0:22)
MIN_SIZES = 20


def find_binary(prefix, name):
    """`name` in an MPI prefix laid out as a Spack view: bin/, or OSU's
    libexec/osu-micro-benchmarks/mpi/<group>/; None where it is not."""
    if not prefix:
        return None
    candidates = [os.path.join(prefix, "bin", name)] + sorted(glob.glob(
        os.path.join(prefix, "libexec", "osu-micro-benchmarks", "mpi", "*", name)))
    return next((p for p in candidates if os.path.isfile(p) and os.access(p, os.X_OK)), None)


class ViewBinaryRun(checks.LibraryPath, checks.MpiRun):
    """A benchmark binary found in the environment's MPI prefix; its one
    launch's library says which path it took (LibraryPath)."""

    binary = ""
    package = ""

    def in_default_set(self, env):
        return False        # external benchmarks beside netbench's own: -t full or by tag

    @run_after("setup")
    def locate_binary(self):
        path, where = self.find_binary(self.current_environ)
        self.skip_if(not path, f"no {self.binary} in {where}: build {self.package} "
                               f"against this MPI (spack.yaml)")
        self.binary = self.binary_name(self.current_environ)
        self.executable = path

    def environment_problem(self, env):
        if not self.find_binary(env)[0]:
            return (f"no {self.package} binaries for the MPI; build {self.package} "
                    f"against it in spack.yaml", env.name)
        return super().environment_problem(env)

    def binary_name(self, env):
        return self.binary

    def find_binary(self, env):
        """(path or None, where it was looked for) of the binary for `env`."""
        prefix = env.extras.get("mpi_prefix", "")
        return find_binary(prefix, self.binary_name(env)), prefix or "this MPI (no prefix)"

    def output_text(self):
        with open(os.path.join(self.stagedir, str(self.job.stdout)), errors="replace") as f:
            return f.read()

    def launched_paths(self):
        """The path the library of the case's one launch said it took: its
        words are in the job's stdout, beside the benchmark's own output
        (mpi_families.yaml `provenance.switches` are in every environment);
        none where the benchmark measured nothing (a dry run, a launch that
        never started)."""
        if not any(s["rows"] for s in self.measured_series()):
            return []
        return [self.path_said(self.read_stage_file(self.job.stdout))]

    @sn.deferrable
    def assert_full_sweep(self):
        sizes = len(self.measured_rows())
        if sizes < MIN_SIZES:
            raise sn.SanityError(f"{self.binary} reported {sizes} message sizes, "
                                 f"fewer than {MIN_SIZES}")
        return True

    @sanity_function
    def validate_run(self):
        # the library's own word on its path before the link counters', as
        # netbench's own runs (NetbenchRun.validate_run)
        return sn.all([self.assert_ranks_finished(), self.assert_full_sweep(),
                       self.assert_path_as_asked(),
                       self.assert_traffic_crossed_links(self.expected_hosts()),
                       self.assert_judged()])

    def figure(self, column, pick):
        return sn.defer(pick(r[column] for r in self.measured_rows() if r["bytes"] > 0))


@rfm.simple_test
class OsuPt2Pt(ViewBinaryRun):
    descr = "OSU point-to-point latency and bandwidth sweeps"
    benchmark = parameter(["osu_latency", "osu_bw", "osu_bibw", "osu_mbw_mr"])
    transport = parameter(checks.configured_transports())
    placement = parameter(checks.configured_placements())
    package = PACKAGES["osu"]
    category = "external_pingpong"
    tags = {"osu", "external"}

    @run_after("init")
    def set_binary(self):
        self.binary = self.benchmark

    def measured_series(self):
        try:
            rows = osu_imb.parse_osu(self.output_text())[1]
        except (OSError, osu_imb.ParseError):
            rows = []
        return [osu_imb.series("mpi", rows)]

    @run_before("performance")
    def set_perf_variables(self):
        if self.benchmark == "osu_latency":
            self.perf_variables = {
                "latency": sn.make_performance_function(self.figure("usec", min), "us")}
        else:
            self.perf_variables = {
                "peak_bw": sn.make_performance_function(self.figure("Mbps", max), "Mbit/s")}


@rfm.simple_test
class ImbMpi1(ViewBinaryRun):
    descr = "IMB-MPI1 PingPong, Sendrecv and Exchange sweeps"
    benchmark = parameter(["PingPong", "Sendrecv", "Exchange"])
    transport = parameter(checks.configured_transports())
    placement = parameter(checks.configured_placements())
    binary = "IMB-MPI1"
    package = PACKAGES["IMB-MPI1"]
    ranks = variable(int, value=2)
    #: PingPong is judged and drawn with the ping-pong curves, Sendrecv and
    #: Exchange with the throughput chains (declared_category)
    category = "external_pingpong"
    tags = {"imb", "external"}

    def declared_category(self):
        return self.category if self.benchmark == "PingPong" else "external_throughput"

    @run_after("init")
    def set_ranks(self):
        self.num_ranks = self.ranks

    def scaling_group(self):
        # IMB's chains on lines of their own, beside netbench's
        group = super().scaling_group()
        return f"{self.binary} {group}" if group else ""

    @run_before("run")
    def set_options(self):
        # one process count (the job's), every size from 1 B to 4 MiB
        self.executable_opts = [self.benchmark, "-msglog", "0:22", "-npmin",
                                str(self.num_tasks)]

    def measured_series(self):
        try:
            results = osu_imb.parse_imb(self.output_text())
        except (OSError, osu_imb.ParseError):
            results = {}
        return [osu_imb.series("mpi", results.get((self.benchmark, self.num_tasks), []))]

    @run_before("performance")
    def set_perf_variables(self):
        small = sn.defer(next((r["usec"] for r in self.measured_rows() if r["bytes"] > 0),
                              0.0))
        if self.benchmark == "PingPong":
            self.perf_variables = {
                "latency": sn.make_performance_function(small, "us"),
                "peak_bw": sn.make_performance_function(self.figure("Mbps", max), "Mbit/s")}
        else:
            self.perf_variables = {
                "latency": sn.make_performance_function(small, "us"),
                "peak_throughput": sn.make_performance_function(self.figure("MBps", max),
                                                                "MB/s")}


@rfm.simple_test
class NetpipeMpi(ViewBinaryRun):
    descr = "NetPIPE NPmpi sweep (seed 000's tool)"
    transport = parameter(checks.configured_transports())
    placement = parameter(checks.configured_placements())
    #: largest message of the sweep (NetPIPE's own default, 8 MiB, takes a minute)
    max_bytes = variable(int, value=1048576)
    #: NetPIPE's +/- perturbation of each size (its default, 3, triples the
    #: points and the time; seed 000's curves used it)
    perturbation = variable(int, value=0)
    binary = "NPmpi"
    package = PACKAGES["NPmpi"]
    category = "external_pingpong"
    tags = {"netpipe", "external"}
    output_file = "np.out"

    def binary_name(self, env):
        # Debian's NetPIPE names its binary after the MPI it was built with
        if env.extras.get("mpi_prefix"):
            return self.binary
        return NETPIPE_MPI.get(env.extras.get("mpi_family", ""), self.binary)

    def find_binary(self, env):
        """NPmpi in a view; for a system MPI, Debian's NetPIPE built against
        it, beside its launcher (netpipe-mpich2, netpipe-openmpi)."""
        if env.extras.get("mpi_prefix"):
            return super().find_binary(env)
        where = os.path.dirname(env.extras.get("mpi_launcher", "")) or "this MPI"
        path = os.path.join(where, self.binary_name(env))
        return (path if os.access(path, os.X_OK) else None), where

    @run_before("run")
    def set_options(self):
        self.executable_opts = ["-u", str(self.max_bytes), "-p", str(self.perturbation),
                                "-o", self.output_file]

    def measured_series(self):
        points = parse_netpipe(self.read_stage_file(self.output_file))
        # NetPIPE reports one-way time: the curve's usec, its rate from that
        return [osu_imb.series("mpi", [osu_imb.curve_row(nbytes, usec=seconds * 1e6)
                                       for nbytes, _, seconds in points])]

    @run_before("performance")
    def set_perf_variables(self):
        small = sn.defer(min((r["usec"] for r in self.measured_rows()
                              if 0 < r["bytes"] < SMALL), default=0.0))
        self.perf_variables = {
            "latency": sn.make_performance_function(small, "us"),
            "peak_bw": sn.make_performance_function(self.figure("Mbps", max), "Mbit/s")}

"""Runs of netbench's own benchmark (reframe_checks/src/netbench.c): its
build fixture, the run of one mode, and the ping-pong and throughput
checks' figures."""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, performance_function, run_after, run_before,
                                   sanity_function, variable)

from .. import benchspec, paths
from ..results import benchmark
from ..textsafe import printable
from .base import KiB, MiB, RAW_TCP
from .mpirun import MpiRun


class NetbenchBuild(rfm.CompileOnlyRegressionTest):
    """Compile reframe_checks/src/netbench.c with the environment's mpicc,
    by the recipe of netbench/data/benchmark.yaml (benchspec)."""

    descr = "build the netbench benchmark"
    valid_systems = ["*"]
    valid_prog_environs = ["+mpi"]
    sourcesdir = str(paths.SOURCES)
    build_system = "SingleSource"
    sourcepath = benchspec.recipe()["source"]
    executable = benchspec.recipe()["executable"]
    build_locally = True

    @run_before("compile")
    def flags_of_the_recipe(self):
        # the build system's own flags take precedence over the
        # environment's (ReFrame's flags_from_environ applies to empty ones)
        self.build_system.cflags = list(benchspec.recipe()["cflags"])
        self.build_system.ldflags = list(benchspec.recipe()["ldflags"])

    @sanity_function
    def binary_built(self):
        return sn.assert_true(os.path.exists(os.path.join(self.stagedir, self.executable)),
                              msg="netbench binary was not produced")


class NetbenchRun(MpiRun):
    """Run one mode of netbench's own benchmark (reframe_checks/src/netbench.c).

    Subclasses set `bench_mode` besides MpiRun's attributes."""

    netbench = fixture(NetbenchBuild, scope="environment")
    #: largest message of the sweep
    max_bytes = variable(int, value=8 * MiB)
    #: seconds spent per message size at most (adaptive repetitions)
    budget = variable(float, value=0.05)
    #: target relative error of each size's median
    precision = variable(float, value=0.01)
    #: the mode checks received data (-V); TCP streams do not
    verifies = True
    bench_mode = "pingpong"
    #: the columns of the benchmark's table the report draws
    drawn_columns = ("usec", "Mbps", "MBps")

    @run_after("setup")
    def largest_message_crosses_links(self):
        # every node's link carries at least one largest message
        self.min_link_bytes = self.max_bytes

    @run_before("sanity")
    def find_stacked_ranks(self):
        self.stacked_ranks = benchmark.stacked_ranks(self.read_stage_file(self.job.stdout))

    def measured_series(self):
        name = "tcp" if self.transport == RAW_TCP else "mpi"
        return [benchmark.series(name, self.read_stage_file(self.job.stdout),
                                 self.drawn_columns)]

    @run_before("run")
    def set_command(self):
        self.executable = os.path.join(self.netbench.stagedir, self.netbench.executable)
        self.executable_opts = self.sweep_options(self.bench_mode, verify=self.verifies)

    def sweep_options(self, mode, **more):
        """The benchmark's arguments for a sweep in `mode` with the case's
        largest message, budget and precision, then `more` options."""
        return benchspec.command_line(mode, max_bytes=self.max_bytes, budget=self.budget,
                                      precision=self.precision, **more)

    @sanity_function
    def validate_run(self):
        hosts = sn.extractall(r"^# rank \d+ host (\S+) cpu", self.stdout, 1)
        verified = [] if not self.verifies else [
            sn.assert_eq(self.summary("verify_errors", int), 0,
                         msg="received data did not match what was sent")]
        return sn.all([self.assert_ranks_finished()] + verified + [
            self.assert_ranks_not_stacked(),
            self.assert_traffic_crossed_links(hosts),
            sn.assert_found(r"^@ sweep_seconds", self.stdout,
                            msg="the benchmark did not finish its sweep"),
            sn.assert_eq(sn.count(hosts), self.num_tasks, msg="not every rank reported"),
            sn.assert_eq(sn.len(sn.defer(set(hosts.evaluate()))), self.expected_hosts(),
                         msg="ranks ran on the wrong number of hosts"),
            self.assert_judged(),
        ])

    def assert_ranks_not_stacked(self):
        # runs with more ranks than CPUs per node are skipped before they
        # start (skip_if_oversubscribed), so a shared pin is the launcher's
        stacked = self.stacked_ranks
        # host names as the ranks reported them: escaped (textsafe)
        return sn.assert_false(stacked, msg=printable(
            f"ranks pinned to one CPU each ({', '.join(stacked)}): they take turns, so the "
            f"run measured the scheduler; check the launcher's binding flags"))

    def output_file(self):
        return str(self.job.stdout)

    def summary(self, key, conv=float, output=None):
        """A `@ key value` line of the benchmark's output (the job's stdout,
        or `output` in the stage folder)."""
        return table_summary(self, output or self.output_file(), key, conv)

    def column_at(self, nbytes, column, output=None):
        """A column of the table at one message size (ping-pong columns:
        bytes usec usec_min usec_max mad_pct MBps Mbps samples reps)."""
        return table_value(self, output or self.output_file(), nbytes, column)


@sn.deferrable
def table_summary(test, name, key, conv=float):
    """The summary figure `key` of the benchmark's output `name` in the
    test's stage folder; a SanityError naming what is missing, not a
    ValueError on whatever a dying run left there."""
    _, summary = benchmark.parse_output(test.read_stage_file(name))
    try:
        return conv(benchmark.summary_figure(summary, key, name))
    except benchmark.MissingFigure as err:
        raise sn.SanityError(str(err)) from err


@sn.deferrable
def table_value(test, name, nbytes, column):
    """One figure of the benchmark's table in `name` (stage folder), read by
    the column's name in the `# columns:` header; a SanityError when the
    table has no such row."""
    rows, _ = benchmark.parse_output(test.read_stage_file(name))
    try:
        return benchmark.table_figure(rows, nbytes, column, name)
    except benchmark.MissingFigure as err:
        raise sn.SanityError(str(err)) from err


#: judged ping-pong figures a sweep re-measures before it fails:
#: variable -> (the benchmark's summary key, which bound it can miss)
REMEASURED = {"latency": ("latency_usec", "upper"), "peak_bw": ("peak_Mbps", "lower")}


def out_of_bounds_test(bounds):
    """An awk program that exits 0 when a `@ key value` line of the
    benchmark's output is outside its bound: bounds {key: (side, value)}."""
    tests = [f'($2 == "{key}" && $3 {">" if side == "upper" else "<"} {value!r})'
             for key, (side, value) in sorted(bounds.items())]
    return "$1 == \"@\" && (" + " || ".join(tests) + ") {bad = 1} END {exit !bad}"


class PingPongBase(NetbenchRun):
    """MPI ping-pong sweep between two ranks (seed 000's NetPIPE runs,
    seed 004's blocking and non-blocking point-to-point).

    Repeat before alarm: when the sweep's latency or peak bandwidth is
    outside its documented bounds, the job sweeps once more (REMEASURED)
    and the case is judged by the better of the two, as NetPIPE keeps the
    best of its repetitions; the record keeps both figures, so the report
    shows the re-measurement.  A busy 2-core host delays single sweeps by
    tens of percent now and then; a path that is slow stays slow."""

    kind = "pingpong"
    bench_mode = "pingpong"
    section = "pingpong"
    remeasure_output = "remeasure.out"

    def remeasure_bounds(self):
        """{summary key: (side, bound)} of the judged figures."""
        bounds = {}
        for var, ((ref, lower, upper, _), _) in self.judged_references().items():
            if var not in REMEASURED or not ref:
                continue
            key, side = REMEASURED[var]
            fraction = upper if side == "upper" else lower
            if fraction is not None:
                bounds[key] = (side, ref * (1 + fraction))
        return bounds

    @run_before("run")
    def remeasure_out_of_bounds(self):
        """After set_command: the same launcher runs the same sweep again,
        only when a judged figure of the first is out of bounds."""
        bounds = self.remeasure_bounds()
        if not bounds:
            return
        # ReFrame copies the task counts into the job only after this hook
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        launch = self.job.launcher.run_command(self.job)
        command = f"{launch} {self.executable} {' '.join(self.executable_opts)}"
        self.postrun_cmds.append(
            f"if awk '{out_of_bounds_test(bounds)}' {self.job.stdout}; then "
            f"echo 'netbench: a judged figure is out of bounds: sweeping again' >&2; "
            f"{command} > {self.remeasure_output}; fi")

    def best_summary(self, key, pick):
        """The better of the sweep's and the re-measurement's figure."""
        first = self.summary(key)
        if not self.read_stage_file(self.remeasure_output):
            return first
        return sn.defer(pick(first.evaluate(), self.summary(key, output=self.remeasure_output)
                             .evaluate()))

    @run_before("performance")
    def record_remeasurement(self):
        if not self.read_stage_file(self.remeasure_output):
            return
        self.record = {**self.record, "remeasured": {
            var: [float(self.summary(key).evaluate()),
                  float(self.summary(key, output=self.remeasure_output).evaluate())]
            for var, (key, _) in REMEASURED.items()}}

    @performance_function("us")
    def latency(self):
        return self.best_summary("latency_usec", min)

    @performance_function("Mbit/s")
    def peak_bw(self):
        return self.best_summary("peak_Mbps", max)

    @performance_function("Mbit/s")
    def bw_64KiB(self):
        return self.column_at(64 * KiB, "Mbps")

    @performance_function("Mbit/s")
    def bw_1MiB(self):
        return self.column_at(1 * MiB, "Mbps")

    @performance_function("Mbit/s")
    def bw_8MiB(self):
        return self.column_at(8 * MiB, "Mbps")

    @performance_function("B")
    def nhalf(self):
        return self.summary("nhalf_bytes")


class ThroughputBase(NetbenchRun):
    """PMB-style periodic chain (seed 002) or broadcast (seed 004):
    throughput per process in MB/s (Sendrecv counts 2X bytes per call,
    Exchange 4X, as PMB does)."""

    kind = "collective"
    section = "throughput"

    @performance_function("MB/s")
    def peak_throughput(self):
        return self.summary("peak_MBps")

    @performance_function("MB/s")
    def throughput_1MiB(self):
        return self.column_at(1 * MiB, "MBps")

    @performance_function("us")
    def latency(self):
        return self.summary("latency_usec")

"""Runs of netbench's own benchmark (reframe_checks/src/netbench.c): its
build fixture, the run of one mode, and the ping-pong and throughput
checks' figures."""

import json
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, performance_function, run_after, run_before,
                                   sanity_function, variable)

from .. import benchspec, paths
from ..judgement import baseline, conditions, remeasure
from ..judgement.model import Reference, after_the_job, judge
from ..judgement.conditions import cpu_bound
from ..results import benchmark
from ..textsafe import printable
from .base import KiB, MiB, RAW_TCP
from .datapath import LibraryPath
from .launches import Launches, launch_figure, launch_summary, launch_value
from .mpirun import MpiRun
from .slurm import job_failure


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




class NetbenchRun(Launches, LibraryPath, MpiRun):
    """Run one mode of netbench's own benchmark (reframe_checks/src/netbench.c).

    The mode it runs (`bench_mode`) follows from the check's category."""

    netbench = fixture(NetbenchBuild, scope="environment")
    #: largest message of the sweep
    max_bytes = variable(int, value=8 * MiB)
    #: seconds spent per message size at most (adaptive repetitions)
    budget = variable(float, value=0.05)
    #: target relative error of each size's median
    precision = variable(float, value=0.01)
    #: the mode checks received data (-V); TCP streams do not
    verifies = True
    #: the columns of the benchmark's table the report draws
    drawn_columns = ("usec", "Mbps", "MBps")

    @run_after("setup")
    def largest_message_crosses_links(self):
        # every node's link carries at least one largest message
        self.min_link_bytes = self.max_bytes

    @run_before("sanity")
    def find_stacked_ranks(self):
        self.stacked_ranks = benchmark.stacked_placements(self.first_launch()["placements"])

    def measured_series(self):
        return [self.series_of(self.main_run())]

    def series_of(self, run):
        """The record's series of run `run`: its first launch's table."""
        return benchmark.rows_series(run, self.first_launch(run)["rows"], self.drawn_columns)

    def measured_runs(self):
        """Every launch of every run, for the record; a launch that never
        started and was launched again carries its launcher's failure
        (restarted_rounds)."""
        runs = {name: list(self.launches(name)) for name in self.first_outputs()}
        for k, why in self.restarted_rounds().items():
            for name in self.launch_commands():
                if len(runs[name]) > k and not runs[name][k].get("failure"):
                    runs[name][k] = {**runs[name][k], "failure": why}
        return runs

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
        hosts = [p["host"] for p in self.first_launch()["placements"].values()]
        verified = [] if not self.verifies else [
            sn.assert_eq(self.summary("verify_errors", int), 0,
                         msg="received data did not match what was sent")]
        # the library's own word on its path before the link counters':
        # it names the path the bytes took, not only that they missed a link
        return sn.all([self.assert_ranks_finished()] + verified + [
            self.assert_path_as_asked(),
            self.assert_ranks_not_stacked(),
            self.assert_traffic_crossed_links(hosts),
            sn.assert_true("sweep_seconds" in self.first_launch()["summary"],
                           msg="the benchmark did not finish its sweep"),
            sn.assert_eq(len(hosts), self.num_tasks, msg="not every rank reported"),
            sn.assert_eq(len(set(hosts)), self.expected_hosts(),
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

    # ---- the launches' outputs, each parsed once (results.benchmark.parse_run) ----

    def main_run(self):
        """The name of the case's own run: its series and figures."""
        return "tcp" if self.transport == RAW_TCP else "mpi"

    def first_outputs(self):
        """{run name: the stage file of its first launch}: the job's stdout
        for the case's own run; checks that launch more add theirs."""
        return {self.main_run(): str(self.job.stdout)}

    def summary(self, key, conv=float, run=None):
        """A `@ key value` figure of the first launch of `run`."""
        return launch_summary(self, run or self.main_run(), key, conv)

    def column_at(self, nbytes, column, run=None):
        """A column of the first launch's table at one message size
        (ping-pong columns: bytes usec usec_min usec_max mad_pct MBps Mbps
        samples reps usec_lo usec_hi)."""
        return launch_value(self, run or self.main_run(), nbytes, column)

    # ---- judged figures: launched again while undecided (netbench.judgement) ----

    #: {performance variable: (run, figure spec of netbench.judgement.figures)}
    figure_specs = {}
    #: the job's description of what it judges, for netbench.judgement.remeasure
    judging_file = "judging.json"

    def launch_commands(self):
        """{run name: the command line of one launch of it}."""
        return {self.main_run(): f"{self.launch_prefix()} {self.executable} "
                                 f"{' '.join(self.executable_opts)}"}

    def judged_bounds(self):
        """{variable: Bound} of the judged figures: the documented ones
        that have a spec, and every size of the partition's learned
        baseline for this case (`usec@<bytes>`)."""
        bounds = {}
        for var, ((ref, lower, upper, unit), _) in self.judged_references().items():
            bound = remeasure.bound_of(ref, lower, upper, unit)
            if var in self.figure_specs and bound is not None:
                bounds[var] = bound
        for nbytes, bound in self.baseline_bounds().items():
            bounds[baseline.variable(nbytes)] = bound
        return bounds

    def figure_spec(self, var):
        """(run, figure spec) of a judged variable."""
        if var in self.figure_specs:
            return self.figure_specs[var]
        nbytes = float(var.split("@", 1)[1])
        return self.main_run(), baseline.figure_spec(nbytes)

    @run_before("run")
    def launch_again_while_undecided(self):
        """The job launches a run again while a judged figure of it is
        neither shown within its reference nor beyond it in every launch
        (netbench.judgement.model), up to the knobs' budget, and once more
        a launch that failed to start (judging.yaml replicates.restarts),
        with or without a judged figure.  Every launch prints its nodes'
        conditions (the benchmark does).  Checks that launch their own
        rounds (the sweep's passes, container parity) have no
        launch_commands."""
        commands = self.launch_commands()
        figures = {var: self.figure_description(var, bound)
                   for var, bound in self.judged_bounds().items()} if commands else {}
        knobs = self.judging_knobs()
        description = {"runs": {name: self.first_outputs()[name] for name in commands},
                       "figures": figures, "knobs": knobs.to_json()}
        with open(os.path.join(self.stagedir, self.judging_file), "w") as f:
            json.dump(description, f, indent=1)
        # without a judged figure, only a launch that never started is
        # launched again
        launches = knobs.launches if figures else 1 + knobs.restarts
        if commands and launches > 1:
            self.prerun_cmds.insert(0, remeasure.START_LINE)
            self.postrun_cmds += remeasure.job_lines(commands, self.judging_file, launches,
                                                     self.time_limit, knobs.time_share)

    #: {round of launches (1 the first): how its launcher failed} of the
    #: rounds that never started and were launched again (restarted_rounds)
    restarted = variable(dict, value={})

    def restarted_rounds(self):
        """{round of launches (0 the first): how its launcher failed} of the
        rounds that never started and were launched again: a launcher that
        failed before the benchmark printed anything (Open MPI's ranks
        crashing in MPI_Init under srun) was restarted (judging.yaml
        replicates.restarts), and that failure is not the job's outcome.
        Read once; kept in `restarted` and in the record's launches."""
        found = self.__dict__.get("_restarted_rounds")
        if found is None:
            runs = self.launch_commands()
            passed_over = remeasure.rounds_never_started(
                {run: [benchmark.started(launch) for launch in self.launches(run)]
                 for run in runs})
            found = self._restarted_rounds = {
                k: job_failure(*self.round_outputs([k])) or "the benchmark printed nothing"
                for k in passed_over}
            self.restarted = {str(k + 1): why for k, why in found.items()}
        return found

    def round_outputs(self, rounds):
        """(stdout, stderr) of the given rounds of launches: each run's
        output file of those rounds, and the job's stderr of them
        (remeasure.stderr_rounds)."""
        files = [f for run in self.launch_commands()
                 for k, f in enumerate(self.run_files(run)) if k in rounds]
        stderr = self.__dict__.get("_stderr_rounds")
        if stderr is None:          # read once: every round's outputs come from it
            stderr = self._stderr_rounds = remeasure.stderr_rounds(
                self.read_stage_file(self.job.stderr))
        return ("\n".join(self.read_stage_file(f) for f in files),
                "".join(stderr[k] for k in rounds if k < len(stderr)))

    def outcome_texts(self):
        """The job's outputs without the rounds of launches that never
        started and were launched again (restarted_rounds): every other
        round's outputs instead."""
        passed_over = self.restarted_rounds()
        if not passed_over:
            return super().outcome_texts()
        launched = [self.run_files(run) for run in self.launch_commands()]
        stdout, stderr = self.round_outputs(
            [k for k in range(max(map(len, launched))) if k not in passed_over])
        others = [f for f in self.outcome_outputs() if not any(f in files for files in launched)]
        return "\n".join([stdout, *map(self.read_stage_file, others)]), stderr

    @run_before("run", always_last=True)
    def print_the_host_load_last(self):
        """The host's load and CPU pressure, printed after every command of
        the job (a check's own later passes too, as the sweep's): a
        benchmark that prints no conditions of its own is judged by them."""
        self.postrun_cmds += remeasure.HOST_LOAD_LINES

    def judged_value(self, var):
        """The figure the case reports for `var`: the one its decision
        rests on (set_references), else its first launch's."""
        decision = self.decisions.get(var)
        if decision is not None and decision.launches:
            return sn.defer(decision.value)
        run, spec = self.figure_specs[var]
        return launch_figure(self, run, spec)

    def host_load(self):
        """What the record says of the host: the job's load after its
        launches, the highest CPU pressure any node read after any launch
        and the slowest core round trip (a launch's faster reading).  The
        verdicts compare each launch's own conditions (judgement.conditions)."""
        launches = self.launches()
        seen = [conditions.of_launch(launch) for launch in launches]
        pressures = [p for c in seen for p in conditions.node_readings(c).values()]
        trips = [c["core_round_trip_ns"] for c in seen if c["core_round_trip_ns"]]
        host = {"host_load": launches[0].get("host_load") if launches else None,
                "cpu_pressure": max(pressures) if pressures else None,
                "core_round_trip_ns": max(trips) if trips else None}
        return {k: v for k, v in host.items() if v is not None}

    def figure_description(self, var, bound):
        """What the job's re-measurement needs of a judged figure."""
        run, spec = self.figure_spec(var)
        reference = self.reference_of(var, bound)
        return {"run": run, "spec": spec, "bound": bound.to_json(), "kind": reference.kind,
                "conditions": reference.conditions}

    def reference_of(self, var, bound):
        """The Reference a judged variable is held to: a documented
        threshold (measured on a quiet host), or a size of the learned
        baseline with the conditions its accepted runs ran under."""
        if "@" not in var:
            return Reference(bound, "threshold")
        case = self.baseline_case() or {}
        return Reference(bound, "baseline", {k: case.get(k) for k in
                                             ("cpu_pressure", "core_round_trip_ns")})

    def decide_figures(self):
        """{variable: Decision} of the judged figures, from every launch."""
        decisions = {}
        knobs = self.judging_knobs()
        for var, bound in self.judged_bounds().items():
            run, spec = self.figure_spec(var)
            launches = self.launches(run)
            if not any(launch["rows"] for launch in launches):
                continue        # nothing measured (a dry run): nothing to decide
            decisions[var] = after_the_job(judge(remeasure.replicates(launches, spec),
                                                 self.reference_of(var, bound), knobs,
                                                 self.cpu_bound(var)))
        return decisions

    def cpu_bound(self, var):
        """Whether the host's CPUs bound the figure (conditions.cpu_bound)."""
        nbytes = float(var.split("@", 1)[1]) if "@" in var else None
        return cpu_bound(getattr(self, "placement", ""), self.link_is_emulated(), nbytes,
                         var.endswith("latency"))


class PingPongBase(NetbenchRun):
    """MPI ping-pong sweep between two ranks (seed 000's NetPIPE runs,
    seed 004's blocking and non-blocking point-to-point).

    Latency and peak bandwidth are judged launch by launch
    (netbench.judgement): while neither clearly within nor clearly beyond
    their bounds, the job sweeps again, up to the rule's budget; every
    launch is in the record."""

    category = "pingpong"
    figure_specs = {"latency": ("mpi", {"figure": "latency"}),
                    "peak_bw": ("mpi", {"figure": "peak", "column": "Mbps"})}

    @run_after("init")
    def figures_of_the_main_run(self):
        # raw TCP checks measure run "tcp"
        if self.transport == RAW_TCP:
            self.figure_specs = {var: ("tcp", spec)
                                 for var, (_, spec) in type(self).figure_specs.items()}

    @performance_function("us")
    def latency(self):
        return self.judged_value("latency")

    @performance_function("Mbit/s")
    def peak_bw(self):
        return self.judged_value("peak_bw")

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

    category = "throughput"

    @performance_function("MB/s")
    def peak_throughput(self):
        return self.summary("peak_MBps")

    @performance_function("MB/s")
    def throughput_1MiB(self):
        return self.column_at(1 * MiB, "MBps")

    @performance_function("us")
    def latency(self):
        return self.summary("latency_usec")

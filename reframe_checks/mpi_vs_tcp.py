"""MPI against raw TCP on the same message sizes, side by side in one job
(seed 000, Figures 2 and 4: the loss MPI adds over the TCP it runs on)."""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_before, sanity_function

from netbench import benchspec, checks
from netbench.results import benchmark

checks.require_netbench_config()


@rfm.simple_test
class MpiVsTcp(checks.PingPongBase):
    descr = "MPI ping-pong and raw TCP ping-pong, side by side"
    transport = parameter(checks.configured_transports())
    placement = parameter(checks.configured_placements())
    tags = {"tcp"}

    def in_default_set(self, env):
        return False        # raw TCP once per run is TcpSocketBuffer's; this runs it per MPI
    section = "mpi_vs_tcp"
    tcp_output = "tcp.out"

    @run_before("run")
    def add_tcp_run(self):
        # the same launcher runs netbench's TCP mode right after the MPI
        # sweep; -P busy-polls the socket as the MPI progress engines do, so
        # the comparison is not dominated by scheduler wake-ups
        # ReFrame copies the task counts into the job only after this hook;
        # the launcher needs them now to build the second command
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        launch = self.job.launcher.run_command(self.job)
        tcp_opts = benchspec.command_line("tcp", busy_poll=True, max_bytes=self.max_bytes,
                                          budget=self.budget, precision=self.precision,
                                          verify=True)
        # first of the post-run commands: the link counters' snapshot (see
        # NetbenchRun.count_link_traffic) must include this run
        self.postrun_cmds.insert(0, f"{launch} {self.executable} {' '.join(tcp_opts)} "
                                    f"> {self.tcp_output}")

    def judged_by(self):
        # the MPI figures are PingPong's to judge: this check holds its raw
        # TCP run to the documented TCP rows
        return "tcp", checks.RAW_TCP

    def judged_references(self):
        unjudged = self.unjudged_figures()
        return {f"tcp_{var}": (t.reference, t) for var, t in self.thresholds().items()
                if f"tcp_{var}" not in unjudged}

    def measured_series(self):
        # the MPI sweep, then the raw TCP sweep beside it (the report's
        # overhead curve compares the two)
        tcp = benchmark.series("tcp", self.read_stage_file(self.tcp_output),
                               self.drawn_columns)
        return super().measured_series() + [tcp]

    @sanity_function
    def validate_both_runs(self):
        tcp_file = os.path.join(self.stagedir, self.tcp_output)
        return sn.all([
            # either run's launcher may report a dead rank (the TCP run's
            # stdout is tcp.out): that is the cause, before any symptom
            self.assert_ranks_finished(self.tcp_output),
            self.validate_run(),
            sn.assert_found(r"^@ sweep_seconds", tcp_file,
                            msg="the TCP run did not finish its sweep"),
            sn.assert_eq(self.summary("verify_errors", int, output=self.tcp_output), 0,
                         msg="TCP: received data did not match what was sent"),
        ])

    def tcp_summary(self, key):
        return self.summary(key, output=self.tcp_output)

    @performance_function("us")
    def tcp_latency(self):
        return self.tcp_summary("latency_usec")

    @performance_function("Mbit/s")
    def tcp_peak_bw(self):
        return self.tcp_summary("peak_Mbps")

    @performance_function("%")
    def overhead(self):
        """MPI's bandwidth loss against raw TCP at the largest size, in %
        (negative: MPI is faster, as shared memory is)."""
        size = self.max_bytes
        tcp = self.column_at(size, "Mbps", output=self.tcp_output)
        return 100.0 * (1.0 - self.column_at(size, "Mbps") / tcp)

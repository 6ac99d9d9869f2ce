"""MPI against the layers below it on the same message sizes, side by side
in one job on the same pair: raw TCP (seed 000, Figures 2 and 4: the loss
MPI adds over the TCP it runs on) and, where the ranks' nodes have an RDMA
device and perftest, the verbs (issue #34; netbench.probe.verbspair).  The
record keeps each layer's figures and where the loss is
(netbench/checks/layers.py, netbench/judgement/layers.py)."""

import shlex
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, performance_function, run_before, sanity_function

from netbench import benchspec, checks
from netbench.checks import layers

checks.require_netbench_config()


@rfm.simple_test
class MpiVsTcp(checks.PingPongBase):
    descr = "MPI ping-pong and raw TCP ping-pong, side by side"
    transport = parameter(checks.configured_transports())
    placement = parameter(checks.configured_placements())
    tags = {"tcp"}

    def in_default_set(self, env):
        return False        # raw TCP once per run is TcpSocketBuffer's; this runs it per MPI
    category = "mpi_vs_tcp"
    tcp_output = "tcp.out"
    #: perftest's ib_write_bw through the node's RDMA device, where one is found
    verbs_output = "verbs_bw.out"

    def tcp_command(self):
        # -P busy-polls the socket as the MPI progress engines do, so the
        # comparison is not dominated by scheduler wake-ups
        tcp_opts = benchspec.command_line("tcp", busy_poll=True, max_bytes=self.max_bytes,
                                          budget=self.budget, precision=self.precision,
                                          verify=True)
        return f"{self.launch_prefix()} {self.executable} {' '.join(tcp_opts)}"

    def first_outputs(self):
        return {**super().first_outputs(), "tcp": self.tcp_output}

    def outcome_outputs(self):
        # either run's launcher may report a dead rank (the TCP run's stdout
        # is tcp.out): that is the cause, before any symptom
        return (self.tcp_output,)

    def launch_commands(self):
        return {**super().launch_commands(), "tcp": self.tcp_command()}

    @run_before("run")
    def add_tcp_run(self):
        # the same launcher runs netbench's TCP mode right after the MPI
        # sweep; first of the post-run commands: the link counters'
        # snapshot (see NetbenchRun.count_link_traffic) must include it
        self.postrun_cmds.insert(0, f"{self.tcp_command()} > {self.tcp_output}")
        # the verbs layer beside them, after the TCP run, on the same ranks'
        # nodes: each reads its own RDMA device and perftest, and why it did
        # not run is the record's (`layers.not_run`), naming the node
        self.postrun_cmds.insert(1, layers.verbs_launch(
            self.launch_prefix(), shlex.quote(sys.executable), self.verbs_output))

    def judged_by(self):
        # the MPI figures are PingPong's to judge: this check holds its raw
        # TCP run to the documented TCP rows
        return "tcp", checks.RAW_TCP

    figure_specs = {**checks.PingPongBase.figure_specs,
                    "tcp_latency": ("tcp", {"figure": "latency"}),
                    "tcp_peak_bw": ("tcp", {"figure": "peak", "column": "Mbps"})}

    def judged_references(self):
        unjudged = self.unjudged_figures()
        return {f"tcp_{var}": (t.reference, t) for var, t in self.thresholds().items()
                if f"tcp_{var}" not in unjudged}

    def measured_series(self):
        # the MPI sweep, then the raw TCP sweep beside it (the report's
        # overhead curve compares the two)
        return super().measured_series() + [self.series_of("tcp")]

    def measured_layers(self):
        """Each layer's figures from the runs parsed once (the MPI's and
        raw TCP's launches; perftest's table), and where the loss is."""
        curves = {"mpi": self.first_launch(self.main_run())["rows"],
                  "tcp": self.first_launch("tcp")["rows"]}
        not_run = {}
        rows, why = layers.verbs_outcome(self.read_stage_file(self.verbs_output),
                                         self.verbs_output)
        if rows:
            curves["verbs"] = rows
        else:
            not_run["verbs"] = why
        transport_env = self.current_environ.extras.get("transports", {}).get(
            self.transport, {})
        added = {k: v for k, v in self.env_vars.items() if transport_env.get(k) != v}
        return layers.layers_record(curves, not_run, self.line_rate().mbps, transport_env,
                                    added)

    @sanity_function
    def validate_both_runs(self):
        return sn.all([
            # either run's launcher may report a dead rank (the TCP run's
            # stdout is tcp.out): that is the cause, before any symptom
            self.assert_ranks_finished(),
            self.validate_run(),
            sn.assert_true("sweep_seconds" in self.first_launch("tcp")["summary"],
                           msg="the TCP run did not finish its sweep"),
            sn.assert_eq(self.summary("verify_errors", int, run="tcp"), 0,
                         msg="TCP: received data did not match what was sent"),
        ])

    @performance_function("us")
    def tcp_latency(self):
        return self.judged_value("tcp_latency")

    @performance_function("Mbit/s")
    def tcp_peak_bw(self):
        return self.judged_value("tcp_peak_bw")

    @performance_function("%")
    def overhead(self):
        """MPI's bandwidth loss against raw TCP at the largest size, in %
        (negative: MPI is faster, as shared memory is)."""
        size = self.max_bytes
        tcp = self.column_at(size, "Mbps", run="tcp")
        return 100.0 * (1.0 - self.column_at(size, "Mbps") / tcp)

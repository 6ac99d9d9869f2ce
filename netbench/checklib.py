"""Building blocks of netbench's ReFrame checks (in the spirit of
hpctestlib's OSU library: a build fixture per environment, run-only tests
parameterized on top of it).

Importing this module outside a ReFrame session that loaded netbench's
configuration exits with one line saying how to load it: ReFrame would
otherwise skip the check files silently and report 0 test cases.
"""

import os
import re
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (fixture, performance_function, run_after, run_before,
                                   sanity_function, variable)

from . import discovery, paths, references
from .results import benchmark, record as results_record

KiB, MiB = 1024, 1024 * 1024
#: the thresholds class of cases whose ranks share one node
INTRANODE_CLASS = "intranode"
#: the transport of the benchmark's TCP mode: sockets, no MPI in the data path
RAW_TCP = "raw"
#: any network transport of the MPI (discovery.preferred_network_transport)
ANY_NETWORK = "network"
#: how Slurm says it ended a job early, in the job's stderr: the controller's
#: cancellation (slurmstepd), then srun's errors, the cause first: a node
#: that failed, a task killed by a signal, then any other (the ranks that
#: exited because a peer died come last)
SLURM_CANCELLED = r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+ (DUE TO [A-Z ]+)"
SRUN_ERRORS = [r"^srun: error: (Node failure on .+)$",
               r"^srun: error: (\S+: tasks? [\d,-]+: (?!Exited with exit code).+)$",
               r"^srun: error: (.+)$"]
LOAD_HINT = (f"source {paths.REPO}/.venv/bin/activate "
             f"(or export RFM_CONFIG_FILES={paths.CONFIG})")


def _loaded_config_files():
    from reframe.core.runtime import runtime
    return [s for s in runtime().site_config.sources if s != "<builtin>"]


def require_netbench_config():
    """SystemExit (which ReFrame lets through, exit code 1) unless the
    netbench configuration is loaded and found at least one MPI."""
    try:
        sources = _loaded_config_files()
    except Exception:
        raise SystemExit(f"netbench: checks must be loaded by ReFrame: {LOAD_HINT}")
    if not any(os.path.exists(s) and os.path.samefile(s, paths.CONFIG) for s in sources):
        raise SystemExit("netbench: the netbench ReFrame configuration is not loaded "
                         f"(loaded: {', '.join(sources) or 'none'}): {LOAD_HINT}")
    if not configured_environments():
        raise SystemExit("netbench: no MPI found (no .mpi/ wheel prefix, Spack view or "
                         "mpicc/mpirun pair on PATH): run `make setup`")


def configured_environments():
    """Names of the MPI environments of the loaded configuration."""
    from reframe.core.runtime import runtime
    envs = runtime().site_config.get("environments") or []
    return [e["name"] for e in envs if "mpi" in e.get("features", [])]


def configured_transports():
    """Every transport some configured MPI offers, in a stable order."""
    from reframe.core.runtime import runtime
    order = ["shm", "tcp", "ofi-tcp", "ucx-tcp"]
    found = set()
    for env in runtime().site_config.get("environments") or []:
        found.update(env.get("extras", {}).get("transports", {}))
    return [t for t in order if t in found] + sorted(found - set(order))


def configured_placements():
    """`intranode`, plus `internode` when some partition has 2+ nodes."""
    from reframe.core.runtime import runtime
    nodes = [p.extras.get("nodes", 1) for p in runtime().system.partitions]
    return ["intranode"] + (["internode"] if max(nodes, default=1) >= 2 else [])


def throughput_transports():
    """Shared memory, plus the network transports where ranks can span
    nodes (the chain then crosses the interconnect)."""
    if "internode" in configured_placements():
        return configured_transports()
    return ["shm"]


def max_nodes():
    """Nodes of the largest partition of the selected system."""
    from reframe.core.runtime import runtime
    return max((p.extras.get("nodes", 1) for p in runtime().system.partitions), default=1)


def max_ranks():
    """Processes the largest partition can host without oversubscription."""
    from reframe.core.runtime import runtime
    best = 2
    for p in runtime().system.partitions:
        cpus = p.processor.num_cpus or 1
        best = max(best, cpus * p.extras.get("nodes", 1))
    return best


def slurm_failure(stderr_text):
    """Why Slurm ended a job early, from the job's stderr; None when it
    did not (the cancellation, then the cause srun saw)."""
    cancelled = re.search(SLURM_CANCELLED, stderr_text)
    # once Slurm cancelled the job, the tasks it terminated are no cause;
    # a node failure still says which node
    errors = SRUN_ERRORS[:1] if cancelled else SRUN_ERRORS
    cause = next((m for m in (re.search(p, stderr_text, re.MULTILINE) for p in errors)
                  if m), None)
    return "; ".join(m.group(1).strip() for m in (cancelled, cause) if m) or None


def job_failure(stdout_text, stderr_text):
    """Why the job's ranks did not all finish, from its output: Slurm's
    reason when Slurm ended the job (the ranks it killed are no cause),
    else the rank the MPI launcher saw die and how (`rank 1 (pid N on
    host) was killed by signal 9 (Killed)`); None when neither."""
    reason = slurm_failure(stderr_text)
    if reason:
        return f"Slurm ended the job: {reason}"
    return benchmark.launcher_failure(f"{stdout_text}\n{stderr_text}")


class NetbenchBuild(rfm.CompileOnlyRegressionTest):
    """Compile reframe_checks/src/netbench.c with the environment's mpicc."""

    descr = "build the netbench benchmark"
    valid_systems = ["*"]
    valid_prog_environs = ["+mpi"]
    sourcesdir = str(paths.SOURCES)
    build_system = "SingleSource"
    sourcepath = "netbench.c"
    executable = "netbench"
    build_locally = True

    @sanity_function
    def binary_built(self):
        return sn.assert_true(os.path.exists(os.path.join(self.stagedir, self.executable)),
                              msg="netbench binary was not produced")


class MpiRun(rfm.RunOnlyRegressionTest):
    """An MPI benchmark run judged against the documented references of the
    partition's interconnect class: what netbench's own benchmark and the
    OSU/IMB binaries have in common (transport, placement, link counters,
    Slurm's verdict, provenance for the report).

    Subclasses set `kind` (the thresholds' check kind) and `num_ranks`, and
    define `transport` (forced through the environment's MPI, see
    mpi_families.yaml) and `placement` (intranode: all ranks on one node;
    internode: spread over the partition's nodes), usually as parameters.
    """

    # not the container partition: its checks run inside the image (container.py)
    valid_systems = ["-container"]
    valid_prog_environs = ["+mpi"]
    #: "host:cpuN" where two ranks were pinned to the same single CPU
    stacked_ranks = variable(list, value=[])
    #: what the case measured, how the report draws it, what judged it and
    #: where it ran (netbench/results/record.py): written before the
    #: performance stage, so a case that fails its references still has it
    record = variable(dict, value={})
    #: the report section that draws the case, one of
    #: results.record.SECTIONS: every check names one (require_section)
    section = ""
    #: where the report draws a judged figure on the case's first series:
    #: {variable: (y column, message size; None: the size the source gives
    #: beside the figure)}
    drawn_references = {"latency": ("usec", 1), "peak_bw": ("Mbps", None)}
    #: the MPI of the environment: family, version, source, launcher, transports
    mpi_info = variable(dict, value={})
    #: the partition's interconnect class, nodes and line rate
    partition_info = variable(dict, value={})
    #: ranks of the job; 0: one per node of the partition
    num_ranks = 2
    kind = "pingpong"
    #: bytes each node's link must carry for internode traffic to count
    min_link_bytes = 1 * MiB
    #: the folder of thresholds.yaml and the seed files the case is judged
    #: by (`-S thresholds_folder=DIR` judges by a copy)
    thresholds_folder = variable(str, value=str(paths.REFERENCES))
    # a full sweep takes seconds; the limit catches MPIs that hang (Debian's
    # MPICH 4.0.2 over UCX tcp in MPI_Finalize, docs/platform-facts.md) early
    time_limit = "2m"

    @run_after("setup")
    def record_provenance(self):
        extras = self.current_environ.extras
        self.mpi_info = {"family": extras.get("mpi_family", ""),
                         "version": extras.get("mpi_version", ""),
                         "source": extras.get("mpi_source", ""),
                         "launcher": extras.get("mpi_launcher", ""),
                         "transports": extras.get("transports", {})}
        part = self.current_partition.extras
        self.partition_info = {k: part[k] for k in ("interconnect", "nodes", "line_rate_mbps")
                               if k in part}

    @run_after("setup")
    def select_transport(self):
        if self.transport == RAW_TCP:
            return          # sockets of the benchmark's own: no MPI transport to force
        offered = self.current_environ.extras.get("transports", {})
        if self.transport == ANY_NETWORK:
            self.transport = discovery.preferred_network_transport(offered) or "none"
        self.skip_if(self.transport not in offered,
                     f"{self.current_environ.name} offers no {self.transport} transport "
                     f"(offers: {', '.join(offered) or 'none'})")
        self.env_vars.update(offered[self.transport])

    #: processes per node for internode placement (0: as few as fit)
    procs_per_node = 0

    @run_after("setup")
    def place_ranks(self):
        nodes = self.current_partition.extras.get("nodes", 1)
        # 0: one rank on every node of the partition (a ring over all nodes)
        self.num_ranks = self.num_ranks or nodes
        self.num_tasks = self.num_ranks
        if self.placement == "internode":
            self.skip_if(nodes < 2, "internode placement needs a partition with 2+ nodes")
            self.skip_if(self.transport == "shm", "shared memory does not cross nodes")
            ppn = self.procs_per_node or -(-self.num_ranks // nodes)
            self.skip_if(self.num_ranks > nodes * ppn,
                         f"{self.num_ranks} ranks at {ppn} per node need more than "
                         f"{nodes} nodes")
            self.num_tasks_per_node = ppn
        else:
            self.num_tasks_per_node = self.num_ranks
        self.skip_if_oversubscribed()
        self.skip_if_known_defect()

    def skip_if_oversubscribed(self):
        # busy-polling ranks that share a core measure the scheduler's time
        # slices (8 ms "latencies" here), not the network
        cpus = self.current_partition.processor.num_cpus
        self.skip_if(cpus and self.num_tasks_per_node > cpus,
                     f"{self.num_tasks_per_node} ranks on one node of {cpus} CPUs would "
                     f"oversubscribe it")

    def skip_if_known_defect(self):
        defect = (self.current_environ.extras.get("known_defects") or {}).get(self.transport)
        if defect:
            self.skip_if(self.num_ranks >= defect["min_ranks"],
                         f"known defect, not run: {defect['why']} "
                         f"(mpi_families.yaml known_defects)")

    def snapshot_link_counters(self, filename):
        """Bytes through each of the partition's links (the host ends of a
        virtual cluster's veths), read here on the host that owns them: a
        job that Slurm runs inside a node sees only the node's own links."""
        counters = self.current_partition.extras.get("link_counters", [])
        if not counters:
            return
        totals = [sum(int(Path(d, f).read_text()) for f in ("rx_bytes", "tx_bytes"))
                  for d in counters]
        with open(os.path.join(self.stagedir, filename), "w") as out:
            out.write("".join(f"{t}\n" for t in totals))

    @run_before("run")
    def count_link_traffic(self):
        """Snapshot the link counters around the job (the partition runs one
        job at a time): internode traffic must be seen crossing them, or the
        MPI took a path outside the network (shared memory between namespace
        nodes, say)."""
        self.snapshot_link_counters("links.before")

    @run_before("sanity")
    def count_link_traffic_after(self):
        self.snapshot_link_counters("links.after")

    @run_after("setup")
    def require_matching_slurm_conf(self):
        """ReFrame submits with its own environment's SLURM_CONF: it must
        name the partition's cluster, or the job lands on another one."""
        conf = self.current_partition.extras.get("slurm_conf")
        if conf and os.environ.get("SLURM_CONF") != conf:
            raise ValueError(f"partition {self.current_partition.fullname} is the Slurm of "
                             f"{conf}, but SLURM_CONF={os.environ.get('SLURM_CONF', '')!r}: "
                             f"export SLURM_CONF={conf}")

    @run_after("setup")
    def require_section(self):
        """A case the report has no section for would drop out of it
        silently: refuse it instead."""
        if self.section not in results_record.SECTIONS:
            raise ValueError(f"{type(self).__name__}: section {self.section!r} is not one of "
                             f"{', '.join(results_record.SECTIONS)} "
                             f"(netbench/results/record.py)")

    def measured_series(self):
        """The series the case measured (results.record), read from its
        output in the stage folder; [] when there is none."""
        return []

    def series_label(self):
        """The legend label of the case's curves: the environment and the
        check's parameters."""
        return " ".join([self.current_environ.name] + self.parameter_labels())

    def parameter_labels(self, leave_out=()):
        """The check's parameter values as label words, formatted as in its
        display name: a word as it is (`blocking`, `shm`, `1ppn-2`), a
        number with its parameter's name (`ranks=4`)."""
        words = []
        for name, param in type(self).param_space.params.items():
            value = getattr(self, name)
            if name in leave_out or value is None:
                continue
            shown = param.format(value)
            words.append(f"{name}={shown}" if isinstance(shown, (int, float)) else str(shown))
        return words

    #: parameters that place a case along the scaling plot's x axis (its
    #: ranks), not on a line of its own
    scaling_parameters = ("ranks", "layout")

    def scaling_group(self):
        """The line of the scaling plot the case is one point of: the label
        without the process count, plus the processes per node."""
        if self.section not in results_record.SCALING_SECTIONS:
            return ""
        parts = [self.current_environ.name] + self.parameter_labels(self.scaling_parameters)
        if self.procs_per_node:
            parts.append(f"{self.procs_per_node} per node")
        return " ".join(parts)

    def provenance(self):
        """Where and how the case ran, for its record."""
        env, part = self.current_environ.extras, self.current_partition.extras
        return {"mpi_family": env.get("mpi_family", ""),
                "mpi_version": str(env.get("mpi_version", "")),
                "mpi_source": env.get("mpi_source", ""),
                "transport": str(self.transport), "placement": str(self.placement),
                "ranks": int(self.num_tasks or 0),
                "ranks_per_node": int(self.num_tasks_per_node or 0),
                "partition": self.current_partition.fullname,
                "interconnect": self.interconnect_class(),
                "line_rate_mbps": part.get("line_rate_mbps")}

    @run_before("sanity")
    def record_measurement(self):
        """The record without its references (set_references adds them):
        written before sanity, so a failed case still shows its series."""
        self.record = results_record.make(self.section, self.series_label(),
                                          self.measured_series(),
                                          self.provenance(), group=self.scaling_group())

    def measured_rows(self):
        """The rows of the case's first series (its record), [] before
        record_measurement or when it measured none."""
        series = self.record.get("series") or []
        return series[0]["rows"] if series else []

    @run_before("performance")
    def set_perf_variables(self):
        """Checks whose performance variables depend on the parsed output
        set them here (before set_references, which judges them)."""

    def judged_references(self):
        """{performance variable: (ReFrame's reference tuple, the Threshold
        it comes from or None for a rule of the check's own)}."""
        mine = set(self.perf_variables)
        return {var: (t.reference, t) for var, t in self.thresholds().items() if var in mine}

    @run_before("performance")
    def set_references(self):
        """ReFrame's references, and the same figures in the record: the
        report draws what judged the case, not today's files."""
        judged = self.judged_references()
        self.reference = {self.current_partition.fullname: {
            var: ref for var, (ref, _) in judged.items()}}
        entries = {}
        for var, ((value, lower, upper, unit), threshold) in judged.items():
            figure = threshold.figure if threshold else None
            entries[var] = results_record.reference(
                value, lower, upper, unit, figure=figure and figure.key,
                citation=figure and figure.citation,
                interconnect=self.interconnect_class() if figure else None,
                at=self.reference_position(var, figure))
        self.record = {**self.record, "references": entries}

    def reference_position(self, var, figure):
        """Where the report draws `var`'s figure on the case's first series:
        {series, y, bytes}, or None."""
        series = self.record.get("series") or []
        if var not in self.drawn_references or not series or figure is None:
            return None
        column, nbytes = self.drawn_references[var]
        if nbytes is None:
            nbytes = references.figure_message_size(figure, Path(self.thresholds_folder))
        if nbytes is None or column not in results_record.y_columns(series[0]):
            return None
        return {"series": series[0]["name"], "y": column, "bytes": float(nbytes)}

    def judged_by(self):
        """(check kind, transport) of the thresholds that judge the case."""
        return self.kind, self.transport

    def interconnect_class(self):
        """The class of thresholds.yaml that judges the case: the partition's
        (its links between nodes) when ranks span nodes; `intranode` when
        they all share one node, whose paths (shared memory, TCP loopback)
        the partition's link class does not describe."""
        if getattr(self, "placement", "internode") == "intranode":
            return INTRANODE_CLASS
        return self.current_partition.extras.get("interconnect", "")

    def thresholds(self, line_rate_mbps=None):
        """{variable: Threshold} of the case's interconnect class, scaled to
        the partition's line rate (or `line_rate_mbps`)."""
        kind, transport = self.judged_by()
        return references.thresholds_for(
            self.interconnect_class(), kind, transport, folder=Path(self.thresholds_folder),
            line_rate_mbps=line_rate_mbps or self.current_partition.extras.get("line_rate_mbps"))

    def unjudged_reason(self):
        """Why the case cannot be held to documented thresholds, or None:
        it can, or its kind is informational by design (no class documents
        it).  Without thresholds ReFrame compares with 0, unbounded, and
        passes: such a case must fail instead."""
        extras = self.current_partition.extras
        kind, transport = self.judged_by()
        reason = references.missing_thresholds(self.interconnect_class(), kind, transport,
                                               folder=Path(self.thresholds_folder))
        if reason:
            return reason
        if not extras.get("line_rate_mbps"):
            relative = sorted(set(self.thresholds(line_rate_mbps=1.0)) - set(self.thresholds()))
            if relative:
                return (f"the thresholds of {', '.join(relative)} are relative to the line "
                        f"rate, and partition {self.current_partition.fullname} declares "
                        f"none (extras.line_rate_mbps)")
        return None

    @sn.deferrable
    def assert_judged(self):
        """Fails the case that no documented threshold judges (see
        unjudged_reason)."""
        reason = self.unjudged_reason()
        if reason:
            raise sn.SanityError(f"not judged: {reason}")
        return True

    # ---- sanity: the run completed, data verified, ranks where asked ----

    def link_traffic(self):
        """Bytes that crossed each link during the job, [] without counters."""
        before = os.path.join(self.stagedir, "links.before")
        after = os.path.join(self.stagedir, "links.after")
        if not os.path.exists(after):
            return []
        with open(before) as b, open(after) as a:
            return [int(y) - int(x) for x, y in zip(b.read().split(), a.read().split())]

    def read_stage_file(self, name):
        """A file of the stage folder, "" when absent."""
        try:
            with open(os.path.join(self.stagedir, str(name)), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @sn.deferrable
    def assert_ranks_finished(self, *outputs):
        """Every rank finished: neither Slurm ended the job or a step early
        (time limit, node failure, a task killed; ReFrame's squeue scheduler
        sees only that the job left the queue), nor did the MPI launcher
        report a rank that died (`rank 1 (pid N on host) was killed by
        signal 9 (Killed)`).  First of the sanity assertions: the output
        of such a run is cut short, and the other assertions and the
        figures would report its symptoms.  `outputs`: further files of
        the stage folder that a launcher wrote to (MpiVsTcp's second run)."""
        stdout = "\n".join(self.read_stage_file(f) for f in (self.job.stdout, *outputs))
        reason = job_failure(stdout, self.read_stage_file(self.job.stderr))
        if reason:
            raise sn.SanityError(reason)
        return True

    @sn.deferrable
    def assert_traffic_crossed_links(self, hosts):
        """Every host that ran a rank (`hosts`: their names, or how many)
        moved at least min_link_bytes through its link."""
        if self.placement != "internode" or \
                not self.current_partition.extras.get("link_counters"):
            return True
        traffic = self.link_traffic()
        busy = sum(1 for t in traffic if t >= self.min_link_bytes)
        nhosts = hosts if isinstance(hosts, int) else len(set(hosts))
        if busy < nhosts:
            raise sn.SanityError(
                f"traffic did not cross the links: {busy} of {nhosts} nodes' links moved "
                f"{self.min_link_bytes} bytes or more (bytes per link: {traffic})")
        return True

    def expected_hosts(self):
        """Ranks fill each node with procs_per_node before the next."""
        return 1 if self.placement == "intranode" else \
            -(-self.num_tasks // self.num_tasks_per_node)

    @run_before("performance")
    def report_link_traffic(self):
        if self.current_partition.extras.get("link_counters"):
            self.perf_variables["link_traffic"] = sn.make_performance_function(
                sn.defer(sum(self.link_traffic()) / 1e6), "MB")



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

    @run_after("setup")
    def largest_message_crosses_links(self):
        # every node's link carries at least one largest message
        self.min_link_bytes = self.max_bytes

    #: the columns of the benchmark's table the report draws
    drawn_columns = ("usec", "Mbps", "MBps")

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
        self.executable_opts = [self.bench_mode, "-x", str(self.max_bytes), "-t", str(self.budget),
                                "-r", str(self.precision)] + (["-V"] if self.verifies else [])

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
        return sn.assert_false(stacked, msg=f"ranks pinned to one CPU each ({', '.join(stacked)})"
                                            f": they take turns, so the run measured the "
                                            f"scheduler; check the launcher's binding flags")

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


class PingPongBase(NetbenchRun):
    """MPI ping-pong sweep between two ranks (seed 000's NetPIPE runs,
    seed 004's blocking and non-blocking point-to-point)."""

    kind = "pingpong"
    bench_mode = "pingpong"
    section = "pingpong"

    @performance_function("us")
    def latency(self):
        return self.summary("latency_usec")

    @performance_function("Mbit/s")
    def peak_bw(self):
        return self.summary("peak_Mbps")

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

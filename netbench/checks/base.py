"""What every MPI run of the checks needs: the environment's MPI and the
partition it runs on, the transport forced through the MPI, and the ranks
placed on one node or spread over the partition's nodes."""

import os

import reframe as rfm
from reframe.core.builtins import run_after, variable

from ..probe import discovery
from ..rfm import launchers

KiB, MiB = 1024, 1024 * 1024
#: the transport of the benchmark's TCP mode: sockets, no MPI in the data path
RAW_TCP = "raw"
#: any network transport of the MPI (discovery.preferred_network_transport)
ANY_NETWORK = "network"
#: where the ranks run: all on one node, or spread over the partition's nodes
PLACEMENTS = ("intranode", "internode")


class MpiJob(rfm.RunOnlyRegressionTest):
    """An MPI job placed on the partition.

    A check defines, usually as parameters (configured_transports(),
    configured_placements()) or as class attributes:

    - `transport`: a transport of the environment's MPI (mpi_families.yaml),
      RAW_TCP (the benchmark's own sockets) or ANY_NETWORK;
    - `placement`: one of PLACEMENTS.

    They are not ReFrame variables because ReFrame refuses a parameter, or
    a plugin's attribute, of the same name as a variable of a base class
    ("already defined in one of the base classes"), and most checks make
    them parameters (MtuMixin and ContainerMixin set them as plugins); the
    first setup hook (require_declared_attributes) fails the case that
    forgot one.
    """

    #: what a check must define, and what it is (see the class docstring)
    required_attributes = {
        "transport": "a transport of the environment's MPI (mpi_families.yaml), "
                     f"{RAW_TCP!r} or {ANY_NETWORK!r}, usually "
                     "parameter(checks.configured_transports())",
        "placement": f"one of {', '.join(PLACEMENTS)}, usually "
                     "parameter(checks.configured_placements())",
    }

    # not the container partition: its checks run inside the image (container.py)
    valid_systems = ["-container"]
    valid_prog_environs = ["+mpi"]
    #: the MPI of the environment: family, version, source, launcher, transports
    mpi_info = variable(dict, value={})
    #: the partition's interconnect class, nodes and line rate
    partition_info = variable(dict, value={})
    #: "host:cpuN" where two ranks were pinned to the same single CPU
    stacked_ranks = variable(list, value=[])
    #: why the case skipped: ReFrame's run report keeps no reason for a skip,
    #: and the report collapses skipped cases into one line per reason
    skip_reason = variable(str, value="")
    #: ranks of the job; 0: one per node of the partition
    num_ranks = 2
    #: processes per node for internode placement (0: as few as fit)
    procs_per_node = 0
    # a full sweep takes seconds, and the judging rule launches it up to 4
    # times (judging.yaml); the limit catches MPIs that hang (Debian's MPICH
    # 4.0.2 over UCX tcp in MPI_Finalize, docs/explanation/platform-facts.md); 2 minutes
    # cut off 4 launches of a TCP ping-pong on a busy host
    time_limit = "4m"

    # ---- setup, in this order (ReFrame runs a class's hooks of one stage
    # in the order they are defined here) ----

    @run_after("setup")
    def require_declared_attributes(self):
        """A check that forgot `transport` or `placement` would fail later
        with an AttributeError deep in a hook: say what is missing."""
        missing = [name for name in self.required_attributes if not hasattr(self, name)]
        if missing:
            raise ValueError(f"{type(self).__name__} defines no "
                             + "; no ".join(f"{name} ({self.required_attributes[name]})"
                                            for name in missing))
        if self.placement not in PLACEMENTS:
            raise ValueError(f"{type(self).__name__}: placement {self.placement!r} is not "
                             f"one of {', '.join(PLACEMENTS)}")

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

    @run_after("setup")
    def place_ranks(self):
        """After select_transport: shared memory cannot cross nodes, and
        the known defects are per transport."""
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
        defect = discovery.known_defect(self.current_environ.extras.get("known_defects"),
                                        self.transport, self.placement, self.num_ranks,
                                        self.current_partition.launcher_type.registered_name)
        if defect:
            self.skip(f"known defect, not run: {defect['why']} "
                      f"(mpi_families.yaml known_defects)")

    def skip(self, msg=None):
        self.skip_reason = msg or ""
        super().skip(msg)

    def expected_hosts(self):
        """Ranks fill each node with procs_per_node before the next."""
        return 1 if self.placement == "intranode" else \
            -(-self.num_tasks // self.num_tasks_per_node)

    def launch_prefix(self, time_limit_variable=None):
        """The job's launcher command for a launch of its own (the node
        readers', a re-measurement): ReFrame copies the task counts into
        the job only after the pre-run hooks, and the launcher needs them.
        `time_limit_variable`: the job script's shell variable holding the
        seconds this launch may take (netbench's launchers end it before
        then: rfm.launchers.time_limit_flags)."""
        self.job.num_tasks = self.num_tasks
        self.job.num_tasks_per_node = self.num_tasks_per_node
        if not time_limit_variable:
            return self.job.launcher.run_command(self.job)
        setattr(self.job, launchers.TIME_LIMIT_VARIABLE, time_limit_variable)
        try:
            return self.job.launcher.run_command(self.job)
        finally:
            delattr(self.job, launchers.TIME_LIMIT_VARIABLE)

    def read_stage_file(self, name):
        """A file of the stage folder, "" when absent."""
        try:
            with open(os.path.join(self.stagedir, str(name)), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

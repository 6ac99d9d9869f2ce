"""CaseGeneration: a check generates only the cases that can run and, in a
session that selects nothing itself, only the focused default set
(netbench/selection.py says how the session's scope is decided).

ReFrame turns a check into one case per (partition, environment) of its
`valid_systems` and `valid_prog_environs`, read after the check's init
hooks.  The hook here runs last among them (always_last, so a check's own
init hooks have set its ranks and layout) and narrows both lists to what
can run: a case that could only skip is never generated, and the reason is
counted for the session's "N cases not generated: why" lines.  The setup
hooks' skip_if calls stay as a guard for what only the running job knows.
"""

import reframe as rfm
import reframe.core.runtime as rt
from reframe.core.builtins import run_after

from .. import references, selection
from ..probe import discovery, fabric
from .base import ANY_NETWORK, RAW_TCP


#: the reason RDMA cases were not generated (selection's not-generated lines)
RDMA_NOT_FOUND = ("RDMA transports whose device or provider fabric discovery did not find "
                  "(netbench/probe/fabric.py)")


def offered_transports(env):
    return env.extras.get("transports", {}) or {}


def is_fabric_transport(transport):
    """Whether `transport` is a fabric's own data path (thresholds.yaml's
    transport group `rdma`: UCX over verbs, libfabric's RDMA providers)."""
    return references.transport_group(transport) == references.RDMA_GROUP


def fabric_case_in_default_set(placement):
    """A fabric's RDMA path belongs to the focused default run between
    nodes: on one node the bytes only loop through the adapter, which no
    class of thresholds.yaml describes (`-t full` still runs it)."""
    return placement == "internode"


def native_case_in_default_set(placement):
    """A `native` case (the MPI's own choice, nothing forced) belongs to the
    focused default run between nodes wherever fabric discovery found an
    active RDMA device: it proves the MPI takes the fabric by itself, and
    fails a silent fallback to TCP or another port (judgement.path).
    Without one the MPI's network transport's case is the network's."""
    return placement == "internode" and fabric.rdma_device_found(fabric.node_fabric())


def network_transport_of(env):
    """The MPI's preferred network transport (its own TCP module first)."""
    return discovery.preferred_network_transport(offered_transports(env))


def partition_nodes(part):
    return part.extras.get("nodes", 1)


class CaseGeneration(rfm.RegressionTestPlugin):
    """Narrows valid_systems and valid_prog_environs to the runnable cases.

    A check refines `partition_problem`, `environment_problem` (calling
    super()) and `in_default_set`."""

    @run_after("init", always_last=True)
    def generate_possible_cases_only(self):
        if any(not hasattr(self, name) for name in self.required_attributes):
            return      # MpiJob.require_declared_attributes names what is missing
        candidates = rt.valid_sysenv_comb(self.valid_systems, self.valid_prog_environs)
        focused = not selection.full_matrix_requested()
        self._max_candidate_nodes = max((partition_nodes(p) for p in candidates), default=1)
        # raw TCP carries no MPI data: the first environment's build runs it
        self._raw_tcp_environment = next((e.name for es in candidates.values() for e in es),
                                         None)
        parts, envs, dropped = selection.plan(
            candidates, self.partition_problem, self.environment_problem,
            in_scope=self.in_default_set if focused else None)
        self.tags = set(self.tags) | {selection.FULL_TAG}
        if any(self.in_default_set(e) for es in candidates.values() for e in es):
            self.tags.add(selection.DEFAULT_TAG)
        dropped.update(self.cases_without_fabric(candidates))
        selection.record_not_generated(dropped, self.tags, display_name=self.display_name)
        self.valid_systems = [p.fullname for p in parts]
        self.valid_prog_environs = envs

    def cases_without_fabric(self, candidates):
        """{(reason, detail): cases} of the RDMA transports' cases this
        check would have had beside the MPI's TCP one, on a node whose
        fabric discovery found no device or provider for them.  Such a
        transport is no parameter value here (no MPI offers it), so the
        check's variant for the MPI's network transport counts them: one
        per case of it that could run, in the full matrix (a focused run
        cannot generate them either), and RDMA transport the MPI could
        have run."""
        if "transport" not in type(self).param_space.params:
            return {}
        n = sum(len(env.extras.get("fabric_not_found") or {})
                for part, envs in candidates.items() if self.partition_problem(part) is None
                for env in envs if self.transport == network_transport_of(env)
                and self.environment_problem(env) is None)
        if not n:
            return {}
        return {(RDMA_NOT_FOUND, fabric.node_fabric().summary()): n}

    # ---- the rules; None: a case can run there ----

    def case_transport(self, env):
        """The transport the case forces through `env`'s MPI."""
        if self.transport == ANY_NETWORK:
            return network_transport_of(env) or "none"
        return self.transport

    def case_ranks(self, part):
        # num_ranks 0: one rank on every node of the partition
        return self.num_ranks or partition_nodes(part)

    def ranks_per_node(self, part):
        ranks = self.case_ranks(part)
        if self.placement == "internode":
            return self.procs_per_node or -(-ranks // partition_nodes(part))
        return ranks

    def partition_problem(self, part):
        nodes = partition_nodes(part)
        if self.placement == "internode":
            if nodes < 2:
                return "internode placement needs a partition of 2+ nodes"
            if self.transport == "shm":
                return "shared memory does not cross nodes"
            if self.case_ranks(part) > nodes * self.ranks_per_node(part):
                return ("more ranks than the partition's nodes can host at the layout's "
                        "processes per node", part.fullname)
        cpus = part.processor.num_cpus
        if cpus and self.ranks_per_node(part) > cpus:
            # busy-polling ranks sharing a core measure the scheduler
            return ("more ranks per node than CPUs (oversubscribed ranks measure the "
                    "scheduler)", f"{part.fullname}: {cpus} CPUs")
        return None

    def environment_problem(self, env):
        if self.transport == RAW_TCP:
            if env.name != self._raw_tcp_environment:
                return ("raw TCP carries no MPI data: one environment runs it",
                        f"{self._raw_tcp_environment}")
            return None
        transport = self.case_transport(env)
        if transport not in offered_transports(env):
            return ("transport not offered by the MPI", f"{env.name}: {transport}")
        ranks = self.num_ranks or self._max_candidate_nodes
        defect = discovery.known_defect(env.extras.get("known_defects"), transport,
                                        self.placement, ranks)
        if defect:
            return ("known defect, listed in mpi_families.yaml known_defects",
                    f"{env.name} {transport} {self.placement}, {defect['min_ranks']}+ ranks")
        return None

    def in_default_set(self, env):
        """Whether the case on `env` belongs to the focused default run: a
        check is, unless it says otherwise (a site's own check runs by
        default; netbench's sweeps and side-by-side runs opt out)."""
        return True

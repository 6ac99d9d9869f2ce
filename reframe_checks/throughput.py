"""Sendrecv and Exchange throughput per process on a periodic chain (seed
002's Pallas MPI Benchmarks runs) and one-to-all broadcast (seed 004)."""

import reframe as rfm
from reframe.core.builtins import parameter, run_after

from netbench import checks
from netbench.checks.generation import network_transport_of

checks.require_netbench_config()

# seed 002 ran 4 to 32 processes; only counts the largest partition can
# host without oversubscribing its cores are generated
RANK_COUNTS = [n for n in (2, 4, 8, 16, 32) if n <= checks.max_ranks()]


@rfm.simple_test
class Throughput(checks.ThroughputBase):
    descr = "Sendrecv, Exchange and Bcast throughput per process"
    pattern = parameter(["sendrecv", "exchange", "bcast"])
    ranks = parameter(RANK_COUNTS)
    transport = parameter(checks.throughput_transports())
    placement = parameter(checks.configured_placements())
    tags = {"throughput"}

    def in_default_set(self, env):
        # one Sendrecv chain and one broadcast at the fewest ranks: over
        # shared memory on one node, over the MPI's network across nodes
        if self.pattern == "exchange" or self.ranks != RANK_COUNTS[0]:
            return False
        if self.placement == "intranode":
            return self.transport == "shm"
        return self.transport == network_transport_of(env)

    @run_after("init")
    def set_ranks(self):
        self.num_ranks = self.ranks

    def scaling_group(self):
        # seed 002's scaling figures are of the chains; a broadcast's rate
        # per process is another quantity
        return "" if self.pattern == "bcast" else super().scaling_group()


def _nodes():
    return checks.max_nodes()


# seed 002 ran Sendrecv and Exchange with one and with two processes on each
# dual-CPU node: the counts here span two nodes or more at each density
# (on a one-node system the two smallest, which CaseGeneration then drops
# with their reason, rather than no parameter value, which ReFrame warns of)
PER_NODE_LAYOUTS = [(ppn, n) for ppn in (1, 2)
                    for n in sorted({2, 4, 8, 16, 32, ppn * max(_nodes(), 2)})
                    if ppn < n <= ppn * max(_nodes(), 2)]


@rfm.simple_test
class ThroughputPerNode(checks.ThroughputBase):
    descr = "Sendrecv and Exchange throughput, one or two processes per node"
    pattern = parameter(["sendrecv", "exchange"])
    layout = parameter(PER_NODE_LAYOUTS, fmt=lambda x: f"{x[0]}ppn-{x[1]}")
    transport = checks.ANY_NETWORK
    placement = "internode"
    category = "scaling"
    tags = {"throughput", "seeds"}

    def in_default_set(self, env):
        return False        # seed 002's density experiment: -t seeds

    @run_after("init")
    def set_layout(self):
        self.procs_per_node, self.num_ranks = self.layout

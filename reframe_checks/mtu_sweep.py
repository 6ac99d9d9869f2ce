"""Point-to-point and ring exchange across the MTU range (seed 004: MTU
1500 to 16000 on Gigabit Ethernet, jumbo frames best for messages above
16 KB, for ping-pong and for the ring).  Today's drivers stop at 9000.

The checks change the MTU of the partition's links, so a partition opts in
by naming a command in its extras (`set_mtu`: argv, the MTU is appended);
the virtual cluster names `netbench vcluster mtu`.  On a real cluster, set
the MTU with `tune.yml` and compare sessions instead.
"""

import os
import shlex

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before

from netbench import benchspec, checks

checks.require_netbench_config()

# seed 004 tested 1500, 4000, 7000, 10000, 13000, 16000
MTUS = [1500, 4000, 7000, 9000]


class MtuMixin(rfm.RegressionTestPlugin):
    mtu = parameter(MTUS)
    placement = "internode"
    transport = checks.ANY_NETWORK

    def in_default_set(self, env):
        return False        # seed 004's MTU experiment: -t seeds

    def partition_problem(self, part):
        if not part.extras.get("set_mtu"):
            return ("the partition names no set_mtu command; a virtual cluster does, on real "
                    "clusters set the MTU with tune.yml", part.fullname)
        if part.extras.get("vcluster") and os.geteuid() != 0:
            return "changing a virtual cluster's MTU needs root"
        return super().partition_problem(part)

    @run_after("setup")
    def can_set_mtu(self):
        extras = self.current_partition.extras
        self.skip_if(not extras.get("set_mtu"),
                     "the partition names no set_mtu command in its extras (the virtual "
                     "cluster does; on real clusters set the MTU with tune.yml)")
        self.skip_if(extras.get("vcluster") and os.geteuid() != 0,
                     "changing a virtual cluster's MTU needs root")

    @run_before("run")
    def switch_mtu(self):
        extras = self.current_partition.extras
        command = shlex.join(extras["set_mtu"])
        # set before the link counters' snapshot, restored after it
        # (its messages go to stderr: stdout is the benchmark's table)
        self.prerun_cmds.insert(0, f"{command} {self.mtu} >&2 || exit 1")
        self.postrun_cmds.append(f"{command} {extras.get('mtu', 1500)} >&2")


@rfm.simple_test
class MtuPingPong(MtuMixin, checks.PingPongBase):
    descr = "MPI ping-pong sweep at one MTU"
    category = "mtu_pingpong"
    variant = parameter(["blocking", "nonblocking"])
    tags = {"mtu", "seeds"}

    @run_before("run")
    def nonblocking_option(self):
        if self.variant == "nonblocking":
            self.executable_opts += benchspec.option("nonblocking")


@rfm.simple_test
class MtuRing(MtuMixin, checks.ThroughputBase):
    descr = "ring neighbour exchange over every node at one MTU"
    category = "mtu_ring"
    num_ranks = 0           # one on every node
    procs_per_node = 1
    tags = {"mtu", "seeds"}

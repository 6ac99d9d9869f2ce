"""Ping-pong latency and bandwidth sweeps, 1 byte to 8 MiB, over every
transport each MPI offers (seed 000's NetPIPE runs; seed 004's blocking
and non-blocking point-to-point)."""

import reframe as rfm
from reframe.core.builtins import parameter, run_before

from netbench import benchspec, checks
from netbench.checks.generation import (fabric_case_in_default_set, is_fabric_transport,
                                       native_case_in_default_set, network_transport_of)
from netbench.judgement.path import NATIVE

checks.require_netbench_config()


@rfm.simple_test
class PingPong(checks.PingPongBase):
    descr = "MPI ping-pong sweep"
    variant = parameter(["blocking", "nonblocking"])
    transport = parameter(checks.configured_transports())
    placement = parameter(checks.configured_placements())
    tags = {"pingpong"}

    def in_default_set(self, env):
        # blocking, over shared memory on one node, over the MPI's own
        # network transport, and over the fabric's own data path between
        # nodes where discovery found one (its RDMA transports, and the
        # MPI's own choice, `native`, which must take it); the other
        # transports and the non-blocking variant are one `-t full` away
        if self.variant != "blocking":
            return False
        if self.transport == NATIVE:
            return native_case_in_default_set(self.placement)
        if self.transport == "shm":
            return self.placement == "intranode"
        if is_fabric_transport(self.transport):
            return fabric_case_in_default_set(self.placement)
        return self.transport == network_transport_of(env)

    @run_before("run")
    def nonblocking_option(self):
        if self.variant == "nonblocking":
            self.executable_opts += benchspec.option("nonblocking")

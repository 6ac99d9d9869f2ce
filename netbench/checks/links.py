"""Link counters: internode traffic must be seen crossing the partition's
links, or the MPI took a path outside the network (shared memory between
the namespace nodes of a virtual cluster, say)."""

import os
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before

from .base import MiB


class LinkCounters(rfm.RegressionTestPlugin):
    """Snapshots of the partition's link counters (extras.link_counters)
    around the job, the sanity assertion on them and the `link_traffic`
    performance variable.  Mixed into MpiRun (uses `placement`)."""

    #: bytes each node's link must carry for internode traffic to count
    min_link_bytes = 1 * MiB

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
        job at a time)."""
        self.snapshot_link_counters("links.before")

    @run_before("sanity")
    def count_link_traffic_after(self):
        self.snapshot_link_counters("links.after")

    def link_traffic(self):
        """Bytes that crossed each link during the job, [] without counters."""
        before = os.path.join(self.stagedir, "links.before")
        after = os.path.join(self.stagedir, "links.after")
        if not os.path.exists(after):
            return []
        with open(before) as b, open(after) as a:
            return [int(y) - int(x) for x, y in zip(b.read().split(), a.read().split())]

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

    @run_before("performance")
    def report_link_traffic(self):
        """After the checks' set_perf_variables (Judging), which may replace
        perf_variables whole: MpiRun's bases order the two."""
        if self.current_partition.extras.get("link_counters"):
            self.perf_variables["link_traffic"] = sn.make_performance_function(
                sn.defer(sum(self.link_traffic()) / 1e6), "MB")

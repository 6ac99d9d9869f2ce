"""LibraryPath: the path the case's MPI library said it used in each
launch (netbench.results.datapath, parsed with the launch), in the record
and judged (netbench.judgement.path): a case whose library used another
path than it asked for fails, one whose library's words name no known path
is inconclusive.  A `native` case is judged, and named, by what its
library chose.  Mixed before MpiRun into NetbenchRun (its launches, parsed
once by Launches with path_said) and into the OSU, IMB and NetPIPE checks
(their one launch: launched_paths); uses `transport`, `placement`, the
record and thresholds_folder."""

import os
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, variable

from .. import references
from ..judgement import FAIL, PASS, case_verdict
from ..judgement.path import NATIVE, TCP_TRANSPORTS, judge as judge_path, rdma_class
from ..probe import discovery, fabric
from ..report import datapath as path_words
from ..results import benchmark, datapath
from .base import RAW_TCP


class LibraryPath(rfm.RegressionTestPlugin):
    """The path each launch's library said it took, recorded and judged."""

    #: the RDMA device, and port, a case's library must use between nodes
    #: (`mlx5_0:1`, `mlx5_0`, `cxi0`): a native or RDMA case whose library
    #: names another fails (judgement.path's wrong_device).  "" (the
    #: default): the port fabric discovery found (device_expected);
    #: `-S expected_device=` overrides it
    expected_device = variable(str, value="")

    def path_said(self, text):
        """The path the launch output `text` says its library took
        (results.datapath, by the rules of the environment's MPI family)."""
        return datapath.library_path(
            text, self.current_environ.extras.get("provenance"),
            across_nodes=getattr(self, "placement", "") == "internode")

    def launched_paths(self):
        """The path each started launch of the case's own run says its
        library took (path_said, parsed with the launch by Launches); a
        check with one launch of another benchmark says it its own way."""
        return [launch["path"] for launch in self.launches() if benchmark.started(launch)]

    def path_verdict(self):
        """The PathVerdict of the case's launches; None for raw TCP (no MPI
        library on the path) and where no launch started (a dry run; a
        launcher that never started a rank fails the case by itself)."""
        if "_path_verdict" not in self.__dict__:     # once: it reads the thresholds file
            paths = self.launched_paths()
            self._path_verdict = None if self.transport == RAW_TCP or not paths else \
                self.path_verdict_of(paths)
        return self._path_verdict

    def path_verdict_of(self, paths):
        """The PathVerdict of launches whose libraries said `paths`."""
        return judge_path(self.transport, paths, across_nodes=self.placement == "internode",
                          rdma=self.rdma_partition(), expected_device=self.device_expected())

    def device_expected(self):
        """The device the case's library must name: none for a TCP or
        shared-memory case, whose library names an interface or memory,
        never the HCA; else `expected_device` where set, or the RDMA port
        fabric discovery found (fabric.expected_device) for an RDMA
        transport's case, and for a `native` one on a partition of an RDMA
        class (elsewhere TCP is a native case's own path, on no HCA)."""
        if self.transport in TCP_TRANSPORTS or self.transport == "shm":
            return ""
        if self.expected_device:
            return self.expected_device
        rdma_case = references.is_rdma_transport(self.transport, Path(self.thresholds_folder))
        if rdma_case or (self.transport == NATIVE and self.rdma_partition()):
            return fabric.expected_device(fabric.node_fabric())
        return ""

    def rdma_partition(self):
        """Whether the case's interconnect class (the partition's, declared
        or matched from its discovered link) is an RDMA class
        (judgement.path.rdma_class), as the case's thresholds file defines
        it (netbench.references, its one reader); for a `native` case
        across nodes of an `auto` partition, whether `auto` chose an RDMA
        class from the discovered fabric, whatever path the MPI then took
        (a TCP fallback is judged by a TCP class, but was not expected)."""
        if self.transport == NATIVE and self.discovered_rdma_class():
            return True
        return rdma_class(references.class_definition(self.interconnect_class(),
                                                      Path(self.thresholds_folder)))

    def discovered_rdma_class(self):
        """The RDMA class `interconnect: auto` chooses from the fabric
        discovery found (fabric.choose_rdma_class) for a case across
        nodes; "" for none, or a declared class or one node."""
        if self.placement != "internode" or \
                self.current_partition.extras.get("interconnect") != references.AUTO_CLASS:
            return ""
        return fabric.choose_rdma_class(
            fabric.node_fabric(),
            references.rdma_class_matches(Path(self.thresholds_folder))).cname

    def expected_native_transport(self):
        """The transport a `native` case across nodes is expected to take:
        where fabric discovery found an RDMA device, the MPI's first RDMA
        transport offered (mpi_families.yaml's order: the accelerated UCX
        ones first); else its preferred network transport."""
        offered = self.current_environ.extras.get("transports", {})
        if fabric.rdma_device_found(fabric.node_fabric()):
            rdma = [t for t in offered
                    if references.is_rdma_transport(t, Path(self.thresholds_folder))]
            if rdma:
                return rdma[0]
        return discovery.preferred_network_transport(offered)

    @sn.deferrable
    def assert_path_as_asked(self):
        """Fails the case whose library used another path than it asked
        for, however good its figures (judgement.path)."""
        verdict = self.path_verdict()
        if verdict is not None and verdict.verdict == FAIL:
            raise sn.SanityError(path_words.sentence(verdict.to_json()))
        return True

    @run_before("sanity")
    def record_the_path(self):
        """The path the library said it used, and its verdict, in the
        record (before sanity: a case failed on its path keeps them)."""
        verdict = self.path_verdict()
        if verdict is None:
            return
        used = (self.launched_paths() or [datapath.unknown_path()])[0]
        self.record = {**self.record, "path": {**used, "verdict": verdict.to_json()}}
        self.keep_the_path_verdict()

    @run_before("performance")
    def keep_the_path_verdict(self):
        """A path that is not the one asked for, or not known, is one of
        the case's verdicts (after set_references, which writes them)."""
        verdict = (self.record.get("path") or {}).get("verdict")
        if not verdict or verdict["verdict"] == PASS:
            return
        entry = {"verdict": verdict["verdict"], "value": None, "lo": None, "hi": None,
                 "launches": verdict["launches"], "reason": path_words.sentence(verdict),
                 **{k: verdict.get(k, "") for k in ("code", "asked", "used", "launch",
                                                    "expected_device", "device")}}
        self.record["verdicts"] = {**(self.record.get("verdicts") or {}), "path": entry}
        self.record["verdict"] = case_verdict([self.record.get("verdict", PASS),
                                               verdict["verdict"]])

    def judged_by(self):
        """A `native` case is judged as the transport its library chose;
        before its run, as the MPI's likely choice (shared memory on one
        node, its preferred network transport across nodes)."""
        kind, transport = super().judged_by()
        if transport != NATIVE:
            return kind, transport
        # once the job has run: its stdout holds the library's words
        if os.path.exists(os.path.join(self.stagedir, str(self.job.stdout))):
            used = (self.launched_paths() or [datapath.unknown_path()])[0]["transport"]
            if used != datapath.UNKNOWN:
                return kind, used
        if self.placement == "intranode":
            return kind, "shm"
        return kind, self.expected_native_transport() or transport

    def series_label(self):
        """A `native` case is named by what its library chose: `native:shm`."""
        label = super().series_label()
        if self.transport != NATIVE:
            return label
        used = (self.launched_paths() or [datapath.unknown_path()])[0]["transport"]
        return " ".join(f"{NATIVE}:{used}" if word == NATIVE else word
                        for word in label.split())

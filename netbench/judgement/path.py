"""Whether a case's figures were measured on the path it asked for, by
what its library said it used in every launch (netbench.results.datapath).

  asked_other      the library used another transport than the case asked
                   for: the case fails, however good its figures
  silent_fallback  a `native` case across nodes of a partition declared an
                   RDMA class ran over a TCP stack or libfabric's `sockets`
                   or `udp` provider (FALLBACKS): it fails
  wrong_device     across nodes the library used another device than the
                   one the case expects (another HCA or port, IPoIB's
                   interface): it fails naming both
  shm_across_nodes a case whose ranks span nodes ran over shared memory:
                   the bytes never crossed the interconnect (UCX sees the
                   namespace nodes of one host as one node); it fails
  path_unknown     the library's words named no path a rule knows: the
                   case is inconclusive, never a silent pass

A PathVerdict carries its code and the words it rests on (asked, used,
the launch); report.datapath renders them as a sentence.  Pure: no
ReFrame, no files.
"""

import dataclasses

from ..results.datapath import UNKNOWN
from .model import FAIL, INCONCLUSIVE, PASS

#: the transport a case asks for when it forces nothing (mpi_families.yaml)
NATIVE = "native"
#: transports through a TCP stack (thresholds.yaml's `network` group)
TCP_TRANSPORTS = ("tcp", "ofi-tcp", "ucx-tcp")
#: what a `native` case on an RDMA fabric must not land on: a TCP stack,
#: or libfabric's sockets and udp providers (fi_sockets(7), fi_udp(7):
#: portability providers over the host's IP stack, no RDMA)
FALLBACKS = TCP_TRANSPORTS + ("ofi-sockets", "ofi-udp")
#: link layers of fabrics bought for RDMA (netbench.probe.linerate's
#: names): a class that matches only these is an RDMA class even where it
#: does not say `judges: rdma`
RDMA_LINK_LAYERS = ("infiniband", "omnipath", "slingshot")

#: the shared-memory transport (mpi_families.yaml)
SHM = "shm"

ASKED_OTHER, SILENT_FALLBACK, PATH_UNKNOWN = "asked_other", "silent_fallback", "path_unknown"
SHM_ACROSS_NODES = "shm_across_nodes"
WRONG_DEVICE = "wrong_device"


@dataclasses.dataclass(frozen=True)
class PathVerdict:
    verdict: str
    #: None when the path is the one asked for
    code: str = None
    asked: str = ""
    used: str = ""
    #: the launch (1-based) the verdict rests on, 0 for none
    launch: int = 0
    launches: int = 0
    evidence: str = ""
    #: the device the case expected ("" for none) and the one the library
    #: named in the launch the verdict rests on
    expected_device: str = ""
    device: str = ""

    def to_json(self):
        return dataclasses.asdict(self)


def rdma_class(spec):
    """Whether a thresholds.yaml class is an RDMA fabric's: it says so
    (`judges: rdma`), or every link layer it matches is an RDMA fabric's."""
    if not spec:
        return False
    if spec.get("judges") == "rdma":
        return True
    layers = (spec.get("match") or {}).get("link_layer") or []
    return bool(layers) and all(layer in RDMA_LINK_LAYERS for layer in layers)


def same_device(expected, used):
    """Whether the library's device `used` is the `expected` one: the same
    device name, and the same port where both name one (UCX says
    `mlx5_0:1`, libfabric's domain `mlx5_0`)."""
    want_name, _, want_port = expected.partition(":")
    name, _, port = used.partition(":")
    return name == want_name and (not want_port or not port or port == want_port)


def judge(asked, paths, across_nodes=False, rdma=False, expected_device=""):
    """The PathVerdict of a case that asked for transport `asked` and whose
    launches' libraries said `paths` ([{transport, provider, device,
    evidence}], one a launch that started).  A `native` case takes any
    path, but not a fallback (FALLBACKS) across nodes of an RDMA partition
    (`rdma`).  Across nodes, a device the library named is compared with
    `expected_device` when one is expected ("" compares none; a library
    that names no device is not compared)."""
    for i, path in enumerate(paths, 1):
        used = path.get("transport") or UNKNOWN
        device = str(path.get("device") or "")
        words = dict(asked=asked, used=used, launch=i, launches=len(paths),
                     evidence=path.get("evidence", ""), expected_device=expected_device,
                     device=device)
        if used == UNKNOWN:
            return PathVerdict(INCONCLUSIVE, PATH_UNKNOWN, **words)
        if asked != NATIVE and used != asked:
            return PathVerdict(FAIL, ASKED_OTHER, **words)
        if across_nodes and used == SHM:
            return PathVerdict(FAIL, SHM_ACROSS_NODES, **words)
        if asked == NATIVE and rdma and across_nodes and used in FALLBACKS:
            return PathVerdict(FAIL, SILENT_FALLBACK, **words)
        if across_nodes and expected_device and device and \
                not same_device(expected_device, device):
            return PathVerdict(FAIL, WRONG_DEVICE, **words)
    if not paths:
        return PathVerdict(INCONCLUSIVE, PATH_UNKNOWN, asked=asked, used=UNKNOWN,
                           expected_device=expected_device)
    return PathVerdict(PASS, asked=asked, used=paths[0]["transport"], launches=len(paths),
                       launch=1, evidence=paths[0].get("evidence", ""),
                       expected_device=expected_device,
                       device=str(paths[0].get("device") or ""))

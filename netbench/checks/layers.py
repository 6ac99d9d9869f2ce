"""The layers below the MPI, measured beside it in the same job (issue #34,
"the layers side by side"; reframe_checks/mpi_vs_tcp.py): whether the verbs
layer can run here (an RDMA device, perftest), its command, and the record's
`layers`: each layer's figures, parsed once, why a layer did not run, where
the loss is (netbench.judgement.layers) and the MPI's transport settings."""

import os
import shutil
from pathlib import Path

from ..judgement import layers as judged_layers
from ..probe import discovery
from ..results import perftest

#: where the kernel lists RDMA devices (rdma-core's ibv_devices reads it too)
RDMA_SYSFS = Path("/sys/class/infiniband")
#: perftest's bandwidth test, the verbs layer's curve beside the MPI's
VERBS_BW = "ib_write_bw"
#: spack.yaml's view folder of the tools no MPI is built into (iperf3, perftest)
TOOLS_VIEW = "tools"
#: the size the layers' figures are given at beside their peaks
AT_BYTES = 1 << 20


def rdma_devices(sysfs=RDMA_SYSFS):
    """The RDMA devices the kernel lists, sorted; [] without any."""
    try:
        return sorted(p.name for p in Path(sysfs).iterdir())
    except OSError:
        return []


def perftest_path():
    """Where perftest is looked for: spack.yaml's tools view, then PATH."""
    tools = Path(discovery.views_folder()) / TOOLS_VIEW / "bin"
    return os.pathsep.join([str(tools), os.environ.get("PATH", "")])


def verbs_problem(placement, sysfs=RDMA_SYSFS, search_path=None):
    """Why the verbs layer is not run beside the MPI, None when it is."""
    if not rdma_devices(sysfs):
        return f"no RDMA device: {sysfs} lists none"
    if not shutil.which(VERBS_BW, path=search_path or perftest_path()):
        return (f"no perftest ({VERBS_BW}) in views/{TOOLS_VIEW}/bin or on PATH: "
                f"spack.yaml builds it for the RDMA fabrics")
    if placement != "intranode":
        return "perftest between two nodes is not launched yet: only through one node's device"
    return None


def verbs_command(device, output, search_path=None):
    """ib_write_bw over every size through `device`, server and client on
    this node (a loopback through the HCA, as SuperBench's ib-loopback):
    the client's table in `output`."""
    tool = shutil.which(VERBS_BW, path=search_path or perftest_path()) or VERBS_BW
    return (f"{tool} -a -F -d {device} > {output}.server 2>&1 & sleep 1; "
            f"{tool} -a -F -d {device} localhost > {output} 2>&1; wait")


def layer_figures(rates):
    """A layer's figures for the record from {bytes: Mbit/s}."""
    if not rates:
        return {}
    peak_bytes = max(rates, key=rates.get)
    below = [b for b in rates if b <= AT_BYTES]
    at = max(below) if below else min(rates)
    return {"peak_mbps": rates[peak_bytes], "peak_bytes": peak_bytes,
            "at_bytes": at, "at_mbps": rates[at]}


def parse_verbs(text, where):
    """The verbs layer's rows from perftest's output, or a ValueError
    naming `where`."""
    try:
        return perftest.parse(text).rows
    except perftest.ParseError as err:
        raise ValueError(f"{where}: {err}") from err


def layers_record(curves, not_run, line_rate_mbps, mpi_env, added_env):
    """The record's `layers`: `curves` {layer: the rows of its first
    launch} with the MPI's under "mpi"; `not_run` {layer: why}."""
    measured = {name: judged_layers.layer_of_rows(name, rows) for name, rows in curves.items()}
    found = judged_layers.attribute({n: layer for n, layer in measured.items() if layer.rates},
                                    line_rate_mbps)
    return {"figures": {name: layer_figures(layer.rates) for name, layer in measured.items()},
            "not_run": dict(not_run),
            "attributions": [a.as_dict() for a in found],
            "mpi_env": {k: str(v) for k, v in mpi_env.items()},
            "added_env": {k: str(v) for k, v in added_env.items()}}

"""`python -m netbench.probe.verbspair --output FILE --meeting FOLDER`: the
verbs layer between a job's ranks 0 and 1, through each node's own RDMA
device (issue #34, the layers side by side): perftest's ib_write_bw, its
server with rank 1 and its client with rank 0, started by the job's
launcher like the MPI itself, so it runs on the nodes the MPI ran on and
reads their devices, not those of the host ReFrame runs on.

Each rank writes what its node has (host, first RDMA device, perftest, or
why it cannot run) to the meeting folder (the stage folder, which the job's
nodes share) and waits for the other's.  When either node cannot run it,
rank 0 writes one line, `# verbs not_run <why>` naming the node, and both
end.  Else rank 1 serves and rank 0, a second later, runs the client
against rank 1's address (127.0.0.1 when both ranks share a node: a
loopback through the HCA, as SuperBench's ib-loopback); the client's table
is the output (netbench/results/perftest.py).  Ranks past 1 do nothing.

The server listens on that one address (perftest's --bind_source_ip), never
on every interface: the connection it accepts sets up a memory region its
peer writes into.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..rfm import supervise
from . import discovery

#: where the kernel lists RDMA devices (rdma-core's ibv_devices reads it too)
RDMA_SYSFS = Path("/sys/class/infiniband")
#: perftest's bandwidth test, the verbs layer's curve beside the MPI's
VERBS_BW = "ib_write_bw"
#: spack.yaml's view folder of the tools no MPI is built into (iperf3, perftest)
TOOLS_VIEW = "tools"
#: the line that says why the verbs layer did not run
NOT_RUN = "# verbs not_run "
#: the MPI launchers' rank variables (the supervisor's), and srun's
RANK_VARIABLES = (*supervise.RANK_VARIABLES, "SLURM_PROCID")
#: how long a rank waits for the other's word, and the server for its client
MEETING_S = 60
SERVING_S = 600


def rank_of(env):
    """The rank the launcher gave this process; None outside a launch."""
    for name in RANK_VARIABLES:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


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


def node_status(sysfs=RDMA_SYSFS, search_path=None, host=None):
    """What this node offers the verbs layer: {"host", "device", "tool"},
    with "problem" instead of device and tool when it cannot run it."""
    host = host or socket.gethostname()
    devices = rdma_devices(sysfs)
    if not devices:
        return {"host": host, "problem": f"no RDMA device: {sysfs} lists none"}
    tool = shutil.which(VERBS_BW, path=search_path or perftest_path())
    if not tool:
        return {"host": host, "problem": (f"no perftest ({VERBS_BW}) in "
                                          f"views/{TOOLS_VIEW}/bin or on PATH: "
                                          f"spack.yaml builds it for the RDMA fabrics")}
    address = host_address(host)
    if not address:
        return {"host": host, "problem": f"its name {host} resolves to no IPv4 address "
                                         "for the client to reach the server at"}
    return {"host": host, "device": devices[0], "tool": tool, "address": address}


def host_address(host):
    """The IPv4 address the node's name resolves to, None when none."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return None


def why_not(client, server):
    """Why the pair cannot run the verbs layer (naming each node that
    cannot), None when both can."""
    found = []
    for status in (client, server):
        if status.get("problem") and status["host"] not in [h for h, _ in found]:
            found.append((status["host"], status["problem"]))
    if not found:
        return None
    return "; ".join(f"on {host}, {problem}" for host, problem in found)


def meeting_address(client, server):
    """Where the server listens and the client dials: rank 1's address, or
    loopback when the ranks share a node."""
    return "127.0.0.1" if client["host"] == server["host"] else server["address"]


def server_argv(client, server):
    return [server["tool"], "-a", "-F", "-d", server["device"],
            "--bind_source_ip", meeting_address(client, server)]


def client_argv(client, server):
    return [client["tool"], "-a", "-F", "-d", client["device"],
            meeting_address(client, server)]


def meet(folder, rank, status, deadline_s=MEETING_S):
    """Write this rank's status to `folder` and wait for the other rank's
    (0 <-> 1); a status with a problem when the other never wrote."""
    folder = Path(folder)
    mine = folder / f"rank{rank}.json"
    partial = mine.with_suffix(".partial")
    partial.write_text(json.dumps(status))
    partial.replace(mine)           # the other rank never reads half a file
    other = folder / f"rank{1 - rank}.json"
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            return json.loads(other.read_text())
        except (OSError, ValueError):
            time.sleep(0.1)
    return {"host": f"rank {1 - rank}'s node",
            "problem": f"it did not say within {deadline_s} s what it has"}


def run_pair(rank, output, folder, status):
    """Rank 0 and 1's part; the exit status."""
    other = meet(folder, rank, status)
    client, server = (status, other) if rank == 0 else (other, status)
    problem = why_not(client, server)
    if problem:
        if rank == 0:
            Path(output).write_text(f"{NOT_RUN}{problem}\n")
        return 0
    if rank == 1:
        with open(f"{output}.server", "w") as log:
            try:
                return subprocess.run(server_argv(client, server), stdout=log,
                                      stderr=subprocess.STDOUT, timeout=SERVING_S).returncode
            except subprocess.TimeoutExpired:
                log.write(f"\n{NOT_RUN}no client came within {SERVING_S} s\n")
                return 1
    time.sleep(1)                   # the server's listening socket first
    with open(output, "w") as log:
        return subprocess.run(client_argv(client, server), stdout=log,
                              stderr=subprocess.STDOUT).returncode


def not_run_reason(text):
    """The reason a verbs output gives for not running, None when it has
    none (a table, or nothing)."""
    for line in text.splitlines():
        if line.startswith(NOT_RUN):
            return line[len(NOT_RUN):].strip()
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="rank 0's file: the table, or why not")
    parser.add_argument("--meeting", required=True,
                        help="a folder both ranks' nodes share (the stage folder's)")
    args = parser.parse_args(argv)
    rank = rank_of(os.environ)
    if rank is None:
        parser.error("not started by an MPI launcher or srun: no rank variable "
                     f"({', '.join(RANK_VARIABLES)})")
    if rank > 1:
        return 0
    Path(args.meeting).mkdir(mode=0o700, exist_ok=True)
    return run_pair(rank, args.output, args.meeting, node_status())


if __name__ == "__main__":
    sys.exit(main())

"""A cluster's nodes and head: namespaces on the bridge, a node's sshd (in
its own mount and UTS namespaces, with its hostname and /etc overlay) and
the files it starts from.
"""

import contextlib
import os
import socket
import subprocess
import time

from .files import keygen
from .names import (HEAD_HOST, VclusterError, bridge_name, head_names, host_name,
                    namespace_name, veth_name)
from .netns import attach_namespace, delete_link, delete_namespace, record, run, shape
from .registry import make_dir, write_file

SSHD = "/usr/sbin/sshd"
SSHD_WAIT_S = 10.0


def make_head(name, subnet, link, undo):
    """The cluster's head namespace, at <subnet>.3 on the bridge: MPI's
    launchers (Hydra's mpiexec, Open MPI's prterun/orterun) listen on every
    address they have (0.0.0.0 and [::]) whatever their interface options
    say, so a cluster run starts them here, where every address they can
    bind is on the cluster's network or loopback, never on the host's own
    networks.  Control traffic only: the link is not shaped."""
    head = head_names(name)
    head["address"] = str(subnet.network_address + HEAD_HOST)
    attach_namespace(head["namespace"], head["veth"], bridge_name(name), head["address"],
                     subnet.prefixlen, link["switch_mtu"], undo)
    return head


def make_node(name, i, address, prefixlen, link, undo, bridge=None):
    """Node i on `bridge` (its leaf switch; default: the cluster's bridge)."""
    ns, veth = namespace_name(name, i), veth_name(name, i)
    in_ns = ["ip", "netns", "exec", ns]
    undo.push(delete_namespace, ns)
    run(["ip", "netns", "add", ns])
    undo.push(delete_link, veth)
    run(["ip", "link", "add", veth, "mtu", str(link["switch_mtu"]), "type", "veth",
         "peer", "name", "eth0", "mtu", str(link["mtu"]), "netns", ns])
    run(["ip", "link", "set", veth, "master", bridge or bridge_name(name), "up"])
    run(["ip", "-n", ns, "addr", "add", f"{address}/{prefixlen}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    shape([], veth, link)
    shape(in_ns, "eth0", link)
    return {"name": host_name(name, i), "namespace": ns, "address": str(address),
            "veth": veth, "sshd_pid": None}


def node_files(folder, node, cluster_hosts):
    """The node's sshd configuration and host key, and the upper layer of
    its /etc, all root's in the cluster's folder."""
    nd = folder / "nodes" / node["name"]
    make_dir(nd)
    for sub, mode in (("etc", 0o755), ("work", 0o700), ("run", 0o755)):
        make_dir(nd / sub, mode)
    write_file(nd / "etc" / "hostname", node["name"] + "\n")
    write_file(nd / "etc" / "hosts", cluster_hosts)
    keygen(nd / "ssh_host_ed25519_key", f"{node['name']} host key")
    write_file(nd / "sshd_config", "\n".join([
        "# netbench virtual cluster node: key authentication only, node address only",
        f"ListenAddress {node['address']}",
        "Port 22",
        f"HostKey {nd / 'ssh_host_ed25519_key'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}",
        f"PidFile {nd / 'run' / 'sshd.pid'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        # every key file and folder above it must be root's and writable by
        # root only (they are: /var/lib/netbench/clusters/<name>/)
        "StrictModes yes",
        # MPI launchers pass no environment over ssh; the jobs' environment
        # travels on their command line (Hydra) or with -x (Open MPI)
        "AcceptEnv LANG LC_*",
        "MaxStartups 100:30:200",
        "MaxSessions 100",
        "", ]))
    return nd


def start_sshd(node, nd):
    """sshd in the node's network namespace, inside new mount and UTS
    namespaces that give it the node's hostname and /etc overlay; every
    ssh session into the node inherits them."""
    script = (f"hostname {node['name']} && "
              f"mount -t overlay nb-etc -o lowerdir=/etc,upperdir={nd / 'etc'},"
              f"workdir={nd / 'work'} /etc && exec {SSHD} -D -e -f {nd / 'sshd_config'}")
    os.makedirs("/run/sshd", exist_ok=True)      # sshd's privilege separation dir
    fd = os.open(nd / "sshd.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600)
    with open(fd, "ab") as log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", node["namespace"], "unshare", "--mount", "--uts",
             "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    node["sshd_pid"], node["sshd_start"] = record(proc.pid)
    return proc


def wait_for_sshd(nodes, procs, folder):
    deadline = time.monotonic() + SSHD_WAIT_S
    pending = list(zip(nodes, procs))
    while pending:
        node, proc = pending[0]
        if proc.poll() is not None:
            log = (folder / "nodes" / node["name"] / "sshd.log").read_text().strip()
            last = log.splitlines()[-1] if log else f"exit code {proc.returncode}"
            raise VclusterError(f"sshd of {node['name']} exited: {last}")
        with contextlib.suppress(OSError):
            with socket.create_connection((node["address"], 22), timeout=0.5) as s:
                if s.recv(4).startswith(b"SSH"):
                    pending.pop(0)
                    continue
        if time.monotonic() > deadline:
            raise VclusterError(f"sshd of {node['name']} does not answer on "
                                f"{node['address']}:22 after {SSHD_WAIT_S:.0f} s")
        time.sleep(0.02)

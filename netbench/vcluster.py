"""A virtual cluster on one machine.

Each node is a network namespace with its own TCP stack, plus private mount
and UTS namespaces: its own hostname and its own `/etc` (an overlay on the
host's), and an sshd that listens on the node's address only and accepts
the cluster's key only.  The nodes hang off a bridge through veth links
whose rate a token bucket (`tbf`) can shape to a link class.  The host is
the cluster's head: it holds the bridge's first address and launches MPI
jobs into the nodes over ssh, as a login node would.

Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for network
benchmarking: one /24 per cluster.  Everything a cluster owns is named after
it (`nb-<name>` bridge, `nb-<name>-<i>` host-side veths, `nb-<name>-n<i>`
namespaces) and its files live in `.vcluster/<name>/`, so `down` and the
leftover check find all of it.
"""

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import paths
from .datafiles import load_yaml, require

LINKS_FILE = paths.DATA / "links.yaml"
BENCHMARK_NETWORK = ipaddress.ip_network("198.18.0.0/15")
NAME_PATTERN = r"[a-z][a-z0-9]{0,5}"    # keeps `nb-<name>-<i>` within IFNAMSIZ
MAX_NODES = 64
FIRST_NODE_HOST = 11                    # node i gets <subnet>.(10 + i)
SSHD = "/usr/sbin/sshd"
SSHD_WAIT_S = 10.0
STATE_FILE = "cluster.json"
SYSTEM_FILE = "reframe-system.json"


class VclusterError(Exception):
    """One line: what failed, and how to fix it where that is known."""


# ---- names and settings -----------------------------------------------------

def check_name(name):
    if not re.fullmatch(NAME_PATTERN, name or ""):
        raise VclusterError(f"cluster name {name!r}: use 1-6 lowercase letters or digits, "
                            "starting with a letter")
    return name


def bridge_name(name):
    return f"nb-{name}"


def veth_name(name, i):
    return f"nb-{name}-{i}"


def namespace_name(name, i):
    return f"nb-{name}-n{i}"


def host_name(name, i):
    return f"{name}-n{i}"


def system_name(name):
    return f"vcluster-{name}"


def cluster_folder(name):
    return paths.VCLUSTERS / name


def parse_rate(text):
    """A tc rate (`100mbit`, `1gbit`, `2.5gbit`, `500kbit`) in Mbit/s;
    None for `none` (an unshaped link)."""
    if text in (None, "", "none"):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)bit", text.strip().lower())
    if not m:
        raise VclusterError(f"--link {text!r}: give a rate such as 100mbit or 1gbit, or none")
    scale = {"": 1e-6, "k": 1e-3, "m": 1.0, "g": 1e3}[m.group(2)]
    mbps = float(m.group(1)) * scale
    if mbps <= 0:
        raise VclusterError(f"--link {text!r}: the rate must be positive")
    return mbps


def load_link_classes(path=LINKS_FILE):
    data = load_yaml(path)
    for key, kind in (("min_burst_over_mtu", int), ("default_burst_us", int),
                      ("latency_ms", int), ("classes", dict)):
        require(data, key, kind, path, "")
    for cname, spec in data["classes"].items():
        require(spec, "rate_mbps", (int, float), path, f"classes.{cname}")
        require(spec, "burst_bytes", int, path, f"classes.{cname}")
    return data


def link_settings(rate="none", mtu=1500, interconnect=None, classes=None, switch_mtu=None):
    """What the links of a cluster are: rate, tbf bucket, MTU and the
    interconnect class its ReFrame partition declares.  `mtu` is the nodes'
    interface MTU; `switch_mtu` (at least `mtu`) that of the bridge and the
    host ends of the links, i.e. the largest frame the "switch" carries, so
    that a node tuned to jumbo frames (tune.yml) can use them."""
    for option, value in (("--mtu", mtu), ("--switch-mtu", switch_mtu or mtu)):
        if not 576 <= int(value) <= 9216:
            raise VclusterError(f"{option} {value}: use 576 to 9216 (veth and Ethernet jumbo "
                                f"frames)")
    switch_mtu = max(int(switch_mtu or mtu), int(mtu))
    mbps = parse_rate(rate)
    if mbps is None:
        return {"rate": "none", "rate_mbps": None, "burst_bytes": None, "latency_ms": None,
                "mtu": int(mtu), "switch_mtu": switch_mtu, "interconnect": interconnect or "veth"}
    classes = classes or load_link_classes()
    match = next((c for c, spec in classes["classes"].items()
                  if float(spec["rate_mbps"]) == mbps), None)
    burst = (classes["classes"][match]["burst_bytes"] if match
             else int(mbps * 1e6 / 8 * classes["default_burst_us"] * 1e-6))
    burst = max(burst, switch_mtu + classes["min_burst_over_mtu"])
    return {"rate": rate.strip().lower(), "rate_mbps": mbps, "burst_bytes": burst,
            "latency_ms": classes["latency_ms"], "mtu": int(mtu), "switch_mtu": switch_mtu,
            "interconnect": interconnect or match or f"emulated-{rate.strip().lower()}"}


# ---- commands -----------------------------------------------------------------

def run(argv, check=True, timeout=30):
    """Run a system command; VclusterError naming it on failure."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise VclusterError(f"{' '.join(argv)}: {err}") from err
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[0]
        raise VclusterError(f"{' '.join(argv)}: {detail}")
    return proc


def require_root():
    if os.geteuid() != 0:
        raise VclusterError("the virtual cluster needs root (network namespaces, links, "
                            "mounts): run it with sudo")
    for tool in ("ip", "tc", "unshare", "ssh", "ssh-keygen", SSHD):
        if not shutil.which(tool):
            package = "openssh-server" if tool == SSHD else "openssh-client" \
                if tool.startswith("ssh") else "iproute2/util-linux"
            raise VclusterError(f"{tool} not found: install {package}")


@contextlib.contextmanager
def locked():
    """One `up`/`down`/`mtu` at a time on this machine."""
    os.makedirs(paths.VCLUSTERS, exist_ok=True)
    with open(paths.VCLUSTERS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# ---- state --------------------------------------------------------------------

def load_state(name):
    path = cluster_folder(name) / STATE_FILE
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise VclusterError(f"{path}: unreadable cluster state ({err}): "
                            f"run `netbench vcluster down --name {name}`") from err


def write_json(path, data):
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def cluster_names():
    if not paths.VCLUSTERS.is_dir():
        return []
    return sorted(p.name for p in paths.VCLUSTERS.iterdir()
                  if p.is_dir() and re.fullmatch(NAME_PATTERN, p.name))


def free_subnet(name):
    """The first /24 of 198.18.0.0/15 no other cluster (or host route)
    uses."""
    used = set()
    for other in cluster_names():
        state = load_state(other) if other != name else None
        if state:
            used.add(state["network"])
    routes = run(["ip", "-4", "route", "show"], check=False).stdout
    for subnet in BENCHMARK_NETWORK.subnets(new_prefix=24):
        if str(subnet) not in used and str(subnet) not in routes:
            return subnet
    raise VclusterError("no free /24 left in 198.18.0.0/15")


def alive(pid):
    """True while `pid` runs; a zombie is dead (on machines whose init
    does not reap, zombies of killed nodes linger)."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, TypeError, ValueError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def namespaces():
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def links():
    return sorted(os.listdir("/sys/class/net"))


# ---- bring-up -----------------------------------------------------------------

class Undo:
    """Actions that take back what bring-up did, run newest first."""

    def __init__(self):
        self.actions = []

    def push(self, fn, *args):
        self.actions.append((fn, args))

    def run(self):
        errors = []
        for fn, args in reversed(self.actions):
            try:
                fn(*args)
            except Exception as err:         # keep undoing the rest
                errors.append(str(err))
        self.actions.clear()
        return errors


def keygen(path, comment):
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def shape(argv_prefix, dev, link):
    """tbf on one end of a link (egress); none for an unshaped link."""
    if link["rate_mbps"] is None:
        return
    run(argv_prefix + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                       "rate", f"{link['rate_mbps']}mbit", "burst", str(link["burst_bytes"]),
                       "latency", f"{link['latency_ms']}ms"])


def make_node(name, i, address, prefixlen, link, undo):
    ns, veth = namespace_name(name, i), veth_name(name, i)
    in_ns = ["ip", "netns", "exec", ns]
    run(["ip", "netns", "add", ns])
    undo.push(delete_namespace, ns)
    run(["ip", "link", "add", veth, "mtu", str(link["switch_mtu"]), "type", "veth",
         "peer", "name", "eth0", "mtu", str(link["mtu"]), "netns", ns])
    undo.push(run, ["ip", "link", "del", veth], False)
    run(["ip", "link", "set", veth, "master", bridge_name(name), "up"])
    run(["ip", "-n", ns, "addr", "add", f"{address}/{prefixlen}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    shape([], veth, link)
    shape(in_ns, "eth0", link)
    return {"name": host_name(name, i), "namespace": ns, "address": str(address),
            "veth": veth, "sshd_pid": None}


def node_files(folder, node, cluster_hosts, key_pub):
    """The node's sshd configuration and the upper layer of its /etc."""
    nd = folder / "nodes" / node["name"]
    for sub in ("etc", "work", "run"):
        os.makedirs(nd / sub, exist_ok=True)
    (nd / "etc" / "hostname").write_text(node["name"] + "\n")
    (nd / "etc" / "hosts").write_text(cluster_hosts)
    keygen(nd / "ssh_host_ed25519_key", f"{node['name']} host key")
    (folder / "authorized_keys").write_text(key_pub)
    (nd / "sshd_config").write_text("\n".join([
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
        # the key files live in the project folder, not in ~/.ssh
        "StrictModes no",
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
    with open(nd / "sshd.log", "ab") as log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", node["namespace"], "unshare", "--mount", "--uts",
             "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    node["sshd_pid"] = proc.pid
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


def client_files(folder, state):
    """ssh configuration and agent, MPI hostfile, Ansible inventory."""
    ssh_config = folder / "ssh_config"
    ssh_config.write_text("\n".join([
        "# ssh into the nodes of netbench virtual cluster " + state["name"],
        "Host *",
        f"  IdentityFile {folder / 'id_ed25519'}",
        "  IdentitiesOnly yes",
        "  User root",
        "  StrictHostKeyChecking no",
        f"  UserKnownHostsFile {folder / 'known_hosts'}",
        "  BatchMode yes",
        "  LogLevel ERROR",
        # shared connections outlive a node's sshd and keep its old mount
        # namespace (platform-facts.md): one connection per session
        "  ControlMaster no",
        "  ControlPath none",
        "  ConnectTimeout 5",
        "", ]))
    agent = folder / "ssh"
    agent.write_text(f'#!/bin/sh\n# ssh into the nodes of cluster {state["name"]}\n'
                     f'exec ssh -F {ssh_config} "$@"\n')
    agent.chmod(0o755)
    hostfile = folder / "hostfile"
    hostfile.write_text("".join(n["address"] + "\n" for n in state["nodes"]))
    inventory = folder / "inventory.ini"
    lines = [f"# Ansible inventory of netbench virtual cluster {state['name']}",
             f"[{state['name']}]"]
    lines += [f"{n['name']} ansible_host={n['address']}" for n in state["nodes"]]
    lines += ["", f"[{state['name']}:vars]", "ansible_user=root",
              f"ansible_ssh_private_key_file={folder / 'id_ed25519'}",
              f"ansible_ssh_common_args='-F {ssh_config}'",
              # Ansible's default ssh_args (ControlMaster=auto, ControlPersist)
              # override ssh_config: shared connections outlive a node's sshd
              # and hang on a node whose link is down
              "ansible_ssh_args='-C -o ControlMaster=no -o ControlPath=none'",
              "ansible_python_interpreter=/usr/bin/python3", ""]
    inventory.write_text("\n".join(lines))
    group_vars = folder / "group_vars"
    group_vars.mkdir(exist_ok=True)
    (group_vars / f"{state['name']}.yml").write_text(TUNING_VARS)
    return {"ssh_config": str(ssh_config), "ssh_agent": str(agent), "hostfile": str(hostfile),
            "inventory": str(inventory), "ssh_key": str(folder / "id_ed25519")}


# Ansible reads group_vars/ next to an inventory: how tune.yml must treat
# namespace nodes (see playbooks/roles/*/meta/argument_specs.yml)
TUNING_VARS = """---
# The nodes of a netbench virtual cluster are network namespaces on one host.
# Their NICs are veths (not in any profile's driver list).
tune_nic_drivers: [veth]
# They share the host's CPUs and /boot: CPU governors and the initramfs are
# the host's, never the node's to change.
tune_cpu_enabled: false
tune_modules_rebuild_initramfs: false
"""


def reframe_system(state):
    """The ReFrame system of a cluster; netbench's configuration adds the
    discovered MPI environments to its partition."""
    link = state["link"]
    extras = {"interconnect": link["interconnect"], "nodes": len(state["nodes"]),
              "mtu": link["mtu"], "vcluster": state["name"],
              # sysfs counters of the host ends of the links: the checks
              # prove that internode traffic crossed them
              "link_counters": [f"/sys/class/net/{n['veth']}/statistics"
                                for n in state["nodes"]],
              "set_mtu": [sys.executable, "-m", "netbench.cli", "vcluster", "mtu",
                          "--name", state["name"]]}
    if link["rate_mbps"]:
        extras["line_rate_mbps"] = link["rate_mbps"]
    partitions = [{
        "name": "nodes",
        "descr": "MPI launched from this host over ssh into every node",
        "scheduler": "local",
        "launcher": "netbench-ssh",
        "environs": [],
        "max_jobs": 1,
        "env_vars": [[k, v] for k, v in launch_environment(state).items()],
        "extras": extras,
    }]
    return {
        "name": system_name(state["name"]),
        "descr": (f"netbench virtual cluster {state['name']}: {len(state['nodes'])} namespace "
                  f"nodes, links {link['rate']} MTU {link['mtu']}"),
        "hostnames": [rf"^{state['name']}-n\d+$"],
        "modules_system": "nomod",
        "partitions": partitions,
    }


def reframe_systems(state):
    """The cluster's ReFrame systems: the ssh one, and with Slurm one per
    Slurm launch path.  One partition each: ReFrame runs the partitions of
    a system side by side, and the nodes (and their 2 shared CPUs, and the
    links whose MTU the checks change) cannot take two suites at once."""
    system = reframe_system(state)
    if not state.get("slurm"):
        return [system]
    return [system] + slurm_module().reframe_systems(state, system)


def up(name="vc", nodes=2, rate="none", mtu=1500, interconnect=None, switch_mtu=None,
       slurm=False):
    """Bring a cluster up; returns (state, created).  An existing cluster is
    left as it is (created False).  `slurm`: with a Slurm controller and a
    slurmd per node (netbench.slurm)."""
    check_name(name)
    if not 1 <= nodes <= MAX_NODES:
        raise VclusterError(f"--nodes {nodes}: use 1 to {MAX_NODES}")
    link = link_settings(rate, mtu, interconnect, switch_mtu=switch_mtu)
    require_root()
    if slurm:
        slurm_module().require_slurm()
    with locked():
        existing = load_state(name)
        if existing:
            return existing, False
        if cluster_folder(name).exists() or leftovers(name):
            raise VclusterError(f"cluster {name}: remnants of an earlier cluster exist: "
                                f"run `netbench vcluster down --name {name}` first")
        undo = Undo()
        try:
            return build(name, nodes, link, undo, slurm), True
        except BaseException as err:
            problems = undo.run()
            if problems and isinstance(err, VclusterError):
                raise VclusterError(f"{err}; rollback incomplete ({'; '.join(problems)}): "
                                    f"run `netbench vcluster down --name {name}`") from err
            raise


def slurm_module():
    from . import slurm            # imports this module
    return slurm


def build(name, nnodes, link, undo, with_slurm=False):
    folder = cluster_folder(name)
    os.makedirs(folder)
    undo.push(shutil.rmtree, folder, True)
    subnet = free_subnet(name)
    hosts = list(subnet.hosts())
    head = hosts[0]
    addresses = [hosts[FIRST_NODE_HOST - 2 + i] for i in range(1, nnodes + 1)]
    keygen(folder / "id_ed25519", f"netbench vcluster {name}")
    br = bridge_name(name)
    run(["ip", "link", "add", br, "mtu", str(link["switch_mtu"]), "type", "bridge"])
    undo.push(run, ["ip", "link", "del", br], False)
    run(["ip", "addr", "add", f"{head}/{subnet.prefixlen}", "dev", br])
    run(["ip", "link", "set", br, "up"])
    nodes = [make_node(name, i, addr, subnet.prefixlen, link, undo)
             for i, addr in enumerate(addresses, 1)]
    cluster_hosts = "".join(["127.0.0.1\tlocalhost\n", f"{head}\t{name}-head\n"]
                            + [f"{n['address']}\t{n['name']}\n" for n in nodes])
    key_pub = (folder / "id_ed25519.pub").read_text()
    procs = []
    for node in nodes:
        nd = node_files(folder, node, cluster_hosts, key_pub)
        procs.append(start_sshd(node, nd))
        undo.push(stop_processes, [node["namespace"]], [node["sshd_pid"]])
    wait_for_sshd(nodes, procs, folder)
    state = {"name": name, "system": system_name(name), "network": str(subnet),
             "head_address": str(head), "bridge": br, "link": link, "nodes": nodes,
             "folder": str(folder), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    state["files"] = client_files(folder, state)
    if with_slurm:
        state["slurm"] = slurm_module().start(state, undo)
        state["files"]["slurm_conf"] = state["slurm"]["conf"]
    state["files"]["reframe_system"] = str(folder / SYSTEM_FILE)
    write_json(folder / SYSTEM_FILE, reframe_systems(state))
    write_json(folder / STATE_FILE, state)
    return state


# ---- teardown -----------------------------------------------------------------

def namespace_pids(ns):
    out = run(["ip", "netns", "pids", ns], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def stop_processes(namespaces_, extra_pids=()):
    """SIGTERM, then SIGKILL, every process in the nodes' namespaces (sshd,
    sessions, stray MPI ranks)."""
    pids = {p for ns in namespaces_ for p in namespace_pids(ns)} | {p for p in extra_pids if p}
    pids = {p for p in pids if alive(p)}
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pids = {p for p in pids if alive(p) and not reap(p)}
            if not pids:
                return
            time.sleep(0.01)
    if pids:
        raise VclusterError(f"processes {sorted(pids)} of {', '.join(namespaces_)} "
                            "survive SIGKILL")


def reap(pid):
    """Collect a child of ours that exited (sshd started by this process)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return False


def delete_namespace(ns):
    stop_processes([ns])
    run(["ip", "netns", "del", ns], check=False)


def down(name="vc"):
    """Take a cluster down; returns False when there was none."""
    check_name(name)
    require_root()
    with locked():
        state = load_state(name)
        if state is None and not cluster_folder(name).exists() and not leftovers(name):
            return False
        teardown(name, state)
        return True


def teardown(name, state):
    nodes = state["nodes"] if state else []
    slurm = slurm_module()
    # ssh sessions and launchers on the host that use the cluster's files go
    # too (munged among them): they would only wait for nodes that no longer
    # exist
    clients = [pid for pid, kind in processes_using(cluster_folder(name))
               if kind == "process" and pid != os.getpid()]
    stop_processes([n["namespace"] for n in nodes] + slurm.namespaces(state or {}),
                   [n.get("sshd_pid") for n in nodes] + slurm.pids(state or {}) + clients)
    # also whatever a broken bring-up left behind under the cluster's names
    for ns in owned_namespaces(name):
        delete_namespace(ns)
    run(["ip", "link", "del", bridge_name(name)], check=False)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and owned_links(name):
        for link in owned_links(name):
            run(["ip", "link", "del", link], check=False)
        time.sleep(0.02)
    # only now: deleting a node's upper dir while mounted would detach it
    shutil.rmtree(cluster_folder(name), ignore_errors=True)
    rest = leftovers(name)
    if rest:
        raise VclusterError(f"cluster {name}: still present after down: {'; '.join(rest)}")


def owned_namespaces(name):
    """Nodes `nb-<name>-n<i>` and Slurm's controller `nb-<name>-ctl`."""
    return [ns for ns in namespaces() if ns.startswith(f"nb-{name}-")]


def owned_links(name):
    return [link for link in links() if link == bridge_name(name)
            or link.startswith(f"nb-{name}-")]


def processes_using(folder):
    """PIDs whose command line or mounts mention the cluster folder."""
    found = []
    needle = str(folder)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
            if needle in cmdline:
                found.append((int(pid), "process"))
                continue
            if needle in Path(f"/proc/{pid}/mountinfo").read_text():
                found.append((int(pid), "mount"))
    return found


def leftovers(name):
    """Everything of cluster `name` that exists on this machine, as text;
    empty once `down` has done its job."""
    rest = [f"namespace {ns}" for ns in owned_namespaces(name)]
    rest += [f"link {link}" for link in owned_links(name)]
    rest += [f"{kind} in pid {pid}" for pid, kind in processes_using(cluster_folder(name))
             if pid != os.getpid()]
    if cluster_folder(name).exists():
        rest.append(f"folder {cluster_folder(name)}")
    return rest


# ---- status and changes -------------------------------------------------------

def status():
    """Every cluster with its nodes, links, files and health."""
    clusters = []
    for name in cluster_names():
        state = load_state(name)
        if state is None:
            clusters.append({"name": name, "healthy": False,
                             "problem": "incomplete: run `netbench vcluster down`"})
            continue
        problems = [f"{n['name']}: sshd (pid {n['sshd_pid']}) is not running"
                    for n in state["nodes"] if not alive(n["sshd_pid"])]
        problems += [f"{n['name']}: namespace {n['namespace']} is missing"
                     for n in state["nodes"] if n["namespace"] not in namespaces()]
        problems += slurm_module().problems(state)
        state["healthy"] = not problems
        state["problems"] = problems
        clusters.append(state)
    return clusters


def set_mtu(name, mtu):
    """Change the MTU of every link of a running cluster (seed 004's MTU
    sweep); the tbf bucket grows with it where needed."""
    check_name(name)
    require_root()
    with locked():
        state = load_state(name)
        if state is None:
            raise VclusterError(f"cluster {name} is not up")
        link = link_settings(state["link"]["rate"], mtu, state["link"]["interconnect"],
                             switch_mtu=max(int(mtu), state["link"].get("switch_mtu", 0)))
        for node in state["nodes"]:
            ns = ["ip", "netns", "exec", node["namespace"]]
            run(["ip", "link", "set", node["veth"], "mtu", str(link["switch_mtu"])])
            run(["ip", "-n", node["namespace"], "link", "set", "eth0", "mtu", str(mtu)])
            shape([], node["veth"], link)
            shape(ns, "eth0", link)
        run(["ip", "link", "set", state["bridge"], "mtu", str(link["switch_mtu"])])
        state["link"] = link
        write_json(Path(state["folder"]) / STATE_FILE, state)
        write_json(Path(state["folder"]) / SYSTEM_FILE, reframe_systems(state))
        return state


def link_mtus(state):
    """The MTU each node's interface has now."""
    out = {}
    for node in state["nodes"]:
        info = json.loads(run(["ip", "-j", "-n", node["namespace"], "link", "show", "eth0"]).stdout)
        out[node["name"]] = info[0]["mtu"]
    return out


def link_bytes(state):
    """Bytes received plus sent on the host end of each node's link."""
    total = {}
    for node in state["nodes"]:
        stats = Path(f"/sys/class/net/{node['veth']}/statistics")
        total[node["name"]] = sum(int((stats / f).read_text()) for f in ("rx_bytes", "tx_bytes"))
    return total


def launch_environment(state):
    """What netbench.launch needs to know about the cluster (the variables
    its ReFrame partition sets)."""
    return {"NETBENCH_HOSTFILE": state["files"]["hostfile"],
            "NETBENCH_SSH_AGENT": state["files"]["ssh_agent"],
            "NETBENCH_HEAD_ADDRESS": state["head_address"],
            "NETBENCH_NETWORK": state["network"]}


def ssh_command(state, node_name, *argv):
    node = next(n for n in state["nodes"] if n["name"] == node_name)
    return [state["files"]["ssh_agent"], node["address"], *argv]


def running_systems():
    """ReFrame system descriptions of the clusters that are up."""
    systems = []
    for name in cluster_names():
        path = cluster_folder(name) / SYSTEM_FILE
        with contextlib.suppress(OSError, ValueError):
            if (cluster_folder(name) / STATE_FILE).exists():
                found = json.loads(path.read_text())
                # one system (a cluster brought up before Slurm), or a list
                systems += [found] if isinstance(found, dict) else found
    return systems

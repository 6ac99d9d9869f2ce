"""A real Slurm on a virtual cluster (`netbench vcluster up --slurm`).

One munged on the host; slurmctld in a controller namespace of its own
(`<name>-ctl`, on the cluster's bridge, so it listens on no address of the
host); one slurmd in each node, inside the node's network, mount and UTS
namespaces (jobs see the node's hostname, address and /etc).  Everything
(configuration, state, spool, logs, the munge key) lives in the cluster's
root-owned folder, `/var/lib/netbench/clusters/<name>/slurm/`, checked before
any daemon starts; the ports are not Slurm's defaults, and each daemon runs
in the foreground of a process netbench started, so `down` stops them by
PID (and start time).

Clients (sbatch, srun, squeue, ReFrame) find the cluster through
SLURM_CONF, which `netbench vcluster status --json` gives as
`slurm.conf`.
"""

import ipaddress
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import jinja2

from .. import paths
from .names import (CONTROLLER_HOST, VclusterError, cluster_folder, controller_names,
                    slurm_system_names)
from .netns import attach_namespace, is_recorded, record, stop_processes
from .registry import make_dir, verify_tree, write_file

DAEMONS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd"}
CLIENTS = ("sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
CTLD_PORT = 16817
SLURMD_PORT = 16818
SLURMD_TIMEOUT_S = 10
MAX_TIME_MIN = 30
START_WAIT_S = 20.0


def require_slurm():
    for tool in (*DAEMONS, *CLIENTS):
        if not shutil.which(tool):
            package = "munge" if tool == "munged" else "slurm-wlm"
            raise VclusterError(f"--slurm: {tool} not found: install {package} "
                                "(apt-get install slurm-wlm munge)")


def slurm_folder(state):
    return cluster_folder(state["name"]) / "slurm"


def available_memory_mb():
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    # leave the host most of it: Slurm only books it, nothing enforces it
    return max(256, pages // (1024 * 1024) // 4)


def write_config(state, controller, folder):
    """slurm.conf and the munge key, with the folders the daemons expect:
    root's, writable by root only (munged wants its socket folder open to
    all for reading, its key readable by root only)."""
    make_dir(folder)
    for sub, mode in (("state", 0o700), ("munge", 0o755), ("spool", 0o755),
                      *((f"spool/{n['name']}", 0o755) for n in state["nodes"])):
        make_dir(folder / sub, mode)
    key = folder / "munge" / "munge.key"
    write_file(key, secrets.token_bytes(1024), mode=0o600)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(paths.TEMPLATES),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    conf = folder / "slurm.conf"
    write_file(conf, env.get_template("slurm.conf.j2").render(
        cluster=state["name"], conf=conf, folder=folder, controller=controller,
        ctld_port=CTLD_PORT, slurmd_port=SLURMD_PORT,
        munge_socket=folder / "munge" / "munge.socket", slurmd_timeout=SLURMD_TIMEOUT_S,
        nodes=state["nodes"], cpus=os.cpu_count() or 1, memory_mb=available_memory_mb(),
        partition=state["name"], max_time_min=MAX_TIME_MIN))
    return conf


def make_controller(state, undo):
    """The controller's namespace on the cluster's bridge."""
    ctl = controller_names(state["name"])
    network = ipaddress.ip_network(state["network"])
    ctl["address"] = str(network.network_address + CONTROLLER_HOST)
    attach_namespace(ctl["namespace"], ctl["veth"], state["bridge"], ctl["address"],
                     network.prefixlen, state["link"]["switch_mtu"], undo)
    return ctl


def spawn(argv, log):
    """A daemon in the foreground of a new session, output to `log`."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with open(fd, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)


def start(state, undo):
    """Bring Slurm up on a cluster whose nodes run; returns state["slurm"]."""
    require_slurm()
    folder = slurm_folder(state)
    ctl = make_controller(state, undo)
    conf = write_config(state, ctl, folder)
    munge = folder / "munge"
    # each node's /tmp, the only folder open to all, with root's mount points
    # for what must stay visible in it (made before it opens: nobody can
    # put a link in their place)
    node_tmps = [folder / "spool" / n["name"] / "tmp" for n in state["nodes"]]
    for node_tmp in node_tmps:
        make_dir(node_tmp)
        for top in tops_under_tmp(folder, paths.REPO):
            make_dir(node_tmp / top.name)
    verify_tree(cluster_folder(state["name"]), skip=node_tmps)
    pids, starts = {}, {}
    procs = {}

    def started(key, proc, namespaces=()):
        pids[key], starts[key] = record(proc.pid)
        procs[key] = proc
        undo.push(stop_processes, list(namespaces), [[pids[key], starts[key]]],
                  cluster_folder(state["name"]))

    started("munged", spawn(["munged", "--foreground",
                             f"--socket={munge / 'munge.socket'}",
                             f"--key-file={munge / 'munge.key'}",
                             f"--pid-file={munge / 'munged.pid'}",
                             f"--seed-file={munge / 'munged.seed'}",
                             f"--log-file={munge / 'munged.log'}"], folder / "munged.out"))
    wait_for(lambda: (munge / "munge.socket").exists(), "munged", procs, folder)
    # its own UTS namespace: slurmctld only starts on the host SlurmctldHost names
    started("slurmctld", spawn(
        ["ip", "netns", "exec", ctl["namespace"], "unshare", "--uts", "sh", "-c",
         f"hostname {ctl['name']} && exec slurmctld -D -c -f {conf}"],
        folder / "slurmctld.out"), [ctl["namespace"]])
    for node in state["nodes"]:
        # the namespaces of the node's sshd (the node's hostname, address and
        # /etc), plus a mount namespace of Slurm's own that gives the jobs the
        # node's own /tmp: PMIx keeps per-step folders there whose names
        # collide between nodes sharing one
        spool = folder / "spool" / node["name"]
        os.chmod(spool / "tmp", 0o1777)
        started(f"slurmd:{node['name']}", spawn(
            ["nsenter", "-t", str(node["sshd_pid"]), "-m", "-u", "-n",
             "unshare", "--mount", "--propagation", "private", "sh", "-c",
             f"{cgroup_mount_script()} {own_tmp_script(spool / 'tmp', folder, paths.REPO)} && "
             f"exec slurmd -D -f {conf} -N {node['name']}"],
            spool / "slurmd.out"), [node["namespace"]])
    slurm = {"conf": str(conf), "partition": state["name"], "controller": ctl,
             "ctld_port": CTLD_PORT, "slurmd_port": SLURMD_PORT, "pids": pids,
             "starts": starts,
             "folder": str(folder), "reframe": slurm_system_names(state["name"])}
    env = {**os.environ, "SLURM_CONF": str(conf)}
    wait_for(lambda: nodes_idle(env, len(state["nodes"])), "slurmctld and slurmd", procs,
             folder)
    return slurm


def own_tmp_script(node_tmp, *folders):
    """Shell commands that mount `node_tmp` over /tmp in a node's mount
    namespace.  Where one of `folders` (the cluster's Slurm folder; the
    owning checkout, whose stage folders the jobs run in) lies under /tmp
    itself, as a repository cloned there does, its top folder under /tmp is
    bound into the node's /tmp first (on a mount point `start` made), so
    that slurmd and the jobs still find it."""
    keep = "".join(f"mount --bind {top} {node_tmp / top.name} && "
                   for top in tops_under_tmp(*folders))
    return f"{keep}mount --rbind {node_tmp} /tmp"


def tops_under_tmp(*folders):
    """The folders directly under /tmp that hold one of `folders`."""
    tops = []
    for folder in folders:
        top = _top_under_tmp(Path(folder).resolve())
        if top is not None and top not in tops:
            tops.append(top)
    return tops


def _top_under_tmp(path):
    """The folder directly under /tmp that holds `path`, or None."""
    tmp = Path("/tmp").resolve()
    return tmp / path.relative_to(tmp).parts[0] if path.is_relative_to(tmp) else None


def cgroup_mount_script(mounts="/proc/self/mounts"):
    """Shell commands that give a node's mount namespace the host's cgroup
    mounts.  slurmd stats them at start even with cgroup-free plugins, and a
    node's /sys is a fresh sysfs (`ip netns exec`) without them; mounting
    the same hierarchies again shares the host's (v1 or v2), adds nothing."""
    commands = []
    with open(mounts) as f:
        for line in f:
            source, target, fstype, options = line.split()[:4]
            if target == "/sys/fs/cgroup" or target.startswith("/sys/fs/cgroup/"):
                commands.append(f"mountpoint -q {target} || {{ mkdir -p {target} && "
                                f"mount -t {fstype} -o {options} {source} {target}; }};")
    return " ".join(commands)


def nodes_idle(env, count):
    proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True,
                          text=True, env=env, timeout=10, stdin=subprocess.DEVNULL)
    states = [line.split()[1] for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode == 0 and len(states) == count and all(
        s == "idle" for s in states)


def wait_for(ready, what, procs, folder):
    """Until `ready()`; a daemon that exits meanwhile ends the wait with the
    last line of its log."""
    deadline = time.monotonic() + START_WAIT_S
    while not ready():
        for key, proc in procs.items():
            if proc.poll() is not None:
                raise VclusterError(f"--slurm: {key} exited ({proc.returncode}): "
                                    f"{last_log_line(folder, key)}")
        if time.monotonic() > deadline:
            raise VclusterError(f"--slurm: {what} not ready after {START_WAIT_S:.0f} s "
                                   f"(logs in {folder})")
        time.sleep(0.1)


def daemon_logs(folder, key):
    """Where a daemon (`munged`, `slurmctld`, `slurmd:<node>`) writes: its
    log file, then what it printed."""
    if key == "munged":
        return [folder / "munge" / "munged.log", folder / "munged.out"]
    if key == "slurmctld":
        return [folder / "slurmctld.log", folder / "slurmctld.out"]
    spool = folder / "spool" / key.split(":")[-1]
    return [spool / "slurmd.log", spool / "slurmd.out"]


def last_log_line(folder, key):
    for path in daemon_logs(folder, key):
        lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        if lines:
            return lines[-1]
    return "no log"


def records(state):
    """[pid, start time] of each daemon of the cluster's Slurm."""
    slurm = state.get("slurm") or {}
    return [[pid, (slurm.get("starts") or {}).get(key)]
            for key, pid in (slurm.get("pids") or {}).items()]


def problems(state):
    """Daemons of the cluster's Slurm that are not running."""
    slurm = state.get("slurm") or {}
    return [f"Slurm: {key} (pid {pid}) is not running"
            for key, pid in (slurm.get("pids") or {}).items()
            if not is_recorded([pid, (slurm.get("starts") or {}).get(key)])]

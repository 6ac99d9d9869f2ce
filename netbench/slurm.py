"""A real Slurm on a virtual cluster (`netbench vcluster up --slurm`).

One munged on the host; slurmctld in a controller namespace of its own
(`<name>-ctl`, on the cluster's bridge, so it listens on no address of the
host); one slurmd in each node, inside the node's network, mount and UTS
namespaces (jobs see the node's hostname, address and /etc).  Everything
lives in `.vcluster/<name>/slurm/`, the ports are not Slurm's defaults, and
each daemon runs in the foreground of a process netbench started, so
`down` stops them by PID.

Clients (sbatch, srun, squeue, ReFrame) find the cluster through
SLURM_CONF, which `netbench vcluster status --json` gives as
`slurm.conf`.
"""

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import jinja2

from . import paths, vcluster as vc

DAEMONS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd"}
CLIENTS = ("sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
CTLD_PORT = 16817
SLURMD_PORT = 16818
SLURMD_TIMEOUT_S = 10
MAX_TIME_MIN = 30
START_WAIT_S = 20.0
#: the controller's host number in the cluster's /24 (nodes start at .11)
CONTROLLER_HOST = 2


def require_slurm():
    for tool in (*DAEMONS, *CLIENTS):
        if not shutil.which(tool):
            package = "munge" if tool == "munged" else "slurm-wlm"
            raise vc.VclusterError(f"--slurm: {tool} not found: install {package} "
                                   "(apt-get install slurm-wlm munge)")


def controller_names(name):
    return {"name": f"{name}-ctl", "namespace": f"nb-{name}-ctl", "veth": f"nb-{name}-c"}


def slurm_folder(state):
    return Path(state["folder"]) / "slurm"


def environment(state):
    """What a Slurm client of this cluster needs."""
    return {"SLURM_CONF": state["slurm"]["conf"]}


def available_memory_mb():
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    # leave the host most of it: Slurm only books it, nothing enforces it
    return max(256, pages // (1024 * 1024) // 4)


def write_config(state, controller, folder):
    """slurm.conf and the munge key, with the folders the daemons expect."""
    for sub in ("state", "munge", *(f"spool/{n['name']}" for n in state["nodes"])):
        os.makedirs(folder / sub, exist_ok=True)
    # munged refuses a socket folder others can write to
    os.chmod(folder / "munge", 0o700)
    key = folder / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(paths.TEMPLATES),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    conf = folder / "slurm.conf"
    conf.write_text(env.get_template("slurm.conf.j2").render(
        cluster=state["name"], conf=conf, folder=folder, controller=controller,
        ctld_port=CTLD_PORT, slurmd_port=SLURMD_PORT,
        munge_socket=folder / "munge" / "munge.socket", slurmd_timeout=SLURMD_TIMEOUT_S,
        nodes=state["nodes"], cpus=os.cpu_count() or 1, memory_mb=available_memory_mb(),
        partition=state["name"], max_time_min=MAX_TIME_MIN))
    return conf


def make_controller(state, undo):
    """The controller's namespace on the cluster's bridge."""
    ctl = controller_names(state["name"])
    network = vc.ipaddress.ip_network(state["network"])
    ctl["address"] = str(network.network_address + CONTROLLER_HOST)
    vc.run(["ip", "netns", "add", ctl["namespace"]])
    undo.push(vc.delete_namespace, ctl["namespace"])
    mtu = str(state["link"]["switch_mtu"])
    vc.run(["ip", "link", "add", ctl["veth"], "mtu", mtu, "type", "veth",
            "peer", "name", "eth0", "mtu", mtu, "netns", ctl["namespace"]])
    undo.push(vc.run, ["ip", "link", "del", ctl["veth"]], False)
    vc.run(["ip", "link", "set", ctl["veth"], "master", state["bridge"], "up"])
    vc.run(["ip", "-n", ctl["namespace"], "addr", "add",
            f"{ctl['address']}/{network.prefixlen}", "dev", "eth0"])
    vc.run(["ip", "-n", ctl["namespace"], "link", "set", "lo", "up"])
    vc.run(["ip", "-n", ctl["namespace"], "link", "set", "eth0", "up"])
    return ctl


def spawn(argv, log):
    """A daemon in the foreground of a new session, output to `log`."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)


def start(state, undo):
    """Bring Slurm up on a cluster whose nodes run; returns state["slurm"]."""
    require_slurm()
    folder = slurm_folder(state)
    ctl = make_controller(state, undo)
    conf = write_config(state, ctl, folder)
    munge = folder / "munge"
    pids = {}
    procs = {}

    def started(key, proc, namespaces=()):
        pids[key] = proc.pid
        procs[key] = proc
        undo.push(vc.stop_processes, list(namespaces), [proc.pid])

    started("munged", spawn(["munged", "--foreground", "--force",
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
        os.makedirs(spool / "tmp", exist_ok=True)
        os.chmod(spool / "tmp", 0o1777)
        started(f"slurmd:{node['name']}", spawn(
            ["nsenter", "-t", str(node["sshd_pid"]), "-m", "-u", "-n",
             "unshare", "--mount", "--propagation", "private", "sh", "-c",
             f"{cgroup_mount_script()} {own_tmp_script(spool / 'tmp', folder)} && "
             f"exec slurmd -D -f {conf} -N {node['name']}"],
            spool / "slurmd.out"), [node["namespace"]])
    slurm = {"conf": str(conf), "partition": state["name"], "controller": ctl,
             "ctld_port": CTLD_PORT, "slurmd_port": SLURMD_PORT, "pids": pids,
             "folder": str(folder), "reframe": system_names(state["name"])}
    env = {**os.environ, "SLURM_CONF": str(conf)}
    wait_for(lambda: nodes_idle(env, len(state["nodes"])), "slurmctld and slurmd", procs,
             folder)
    return slurm


def own_tmp_script(node_tmp, folder):
    """Shell commands that mount `node_tmp` over /tmp in a node's mount
    namespace.  Where the cluster's `folder` (its Slurm config, spool and
    logs) lies under /tmp itself, as in a repository cloned there, its top
    folder under /tmp is bound into the node's /tmp first, so that slurmd
    still finds it."""
    top = _top_under_tmp(Path(folder).resolve())
    keep = "" if top is None else (
        f"mkdir -p {node_tmp / top.name} && mount --bind {top} {node_tmp / top.name} && ")
    return f"{keep}mount --rbind {node_tmp} /tmp"


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
                raise vc.VclusterError(f"--slurm: {key} exited ({proc.returncode}): "
                                       f"{last_log_line(folder, key)}")
        if time.monotonic() > deadline:
            raise vc.VclusterError(f"--slurm: {what} not ready after {START_WAIT_S:.0f} s "
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


def namespaces(state):
    """The namespaces Slurm added to a cluster."""
    return [state["slurm"]["controller"]["namespace"]] if state.get("slurm") else []


def pids(state):
    return list(state.get("slurm", {}).get("pids", {}).values())


def problems(state):
    """Daemons of the cluster's Slurm that are not running."""
    return [f"Slurm: {key} (pid {pid}) is not running"
            for key, pid in state.get("slurm", {}).get("pids", {}).items()
            if not vc.alive(pid)]


def system_names(name):
    """ReFrame `system:partition` of each Slurm launch path."""
    return {"srun": f"vcluster-{name}-slurm:srun",
            "mpirun": f"vcluster-{name}-slurm-mpirun:mpirun"}


def reframe_systems(state, base):
    """The cluster's Slurm as ReFrame systems, one partition each (see
    vcluster.reframe_systems): `srun`, where srun starts the ranks (PMI per
    MPI through SLURM_MPI_TYPE), and `mpirun`, the MPI's own launcher
    inside the allocation.  ReFrame's `squeue` scheduler: there is no
    accounting, which its `slurm` scheduler needs (sacct)."""
    slurm = state["slurm"]
    extras = base["partitions"][0]["extras"]
    env_vars = [["SLURM_CONF", slurm["conf"]], ["NETBENCH_NETWORK", state["network"]],
                # with srun there is no mpirun to pass --mca: keep Open MPI's
                # TCP traffic on the cluster network
                ["OMPI_MCA_btl_tcp_if_include", state["network"]]]
    # the MTU checks change the links from inside their job, which Slurm
    # runs in a node: the links are the host's, so step into the host's
    # network and mount namespaces, those of the cluster's munged (nodes
    # share the host's PID namespace; PID 1's are not readable everywhere)
    set_mtu = ["nsenter", "-t", str(slurm["pids"]["munged"]), "-n", "-m",
               *extras["set_mtu"]]
    common = {"scheduler": "squeue", "environs": [], "max_jobs": 1,
              "access": [f"--partition={slurm['partition']}", "--exclusive"],
              "time_limit": "10m", "env_vars": env_vars,
              "extras": {**extras, "slurm_conf": slurm["conf"], "set_mtu": set_mtu}}
    systems = []
    for path, (launcher, descr) in {
            "srun": ("srun", "sbatch, srun with the MPI's PMI"),
            "mpirun": ("netbench-alloc", "sbatch, the MPI's own launcher inside the "
                                         "allocation")}.items():
        system, partition = system_names(state["name"])[path].split(":")
        systems.append({**{k: v for k, v in base.items() if k != "partitions"},
                        "name": system,
                        "descr": f"{base['descr']}; jobs through Slurm ({descr})",
                        "partitions": [{"name": partition, "descr": descr,
                                        "launcher": launcher, **common}]})
    return systems

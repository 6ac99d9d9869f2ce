"""A virtual cluster on one machine.

Each node is a network namespace with its own TCP stack, plus private mount
and UTS namespaces: its own hostname and its own `/etc` (an overlay on the
host's), and an sshd that listens on the node's address only and accepts
the cluster's key only.  The nodes hang off a bridge through veth links
whose rate a token bucket (`tbf`) can shape to a link class.  The host is
the cluster's head: it holds the bridge's first address and launches MPI
jobs into the nodes over ssh, as a login node would.

Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for network
benchmarking: one /24 per cluster.  Namespaces, links, addresses and ports
belong to the machine, not to a checkout, so clusters are machine-wide:

- one lock, `/run/netbench/lock`, serialises every `up`, `down` and `mtu`
  of the machine;
- the registry, `/run/netbench/registry/<name>.json`, records each cluster's
  owner (the checkout that brought it up, the uid that ran it, when) and its
  /24, reserved there under the lock before any address exists; `down` of a
  cluster another checkout owns is refused without --force;
- every file a root process reads or runs (sshd's configuration, host keys
  and authorized_keys, the node's /etc layer, the ssh client's key, config
  and wrapper, Slurm's configuration, state, spool and munge key) lives in
  `/var/lib/netbench/clusters/<name>/`, root's, writable by root only,
  checked like sshd's StrictModes before any daemon starts.  (Not under
  /run: a node may mount a /run of its own, and its sshd re-reads its host
  key for every connection.)  The owning checkout
  gets copies for its user (`.vcluster/<name>/`: inventory, hostfile),
  written with the checkout owner's rights and read by no netbench process.

Everything a cluster owns is named after it, by exact pattern:
`nb-<name>` bridge, `nb-<name>-<i>` host-side veths, `nb-<name>-n<i>`
namespaces (`nb-<name>-ctl` and `nb-<name>-c` for Slurm's controller).
`down` stops the processes inside those namespaces, the daemons the state
recorded (each checked to be the same process, still the cluster's), and
host processes whose command line names the cluster's folder as a path.
"""

import contextlib
import fcntl
import io
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from . import paths
from .datafiles import load_yaml, require

LINKS_FILE = paths.DATA / "links.yaml"
BENCHMARK_NETWORK = ipaddress.ip_network("198.18.0.0/15")
NAME_PATTERN = r"[a-z][a-z0-9]{0,5}"    # keeps `nb-<name>-<i>` within IFNAMSIZ
MAX_NODES = 64
FIRST_NODE_HOST = 11                    # node i gets <subnet>.(10 + i)
HEAD_HOST = 3                           # the head namespace (.1: the host, .2: Slurm's controller)
SSHD = "/usr/sbin/sshd"
SSHD_WAIT_S = 10.0
STATE_FILE = "cluster.json"
SYSTEM_FILE = "reframe-system.json"
#: machine-wide: the lock and the registry of clusters and their owners ...
RUN_DIR = Path("/run/netbench")
LOCK_FILE = RUN_DIR / "lock"
REGISTRY = RUN_DIR / "registry"
#: ... and the clusters' root-owned files
LIB_DIR = Path("/var/lib/netbench")
CLUSTERS = LIB_DIR / "clusters"
#: files whose content is a secret: readable by root only
PRIVATE_FILES = ("id_ed25519", "ssh_host_ed25519_key", "munge.key")
#: the copies a cluster's owning checkout gets in .vcluster/<name>/ (for its
#: user: `ansible-playbook -i`, an MPI hostfile); no netbench process reads them
CHECKOUT_COPIES = ("inventory.ini", "hostfile", "group_vars/{name}.yml")


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


#: the suffix of a cluster member's namespace: node, Slurm's controller, head
MEMBER_NAMESPACE = r"(n\d+|ctl|hd)"


def head_names(name):
    """The head namespace, where MPI launchers of cluster runs start (see
    make_head): its namespace and the host end of its link."""
    return {"namespace": f"nb-{name}-hd", "veth": f"nb-{name}-h"}


def owns_namespace(name, ns):
    """`nb-<name>-n<i>` (a node), `nb-<name>-ctl` (Slurm's controller) or
    `nb-<name>-hd` (the head), exactly: `nb-a-n1` is never cluster `ab`'s
    nor `a`'s of `nb-ab-n1`."""
    return re.fullmatch(rf"nb-{re.escape(name)}-{MEMBER_NAMESPACE}", ns) is not None


def owns_link(name, link):
    """The bridge `nb-<name>`, a node's veth `nb-<name>-<i>`, the
    controller's `nb-<name>-c`, the head's `nb-<name>-h`, exactly."""
    return re.fullmatch(rf"nb-{re.escape(name)}(-(\d+|c|h))?", link) is not None


def cluster_folder(name):
    """The cluster's root-owned files (never in a checkout)."""
    return CLUSTERS / name


def registry_file(name):
    return REGISTRY / f"{name}.json"


def checkout_folder(name, checkout=None):
    """The copies the owning checkout gets for its user."""
    return Path(checkout or paths.REPO) / ".vcluster" / name


def this_checkout():
    return str(paths.REPO)


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
    # the classes of an unshaped link and of a rate no class has
    data.setdefault("unshaped_interconnect", "veth")
    data.setdefault("other_rates_interconnect", "emulated")
    return data


def check_interconnect(interconnect, mbps, classes):
    """An explicit --interconnect must be a class of thresholds.yaml; the
    class judged against the line rate needs a shaped link."""
    emulated = classes["other_rates_interconnect"]
    if interconnect == emulated and mbps is None:
        raise VclusterError(f"--interconnect {emulated}: judged against the link's line rate, "
                            "which --link none does not have: give --link RATE")
    from . import references
    allowed = references.interconnect_classes()
    if interconnect not in allowed:
        raise VclusterError(f"--interconnect {interconnect!r}: not a class of thresholds.yaml "
                            f"(allowed: {', '.join(allowed)})")


def link_settings(rate="none", mtu=1500, interconnect=None, classes=None, switch_mtu=None,
                  validate=True):
    """What the links of a cluster are: rate, tbf bucket, MTU and the
    interconnect class its ReFrame partition declares (`veth` unshaped, a
    class of links.yaml whose rate matches, else `emulated`, judged against
    the line rate).  `mtu` is the nodes' interface MTU; `switch_mtu` (at
    least `mtu`) that of the bridge and the host ends of the links, i.e. the
    largest frame the "switch" carries, so that a node tuned to jumbo frames
    (tune.yml) can use them."""
    for option, value in (("--mtu", mtu), ("--switch-mtu", switch_mtu or mtu)):
        if not 576 <= int(value) <= 9216:
            raise VclusterError(f"{option} {value}: use 576 to 9216 (veth and Ethernet jumbo "
                                f"frames)")
    if switch_mtu is not None and int(switch_mtu) < int(mtu):
        raise VclusterError(f"--switch-mtu {switch_mtu} is below --mtu {mtu}: the switch must "
                            f"carry the nodes' frames: use --switch-mtu {mtu} or more")
    switch_mtu = int(switch_mtu or mtu)
    mbps = parse_rate(rate)
    classes = classes or load_link_classes()
    if interconnect is not None and validate:
        check_interconnect(interconnect, mbps, classes)
    if mbps is None:
        return {"rate": "none", "rate_mbps": None, "burst_bytes": None, "latency_ms": None,
                "mtu": int(mtu), "switch_mtu": switch_mtu,
                "interconnect": interconnect or classes["unshaped_interconnect"]}
    match = next((c for c, spec in classes["classes"].items()
                  if float(spec["rate_mbps"]) == mbps), None)
    burst = (classes["classes"][match]["burst_bytes"] if match
             else int(mbps * 1e6 / 8 * classes["default_burst_us"] * 1e-6))
    burst = max(burst, switch_mtu + classes["min_burst_over_mtu"])
    return {"rate": rate.strip().lower(), "rate_mbps": mbps, "burst_bytes": burst,
            "latency_ms": classes["latency_ms"], "mtu": int(mtu), "switch_mtu": switch_mtu,
            "interconnect": interconnect or match or classes["other_rates_interconnect"]}


# ---- commands -----------------------------------------------------------------

def run(argv, check=True, timeout=30, input=None):
    """Run a system command; VclusterError naming it on failure."""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout,
                              input=input, stdin=None if input is not None
                              else subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise VclusterError(f"{' '.join(argv)}: {err}") from err
    proc.stdout = proc.stdout.decode(errors="replace")
    proc.stderr = proc.stderr.decode(errors="replace")
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[0]
        raise VclusterError(f"{' '.join(argv)}: {detail}")
    return proc


def require_root():
    if os.geteuid() != 0:
        raise VclusterError("the virtual cluster needs root (network namespaces, links, "
                            "mounts): run it with sudo")
    for tool in ("ip", "tc", "unshare", "setpriv", "ssh", "ssh-keygen", SSHD):
        if not shutil.which(tool):
            package = "openssh-server" if tool == SSHD else "openssh-client" \
                if tool.startswith("ssh") else "iproute2/util-linux"
            raise VclusterError(f"{tool} not found: install {package}")


@contextlib.contextmanager
def deferred_interrupts():
    """Ctrl-C (SIGINT) waits until the block is done: a rollback or a
    teardown runs to its end, then KeyboardInterrupt is raised."""
    caught = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: caught.append(1))
    except ValueError:                   # not the main thread: nothing to defer
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)


# ---- root-owned files -----------------------------------------------------------

def insecure(path, private=False):
    """Why root must not trust `path` (a file or folder it reads), or None:
    it and every folder above it must be root's and writable by root only,
    as sshd's StrictModes demands; a secret is readable by root only."""
    path = Path(path)
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return f"{path} is a symbolic link"
    except OSError as err:
        return f"{path}: {err.strerror}"
    # the folders above as sshd sees them: links resolved (/var/lib may be one)
    above = Path(os.path.realpath(path.parent))
    for part in (path, above, *above.parents):
        try:
            st = os.stat(part) if part != path else os.lstat(part)
        except OSError as err:
            return f"{part}: {err.strerror}"
        if st.st_uid != 0:
            return f"{part} is owned by uid {st.st_uid}, not root"
        if st.st_mode & 0o022:
            return f"{part} is writable by group or others (mode {st.st_mode & 0o7777:o})"
    if private and os.lstat(path).st_mode & 0o077:
        return f"{path} is readable by others (mode {os.lstat(path).st_mode & 0o777:o})"
    return None


def verify_tree(folder, skip=()):
    """Refuse to start anything from `folder` unless every file and folder in
    it (but the `skip` folders, such as the nodes' /tmp) is root's and
    writable by root only, and its secrets are readable by root only."""
    problem = insecure(folder)
    for top, dirs, files in os.walk(folder):
        if problem:
            break
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in {str(s) for s in skip}]
        for entry in dirs + files:
            path = os.path.join(top, entry)
            st = os.lstat(path)
            if st.st_uid != 0:
                problem = f"{path} is owned by uid {st.st_uid}, not root"
            elif not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
                problem = (f"{path} is writable by group or others "
                           f"(mode {st.st_mode & 0o7777:o})")
            elif entry in PRIVATE_FILES and st.st_mode & 0o077:
                problem = f"{path} is readable by others (mode {st.st_mode & 0o777:o})"
            if problem:
                break
    if problem:
        raise VclusterError(f"refusing to start from {folder}: {problem}")


def make_dir(path, mode=0o755):
    """A folder of root's (new, or already root's and safe)."""
    try:
        os.mkdir(path, mode)
        os.chown(path, 0, 0)
        os.chmod(path, mode)
    except FileExistsError:
        problem = insecure(path)
        if problem:
            raise VclusterError(f"{path}: {problem}: remove it (netbench only uses "
                                f"folders of root's)") from None


def write_file(path, data, mode=0o644):
    """Write a file of root's, atomically, without following a link."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data.encode() if isinstance(data, str) else data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_json(path, data):
    write_file(path, json.dumps(data, indent=2) + "\n")


def remove_tree(path):
    """Remove a folder of root's (the cluster's own files)."""
    shutil.rmtree(path, ignore_errors=True)


# ---- the machine-wide lock and registry -------------------------------------------

@contextlib.contextmanager
def locked():
    """One `up`/`down`/`mtu` at a time on this machine, whichever checkout
    it comes from."""
    for folder in (RUN_DIR, REGISTRY, LIB_DIR, CLUSTERS):
        make_dir(folder)
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if os.fstat(fd).st_uid != 0:
            raise VclusterError(f"{LOCK_FILE} is not root's: remove it")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_entry(name):
    """The registry entry of cluster `name`; None when there is none, and
    {"name", "problem"} (no owner) when it is unreadable."""
    path = registry_file(name)
    try:
        with open(path) as f:
            entry = json.load(f)
        if not isinstance(entry, dict) or not isinstance(entry.get("owner"), str):
            raise ValueError("no owner")
        return entry
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        return {"name": name, "problem": f"{path}: unreadable registry entry ({err})"}


def registered_names():
    with contextlib.suppress(OSError):
        return sorted(p.stem for p in REGISTRY.iterdir()
                      if p.suffix == ".json" and re.fullmatch(NAME_PATTERN, p.stem))
    return []


def owner_text(entry):
    return (f"checkout {entry['owner']} (uid {entry.get('uid', '?')}, up since "
            f"{entry.get('created', '?')})")


def invoking_uid():
    """The user who ran netbench (through sudo, the one sudo names)."""
    with contextlib.suppress(ValueError):
        return int(os.environ.get("SUDO_UID", os.getuid()))
    return os.getuid()


def free_subnet():
    """The first /24 of 198.18.0.0/15 no registered cluster has and no
    route or address of this machine touches.  Called under the lock, and
    the result is registered before it is used."""
    used = []
    for other in registered_names():
        entry = read_entry(other) or {}
        with contextlib.suppress(ValueError, TypeError):
            used.append(ipaddress.ip_network(entry.get("network")))
    for argv in (["ip", "-4", "-j", "route", "show", "table", "all"],
                 ["ip", "-4", "-j", "addr", "show"]):
        with contextlib.suppress(ValueError):
            for item in json.loads(run(argv, check=False).stdout or "[]"):
                prefixes = [item.get("dst")] + [f"{a['local']}/{a['prefixlen']}"
                                                for a in item.get("addr_info", [])]
                for prefix in prefixes:
                    with contextlib.suppress(ValueError, TypeError):
                        used.append(ipaddress.ip_network(prefix, strict=False))
    for subnet in BENCHMARK_NETWORK.subnets(new_prefix=24):
        if not any(subnet.overlaps(u) for u in used if u.prefixlen > 0):
            return subnet
    raise VclusterError("no free /24 left in 198.18.0.0/15")


# ---- state --------------------------------------------------------------------

def load_state(name):
    path = cluster_folder(name) / STATE_FILE
    try:
        with open(path) as f:
            state = json.load(f)
        if not isinstance(state, dict) or not isinstance(state.get("nodes"), list):
            raise ValueError("not a cluster description")
        return state
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise VclusterError(f"{path}: unreadable cluster state ({err}): "
                            f"run `netbench vcluster down --name {name}`") from err


def cluster_names():
    """Every cluster of this machine: registered, with a folder, or with
    namespaces named after it."""
    names = set(registered_names())
    with contextlib.suppress(OSError):
        names |= {p.name for p in CLUSTERS.iterdir() if re.fullmatch(NAME_PATTERN, p.name)}
    for ns in namespaces():
        m = re.fullmatch(rf"nb-({NAME_PATTERN})-{MEMBER_NAMESPACE}", ns)
        if m:
            names.add(m.group(1))
    return sorted(names)


# ---- processes ------------------------------------------------------------------

def alive(pid):
    """True while `pid` runs; a zombie is dead (on machines whose init
    does not reap, zombies of killed nodes linger)."""
    try:
        stat_ = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, TypeError, ValueError):
        return False
    return stat_.rsplit(")", 1)[1].split()[0] != "Z"


def start_time(pid):
    """When `pid` started (clock ticks since boot): with the pid, what
    tells a process from a later one that reuses its pid."""
    try:
        return int(Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, TypeError, ValueError, IndexError):
        return None


def record(pid):
    """[pid, start time] of a process netbench started, for the state."""
    return [pid, start_time(pid)]


def is_recorded(rec):
    """The process of a record is still the one that was recorded."""
    try:
        pid, started = int(rec[0]), rec[1]
    except (TypeError, ValueError, IndexError):
        return False
    return started is not None and alive(pid) and start_time(pid) == started


def namespace_id(path):
    try:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)
    except OSError:
        return None


def namespaces():
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(ns):
    """The processes in network namespace `ns`, by the namespace's identity."""
    wanted = namespace_id(f"/run/netns/{ns}")
    return [pid for pid in all_pids() if wanted and
            namespace_id(f"/proc/{pid}/ns/net") == wanted]


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def path_tokens(text):
    """The absolute paths in a command line or mount line."""
    return [t for t in re.split(r"[\s=,:;'\"()]+", text) if t.startswith("/")]


def within(path, folder):
    """`path` is `folder` or lies in it, compared by whole path components
    (`/x/rel` is not in `/x/re`, and `/x/rels/a` is not in `/x/rel`)."""
    path, folder = os.path.normpath(path), os.path.normpath(str(folder))
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def mentions(text, folder):
    return any(within(t, folder) for t in path_tokens(text))


def command_line(pid):
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    return ""


def ancestors():
    """This process and its parents (never stopped by a teardown)."""
    found, pid = set(), os.getpid()
    while pid > 0 and pid not in found:
        found.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def processes_using(folder):
    """(pid, "process" | "mount") of the processes whose command line or
    mounts name `folder`, or a path in it, as whole path components."""
    found = []
    for pid in all_pids():
        if mentions(command_line(pid), folder):
            found.append((pid, "process"))
            continue
        with contextlib.suppress(OSError):
            if mentions(Path(f"/proc/{pid}/mountinfo").read_text(), folder):
                found.append((pid, "mount"))
    return found


def belongs(pid, namespace_ids, folders):
    """A process is the cluster's: it lives in one of its network
    namespaces, or its command line names one of the cluster's folders."""
    line = command_line(pid)
    return (namespace_id(f"/proc/{pid}/ns/net") in namespace_ids
            or any(mentions(line, folder) for folder in folders))


def stop_processes(namespaces_, records=(), folders=()):
    """SIGTERM, then SIGKILL: every process in the network namespaces
    `namespaces_` (sshd, sessions, slurmd, stray MPI ranks); the recorded
    processes ([pid, start time]) that still are the recorded ones and
    still belong to the cluster; and host processes whose command line
    names one of the cluster's `folders` (a path or a list: munged, ssh
    sessions and MPI launchers on the head, which would wait for nodes
    that are gone)."""
    folders = [folders] if isinstance(folders, (str, Path)) else list(folders or ())
    ids = {i for i in (namespace_id(f"/run/netns/{ns}") for ns in namespaces_) if i}
    keep = ancestors()
    targets = {}
    for pid in all_pids():
        if pid not in keep and belongs(pid, ids, folders):
            targets[pid] = start_time(pid)
    for rec in records:
        if rec and is_recorded(rec) and int(rec[0]) not in keep and belongs(
                int(rec[0]), ids, folders):
            targets[int(rec[0])] = rec[1]
    targets = {p: t for p, t in targets.items() if t is not None and alive(p)}
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        for pid, started in targets.items():
            if start_time(pid) == started:      # not a new process under an old pid
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            targets = {p: t for p, t in targets.items()
                       if alive(p) and start_time(p) == t and not reap(p)}
            if not targets:
                return
            time.sleep(0.01)
    if targets:
        raise VclusterError(f"processes {sorted(targets)} of {', '.join(namespaces_)} "
                            "survive SIGKILL")


def reap(pid):
    """Collect a child of ours that exited (sshd started by this process)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return False


def links():
    return sorted(os.listdir("/sys/class/net"))


# ---- bring-up -----------------------------------------------------------------

class Undo:
    """Actions that take back what bring-up did, run newest first.  Each is
    pushed before the step it takes back, and tolerates that the step never
    happened: an interrupt between the two leaves nothing behind."""

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
    os.chmod(path, 0o600)


def shape(argv_prefix, dev, link):
    """tbf on one end of a link (egress); none for an unshaped link."""
    if link["rate_mbps"] is None:
        return
    run(argv_prefix + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                       "rate", f"{link['rate_mbps']}mbit", "burst", str(link["burst_bytes"]),
                       "latency", f"{link['latency_ms']}ms"])


def delete_link(link):
    run(["ip", "link", "del", link], check=False)


def attach_namespace(ns, veth, bridge, address, prefixlen, mtu, undo):
    """A network namespace with one interface, `eth0` at `address`, whose
    other end `veth` is a port of `bridge`: the shape of every member of a
    cluster's network that is not a node (the head, Slurm's controller)."""
    undo.push(delete_namespace, ns)
    run(["ip", "netns", "add", ns])
    undo.push(delete_link, veth)
    run(["ip", "link", "add", veth, "mtu", str(mtu), "type", "veth",
         "peer", "name", "eth0", "mtu", str(mtu), "netns", ns])
    run(["ip", "link", "set", veth, "master", bridge, "up"])
    run(["ip", "-n", ns, "addr", "add", f"{address}/{prefixlen}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])


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


def make_node(name, i, address, prefixlen, link, undo):
    ns, veth = namespace_name(name, i), veth_name(name, i)
    in_ns = ["ip", "netns", "exec", ns]
    undo.push(delete_namespace, ns)
    run(["ip", "netns", "add", ns])
    undo.push(delete_link, veth)
    run(["ip", "link", "add", veth, "mtu", str(link["switch_mtu"]), "type", "veth",
         "peer", "name", "eth0", "mtu", str(link["mtu"]), "netns", ns])
    run(["ip", "link", "set", veth, "master", bridge_name(name), "up"])
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


def inventory_text(state, folder):
    """The Ansible inventory; its keys and ssh configuration are root's."""
    lines = [f"# Ansible inventory of netbench virtual cluster {state['name']}",
             f"[{state['name']}]"]
    lines += [f"{n['name']} ansible_host={n['address']}" for n in state["nodes"]]
    lines += ["", f"[{state['name']}:vars]", "ansible_user=root",
              f"ansible_ssh_private_key_file={folder / 'id_ed25519'}",
              f"ansible_ssh_common_args='-F {folder / 'ssh_config'}'",
              # Ansible's default ssh_args (ControlMaster=auto, ControlPersist)
              # override ssh_config: shared connections outlive a node's sshd
              # and hang on a node whose link is down
              "ansible_ssh_args='-C -o ControlMaster=no -o ControlPath=none'",
              "ansible_python_interpreter=/usr/bin/python3", ""]
    return "\n".join(lines)


def client_files(folder, state):
    """ssh configuration, known host keys and agent, MPI hostfile, Ansible
    inventory: root's, in the cluster's folder."""
    ssh_config = folder / "ssh_config"
    known_hosts = folder / "known_hosts"
    write_file(known_hosts, "".join(
        f"{n['address']},{n['name']} "
        + " ".join((folder / "nodes" / n["name"] / "ssh_host_ed25519_key.pub")
                   .read_text().split()[:2]) + "\n"
        for n in state["nodes"]))
    write_file(ssh_config, "\n".join([
        "# ssh into the nodes of netbench virtual cluster " + state["name"],
        "Host *",
        f"  IdentityFile {folder / 'id_ed25519'}",
        "  IdentitiesOnly yes",
        "  User root",
        # the nodes' host keys are known: netbench made them
        "  StrictHostKeyChecking yes",
        f"  UserKnownHostsFile {known_hosts}",
        "  GlobalKnownHostsFile /dev/null",
        "  BatchMode yes",
        "  LogLevel ERROR",
        # shared connections outlive a node's sshd and keep its old mount
        # namespace (platform-facts.md): one connection per session
        "  ControlMaster no",
        "  ControlPath none",
        "  ConnectTimeout 5",
        "", ]))
    agent = folder / "ssh"
    write_file(agent, f'#!/bin/sh\n# ssh into the nodes of cluster {state["name"]}\n'
                      f'exec ssh -F {ssh_config} "$@"\n', mode=0o755)
    hostfile = folder / "hostfile"
    write_file(hostfile, "".join(n["address"] + "\n" for n in state["nodes"]))
    inventory = folder / "inventory.ini"
    write_file(inventory, inventory_text(state, folder))
    make_dir(folder / "group_vars")
    write_file(folder / "group_vars" / f"{state['name']}.yml", TUNING_VARS)
    return {"ssh_config": str(ssh_config), "ssh_agent": str(agent), "hostfile": str(hostfile),
            "inventory": str(inventory), "ssh_key": str(folder / "id_ed25519"),
            "known_hosts": str(known_hosts), "authorized_keys": str(folder / "authorized_keys")}


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


# ---- the owning checkout's copies -------------------------------------------------

def as_owner_of(checkout, script, *args, data=None, check=True):
    """Run a shell script with the rights of whoever owns `checkout` (never
    root's rights in a folder someone else may write)."""
    st = os.stat(checkout)
    return run(["setpriv", f"--reuid={st.st_uid}", f"--regid={st.st_gid}", "--clear-groups",
                "sh", "-c", script, "sh", *map(str, args)], input=data or b"", check=check)


def write_checkout_copies(state, checkout):
    """inventory.ini, group_vars/ and hostfile in the checkout's
    .vcluster/<name>/, for its user; the inventory names root's key and ssh
    configuration in the cluster's folder."""
    name = state["name"]
    folder = Path(state["folder"])
    texts = {"inventory.ini": inventory_text(state, folder),
             "hostfile": "".join(n["address"] + "\n" for n in state["nodes"]),
             f"group_vars/{name}.yml": TUNING_VARS}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for rel, text in texts.items():
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(text.encode()), 0o644, time.time()
            tar.addfile(info, io.BytesIO(text.encode()))
    target = checkout_folder(name, checkout)
    proc = as_owner_of(checkout, 'umask 022 && mkdir -p "$1" && exec tar -x -f - -C "$1" '
                                 '--no-same-owner --no-same-permissions', target,
                       data=buffer.getvalue(), check=False)
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or "no output").splitlines()[0]
        raise VclusterError(f"{target}: cannot write the copies for the checkout's owner "
                            f"(uid {os.stat(checkout).st_uid}): {detail}")
    return {"folder": str(target), "inventory": str(target / "inventory.ini"),
            "hostfile": str(target / "hostfile")}


def remove_checkout_copies(name, checkout):
    """Remove the copies from the checkout, with its owner's rights, and
    the folders netbench made for them if they are empty now."""
    if not checkout or not os.path.isdir(checkout):
        return
    files = " ".join(f'"{c.format(name=name)}"' for c in CHECKOUT_COPIES)
    as_owner_of(checkout, f'cd "$1" 2>/dev/null || exit 0; rm -f {files}; '
                          'rmdir group_vars 2>/dev/null; cd .. && rmdir "$2" 2>/dev/null; '
                          'cd .. && rmdir .vcluster 2>/dev/null; exit 0',
                checkout_folder(name, checkout), name)


def is_legacy_folder(folder):
    """An older netbench's cluster folder in a checkout (node layers, state)."""
    return any(os.path.lexists(Path(folder) / entry) for entry in ("nodes", STATE_FILE))


def remove_legacy_folder(name, checkout):
    """A cluster folder older netbench kept in the checkout
    (.vcluster/<name>/ with nodes/ or cluster.json): root's files, removed
    without following any link."""
    try:
        top = os.open(Path(checkout) / ".vcluster", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
        try:
            legacy = any(entry in os.listdir(inner) for entry in ("nodes", STATE_FILE))
        finally:
            os.close(inner)
        if legacy:                       # no live mount in it: down stopped its nodes
            shutil.rmtree(name, dir_fd=top, ignore_errors=True)
    except OSError:
        pass
    finally:
        os.close(top)


# ---- ReFrame systems ----------------------------------------------------------------

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


# ---- up -------------------------------------------------------------------------

def up(name="vc", nodes=2, rate="none", mtu=1500, interconnect=None, switch_mtu=None,
       slurm=False):
    """Bring a cluster up; returns (state, created).  A cluster this
    checkout has up is left as it is (created False); a name another
    checkout owns is refused.  `slurm`: with a Slurm controller and a
    slurmd per node (netbench.slurm).  Whatever ends a bring-up early (an
    error, Ctrl-C) takes back all of it."""
    check_name(name)
    if not 1 <= nodes <= MAX_NODES:
        raise VclusterError(f"--nodes {nodes}: use 1 to {MAX_NODES}")
    link = link_settings(rate, mtu, interconnect, switch_mtu=switch_mtu)
    require_root()
    if slurm:
        slurm_module().require_slurm()
    with locked():
        entry = read_entry(name)
        if entry is not None:
            if "owner" not in entry:
                raise VclusterError(f"cluster {name}: {entry['problem']}: its owner is "
                                    f"unknown: run `netbench vcluster down --force --name "
                                    f"{name}` first")
            if entry["owner"] != this_checkout():
                raise VclusterError(f"cluster {name} belongs to {owner_text(entry)}: "
                                    f"choose another --name")
            existing = load_state(name)
            if existing:
                return existing, False
        rest = leftovers(name)
        if entry is None and unclaimed_but_running(name):
            raise VclusterError(f"cluster {name}: not in the registry, but its nodes run "
                                f"(an older netbench's, from another checkout?): choose "
                                f"another --name")
        if entry is not None or rest:
            what = f" ({rest[0]}{', ...' if len(rest) > 1 else ''})" if rest else ""
            raise VclusterError(f"cluster {name}: remnants of an earlier cluster exist{what}: "
                                f"run `netbench vcluster down --name {name}` first")
        undo = Undo()
        entry = {"name": name, "owner": this_checkout(), "uid": invoking_uid(),
                 "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "folder": str(cluster_folder(name)), "pids": []}
        try:
            entry["network"] = str(free_subnet())
            # the /24 is reserved: registered before any address exists
            write_json(registry_file(name), entry)
            return build(name, nodes, link, undo, entry, slurm), True
        except BaseException as err:
            with deferred_interrupts():
                undo.run()
                # what the undo list could not take back (an interrupt
                # between two steps, a step that failed half-way)
                problems = sweep(name, entry)
            if problems and isinstance(err, (VclusterError, KeyboardInterrupt)):
                raise VclusterError(f"{err or 'interrupted'}; rollback incomplete "
                                    f"({'; '.join(problems)}): run `netbench vcluster down "
                                    f"--name {name}`") from err
            raise


def remove_registration(name):
    for path in (registry_file(name), Path(f"{registry_file(name)}.tmp")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def sweep(name, entry):
    """Take back whatever a broken bring-up left under the cluster's names,
    and its registration; the problems met (none: nothing is left)."""
    try:
        teardown(name, None, entry)
        return []
    except VclusterError as err:
        return [str(err)]


def slurm_module():
    from . import slurm            # imports this module
    return slurm


def build(name, nnodes, link, undo, entry, with_slurm=False):
    folder = cluster_folder(name)
    undo.push(remove_tree, folder)
    make_dir(folder)
    make_dir(folder / "nodes")
    subnet = ipaddress.ip_network(entry["network"])
    hosts = list(subnet.hosts())
    head = hosts[0]
    addresses = [hosts[FIRST_NODE_HOST - 2 + i] for i in range(1, nnodes + 1)]
    keygen(folder / "id_ed25519", f"netbench vcluster {name}")
    write_file(folder / "authorized_keys", (folder / "id_ed25519.pub").read_text())
    br = bridge_name(name)
    undo.push(delete_link, br)
    run(["ip", "link", "add", br, "mtu", str(link["switch_mtu"]), "type", "bridge"])
    run(["ip", "addr", "add", f"{head}/{subnet.prefixlen}", "dev", br])
    run(["ip", "link", "set", br, "up"])
    launcher = make_head(name, subnet, link, undo)
    nodes = [make_node(name, i, addr, subnet.prefixlen, link, undo)
             for i, addr in enumerate(addresses, 1)]
    cluster_hosts = "".join(["127.0.0.1\tlocalhost\n", f"{head}\t{name}-head\n"]
                            + [f"{n['address']}\t{n['name']}\n" for n in nodes])
    node_dirs = [node_files(folder, node, cluster_hosts) for node in nodes]
    state = {"name": name, "system": system_name(name), "network": str(subnet),
             "head_address": str(head), "launcher": launcher, "bridge": br, "link": link,
             "nodes": nodes,
             "folder": str(folder), "owner": entry["owner"], "uid": entry["uid"],
             "created": entry["created"]}
    state["files"] = client_files(folder, state)
    verify_tree(folder)
    procs = []
    for node, nd in zip(nodes, node_dirs):
        procs.append(start_sshd(node, nd))
        undo.push(stop_processes, [node["namespace"]],
                  [[node["sshd_pid"], node["sshd_start"]]], folder)
    wait_for_sshd(nodes, procs, folder)
    if with_slurm:
        state["slurm"] = slurm_module().start(state, undo)
        state["files"]["slurm_conf"] = state["slurm"]["conf"]
    state["files"]["reframe_system"] = str(folder / SYSTEM_FILE)
    undo.push(remove_checkout_copies, name, entry["owner"])
    state["copies"] = write_checkout_copies(state, entry["owner"])
    write_json(folder / SYSTEM_FILE, reframe_systems(state))
    write_json(folder / STATE_FILE, state)
    write_json(registry_file(name), {**entry, "pids": recorded_processes(state)})
    return state


def recorded_processes(state):
    """[pid, start time] of every daemon the state records."""
    found = [[n.get("sshd_pid"), n.get("sshd_start")] for n in state.get("nodes", [])
             if isinstance(n, dict)]
    if state.get("slurm"):
        found += slurm_module().records(state)
    return [r for r in found if r[0]]


# ---- teardown -----------------------------------------------------------------

def delete_namespace(ns):
    stop_processes([ns])
    run(["ip", "netns", "del", ns], check=False)


def down(name="vc", force=False):
    """Take a cluster down; returns False when there was none.  A cluster
    another checkout owns (by the registry) is refused unless `force`.
    Works from what it finds when the cluster's state is unreadable: the
    registry's recorded processes, the namespaces and links named after the
    cluster, the processes that name its folder."""
    check_name(name)
    require_root()
    with locked():
        entry = read_entry(name)
        if entry is None and not leftovers(name):
            return False
        if entry is None and not force and unclaimed_but_running(name):
            raise VclusterError(f"cluster {name}: not in the registry, but its nodes run (an "
                                f"older netbench's, from another checkout?): if it is yours, "
                                f"add --force")
        if entry is not None and not force:
            if "owner" not in entry:
                raise VclusterError(f"cluster {name}: {entry['problem']}: its owner is "
                                    f"unknown: run `netbench vcluster down --force --name "
                                    f"{name}`")
            if entry["owner"] != this_checkout():
                raise VclusterError(f"cluster {name} belongs to {owner_text(entry)}: take it "
                                    f"down from there, or add --force")
        try:
            state = load_state(name)
        except VclusterError:
            state = None                 # unreadable: clean up from the rest
        with deferred_interrupts():
            teardown(name, state, entry)
        return True


def teardown(name, state, entry):
    """Remove everything of cluster `name`: processes, namespaces, links,
    its folder, the owning checkout's copies, its registry entry (last, once
    nothing else is left)."""
    folder = cluster_folder(name)
    state, entry = state or {}, entry or {}
    records = recorded_processes(state) + [r for r in entry.get("pids", [])
                                           if isinstance(r, list)]
    # an older netbench kept a cluster's files (munged's socket among them)
    # in the checkout
    legacy = [checkout_folder(name)] if is_legacy_folder(checkout_folder(name)) else []
    stop_processes(owned_namespaces(name), records, [folder, *legacy])
    for ns in owned_namespaces(name):
        delete_namespace(ns)
    delete_link(bridge_name(name))
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and owned_links(name):
        for link in owned_links(name):
            delete_link(link)
        time.sleep(0.02)
    # only now: deleting a node's upper dir while mounted would detach it
    remove_tree(folder)
    for checkout in {entry.get("owner"), this_checkout()} - {None}:
        if checkout == entry.get("owner"):
            remove_checkout_copies(name, checkout)
        remove_legacy_folder(name, checkout)
    rest = leftovers(name, registry=False)
    if rest:
        raise VclusterError(f"cluster {name}: still present after down: {'; '.join(rest)}")
    remove_registration(name)


def unclaimed_but_running(name):
    """No checkout claims cluster `name` (no registry entry, no older
    netbench's folder in this checkout), yet processes run in its
    namespaces: someone's cluster, not remnants to sweep away."""
    if os.path.lexists(checkout_folder(name) / STATE_FILE):
        return False
    ids = {namespace_id(f"/run/netns/{ns}") for ns in owned_namespaces(name)} - {None}
    return any(namespace_id(f"/proc/{pid}/ns/net") in ids for pid in all_pids())


def owned_namespaces(name):
    """Nodes `nb-<name>-n<i>`, the head `nb-<name>-hd` and Slurm's
    controller `nb-<name>-ctl`."""
    return [ns for ns in namespaces() if owns_namespace(name, ns)]


def owned_links(name):
    return [link for link in links() if owns_link(name, link)]


def leftovers(name, registry=True):
    """Everything of cluster `name` that exists on this machine, as text;
    empty once `down` has done its job."""
    rest = [f"namespace {ns}" for ns in owned_namespaces(name)]
    rest += [f"link {link}" for link in owned_links(name)]
    keep = ancestors()
    rest += [f"{kind} in pid {pid}" for pid, kind in processes_using(cluster_folder(name))
             if pid not in keep]
    if os.path.lexists(cluster_folder(name)):
        rest.append(f"folder {cluster_folder(name)}")
    if is_legacy_folder(checkout_folder(name)):
        rest.append(f"folder {checkout_folder(name)}")
    if registry and os.path.lexists(registry_file(name)):
        rest.append(f"registry entry {registry_file(name)}")
    return rest


# ---- status and changes -------------------------------------------------------

def status():
    """Every cluster of this machine with its owner, nodes, links, files and
    health; a cluster whose state is unreadable is reported as such."""
    clusters = []
    present = namespaces()
    for name in cluster_names():
        entry = read_entry(name) or {}
        owner = {"owner": entry.get("owner"), "uid": entry.get("uid"),
                 "created": entry.get("created"),
                 "mine": entry.get("owner") == this_checkout()}
        try:
            state = load_state(name)
        except VclusterError as err:
            clusters.append({"name": name, **owner, "healthy": False, "problem": str(err),
                             "problems": [str(err)]})
            continue
        if state is None:
            if entry.get("problem"):
                problem = f"{entry['problem']}: owner unknown: `netbench vcluster down " \
                          f"--force --name {name}`"
            elif not entry and unclaimed_but_running(name):
                problem = ("not in the registry, but its nodes run: an older netbench's "
                           "cluster, from another checkout?")
            elif not entry and is_legacy_folder(checkout_folder(name)):
                problem = (f"brought up by an older netbench from this checkout: run "
                           f"`netbench vcluster down --name {name}`")
            elif not entry:
                problem = (f"remnants, not in the registry: run `netbench vcluster down "
                           f"--name {name}`")
            else:
                problem = (f"incomplete: being brought up, or an interrupted bring-up: run "
                           f"`netbench vcluster down --name {name}`")
            clusters.append({"name": name, **owner, "healthy": False, "problem": problem,
                             "problems": [problem]})
            continue
        problems = [f"{n['name']}: sshd (pid {n['sshd_pid']}) is not running"
                    for n in state["nodes"]
                    if not is_recorded([n.get("sshd_pid"), n.get("sshd_start")])]
        problems += [f"{n['name']}: namespace {n['namespace']} is missing"
                     for n in state["nodes"] if n["namespace"] not in present]
        head = state.get("launcher") or {}
        if head.get("namespace") not in present:
            problems.append(f"head namespace {head.get('namespace', '(none recorded)')} is "
                            f"missing: MPI launchers have nowhere to start")
        problems += slurm_module().problems(state)
        state.update(owner)
        state["healthy"] = not problems
        state["problems"] = problems
        clusters.append(state)
    return clusters


def set_mtu(name, mtu):
    """Change the MTU of every link of a running cluster (seed 004's MTU
    sweep); the switch's MTU and the tbf bucket grow with it where needed."""
    check_name(name)
    require_root()
    with locked():
        state = load_state(name)
        if state is None:
            raise VclusterError(f"cluster {name} is not up")
        link = link_settings(state["link"]["rate"], mtu, state["link"]["interconnect"],
                             switch_mtu=max(int(mtu), state["link"].get("switch_mtu", 0)),
                             validate=False)
        with deferred_interrupts():          # all links or none
            for node in state["nodes"]:
                ns = ["ip", "netns", "exec", node["namespace"]]
                run(["ip", "link", "set", node["veth"], "mtu", str(link["switch_mtu"])])
                run(["ip", "-n", node["namespace"], "link", "set", "eth0", "mtu", str(mtu)])
                shape([], node["veth"], link)
                shape(ns, "eth0", link)
            if state.get("launcher"):      # the head's link is a switch port too
                run(["ip", "link", "set", state["launcher"]["veth"], "mtu",
                     str(link["switch_mtu"])])
                run(["ip", "-n", state["launcher"]["namespace"], "link", "set", "eth0", "mtu",
                     str(link["switch_mtu"])])
            run(["ip", "link", "set", state["bridge"], "mtu", str(link["switch_mtu"])])
            state["link"] = link
            write_json(cluster_folder(name) / STATE_FILE, state)
            write_json(cluster_folder(name) / SYSTEM_FILE, reframe_systems(state))
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
    launcher = state["launcher"]
    return {"NETBENCH_HOSTFILE": state["files"]["hostfile"],
            "NETBENCH_SSH_AGENT": state["files"]["ssh_agent"],
            "NETBENCH_HEAD_ADDRESS": launcher["address"],
            "NETBENCH_LAUNCH_NETNS": launcher["namespace"],
            "NETBENCH_NETWORK": state["network"]}


def ssh_command(state, node_name, *argv):
    node = next(n for n in state["nodes"] if n["name"] == node_name)
    return [state["files"]["ssh_agent"], node["address"], *argv]


def running_systems():
    """ReFrame system descriptions of the clusters this checkout has up
    (read from their root-owned folders)."""
    systems = []
    for name in registered_names():
        entry = read_entry(name) or {}
        if entry.get("owner") != this_checkout():
            continue
        path = cluster_folder(name) / SYSTEM_FILE
        with contextlib.suppress(OSError, ValueError):
            if (cluster_folder(name) / STATE_FILE).exists():
                found = json.loads(path.read_text())
                # one system (a cluster brought up before Slurm), or a list
                systems += [found] if isinstance(found, dict) else found
    return systems

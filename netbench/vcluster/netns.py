"""Network namespaces, links, shaping and processes: the plumbing shared by
the nodes, the head and Slurm's controller.

A process is a cluster's when it lives in one of its network namespaces or
its command line names one of the cluster's folders; a recorded process
([pid, start time]) is still the one recorded only while both match.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from .names import VclusterError, owns_link, owns_namespace


@contextlib.contextmanager
def deferred_interrupts():
    """Ctrl-C (SIGINT) and SIGTERM wait until the block is done: a rollback
    or a teardown runs to its end, then the first of them goes to the
    handler it had before (netbench's raise KeyboardInterrupt)."""
    caught = []
    stops = (signal.SIGINT, signal.SIGTERM)
    try:
        previous = {s: signal.signal(s, lambda signum, _: caught.append(signum))
                    for s in stops}
    except ValueError:                   # not the main thread: nothing to defer
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if caught and callable(previous[caught[0]]):
        previous[caught[0]](caught[0], None)


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


def shape(argv_prefix, dev, link):
    """tbf on one end of a link (egress); none for an unshaped link."""
    if link["rate_mbps"] is None:
        return
    run(argv_prefix + ["tc", "qdisc", "replace", "dev", dev, "root", "tbf",
                       "rate", f"{link['rate_mbps']}mbit", "burst", str(link["burst_bytes"]),
                       "latency", f"{link['latency_ms']}ms"])


def delete_link(link):
    run(["ip", "link", "del", link], check=False)


def delete_namespace(ns):
    stop_processes([ns])
    run(["ip", "netns", "del", ns], check=False)


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


def owned_namespaces(name):
    """Nodes `nb-<name>-n<i>`, the head `nb-<name>-hd` and Slurm's
    controller `nb-<name>-ctl`."""
    return [ns for ns in namespaces() if owns_namespace(name, ns)]


def owned_links(name):
    return [link for link in links() if owns_link(name, link)]


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

"""Run an MPI launch and end all of it: the ranks, the MPI's proxies
(hydra_pmi_proxy, prted) and the ssh sessions it opened, on this host and in
the namespace nodes of a virtual cluster, when its time is up or it is
cancelled; and say what was seen.

ReFrame ends a job that outlives its time limit by signalling the job
script's process group (SIGTERM, SIGKILL 2 s later): that reaches the MPI
launcher, never the processes it started through ssh, nor the ranks Open
MPI puts in process groups of their own.  When a link stops carrying
traffic those outlive ReFrame, and ReFrame's reason is "job timed out".

So netbench.rfm.launch runs the MPI launcher under `supervise()`:

* every process of the launch carries NETBENCH_LAUNCH_ID=<tag> in its
  environment (the launcher passes it to the ranks, the cluster's ssh
  client sends it to the proxies); the ssh sessions serving them are their
  sshd ancestors.  `end_launch()` kills exactly those, nothing else;
* the job's output passes through, and the last line and when it came are
  kept; the links of a virtual cluster's nodes are read once a second
  (the counters of checks/links.py, and whether the link is up);
* a little before the job's time limit (`--time-limit`, ReFrame's), or on
  SIGTERM/SIGINT/SIGHUP, it ends the launch and writes one line on stderr,
  `netbench.launch: stopped ...: no progress for N s (last output: ...);
  the link to node X stopped carrying traffic ...; ranks not finished:
  ...`, which the checks give as the fail reason (checks/slurm.py).
"""

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..results.benchmark import LAUNCH_LEFT_BEHIND, rank_placements

TAG = "NETBENCH_LAUNCH_ID"
#: how each launcher tells a rank its number; srun's MPI ranks carry one
#: too (Slurm's mpi/pmi2 plugin sets PMI_RANK for each task), so
#: SLURM_PROCID, which every srun task has, is not among them
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
#: sshd's per-connection processes (OpenSSH 9.8 renamed them)
SSHD_NAMES = ("sshd", "sshd-session")
#: the time limit's share kept to end the launch and report before ReFrame
#: ends the job itself (its grace between SIGTERM and SIGKILL is 2 s)
MARGIN_FRACTION, MARGIN_MIN_S, MARGIN_MAX_S = 0.1, 5.0, 15.0
#: how often the link counters are read
SAMPLE_S = 1.0
#: how long what outlives the launcher may take to end by itself before it
#: is killed: inside a Slurm allocation prterun returns while the srun that
#: ran its daemons is still closing their step, and an srun killed then
#: leaves the step to Slurm's cleanup: the job's next srun waits for it
#: ("step creation temporarily disabled", ~2 s) and the job stays
#: COMPLETING (docs/explanation/platform-facts.md)
LEFTOVER_GRACE_S = 1.0
LINE_MAX = 160


def new_tag():
    return f"{os.getpid()}-{secrets.token_hex(6)}"


# ---- the processes of one launch ------------------------------------------

def _environ(pid):
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0")
                if "=" in item)


def _stat(pid):
    """(command name, parent PID), or None for a process that is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the name is in parentheses and may hold spaces or parentheses itself
    name = text[text.index("(") + 1:text.rindex(")")]
    return name, int(text[text.rindex(")") + 2:].split()[1])


def _pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def tagged(tag):
    """{pid: environment} of the processes that carry the launch's tag."""
    found = {}
    for pid in _pids():
        env = _environ(pid)
        if env.get(TAG) == tag:
            found[pid] = env
    return found


def _ancestors(pid):
    found = set()
    while pid > 1 and pid not in found:
        found.add(pid)
        pid = (_stat(pid) or ("", 0))[1]
    return found


def remote_chain(pid, mine):
    """The processes between `pid` and the listening sshd that started its
    session (the proxy, the session's shell, sshd's per-connection
    processes); [] when `pid` descends from `mine` (this supervisor and its
    ancestors: a user's own ssh login stays) or from no sshd."""
    chain, parent = [], (_stat(pid) or ("", 0))[1]
    while parent > 1 and parent not in mine:
        name, grandparent = _stat(parent) or ("", 0)
        if name in SSHD_NAMES and (_stat(grandparent) or ("",))[0] not in SSHD_NAMES:
            # `parent` listens: the chain below it is the launch's session
            return chain if chain and (_stat(chain[-1]) or ("",))[0] in SSHD_NAMES else []
        chain.append(parent)
        parent = grandparent
    return []


def unfinished_ranks(tag):
    """Rank numbers of the launch's ranks still running."""
    ranks = set()
    for env in tagged(tag).values():
        rank = next((env[v] for v in RANK_VARIABLES if v in env), None)
        if rank is not None and rank.isdigit():
            ranks.add(int(rank))
    return sorted(ranks)


def end_launch(tag, deadline_s=1.5):
    """SIGKILL every process of the launch and, on the nodes, the processes
    between them and their sshd (proxies, ssh sessions), until none is
    left or `deadline_s` passed; how many were killed."""
    mine = _ancestors(os.getpid())
    killed = set()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        pids = set(tagged(tag))
        for pid in list(pids):
            pids.update(remote_chain(pid, mine))
        pids = {p for p in pids - mine if _alive(p)}
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    return len(killed)


def ended_by_itself(tag, grace_s):
    """Whether every process of the launch ends within `grace_s`."""
    end = time.monotonic() + grace_s
    while any(_alive(pid) for pid in tagged(tag)):
        if time.monotonic() >= end:
            return False
        time.sleep(0.02)
    return True


def end_leftovers(tag, err, grace_s=LEFTOVER_GRACE_S):
    """End what of the launch outlived its launcher by more than `grace_s`,
    and say so: MPICH's mpiexec, refused by one node's sshd, exited while
    its ssh session to another node was still starting the proxy (CI: the
    session's shell ran the node's ~/.bashrc, pyenv waiting on its lock),
    and that session outlived the launch."""
    if ended_by_itself(tag, grace_s):
        return
    killed = end_launch(tag)
    if killed:
        err.write(f"{LAUNCH_LEFT_BEHIND}: {killed} processes (MPI proxies, ssh sessions)\n")


def _alive(pid):
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ---- what was seen ----------------------------------------------------------

def cluster_json(hostfile):
    """The state of the virtual cluster whose hostfile this is (its
    cluster.json beside it); {} for any other hostfile."""
    if not hostfile:
        return {}
    try:
        state = json.loads((Path(hostfile).parent / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def node_names(hostfile):
    """{address: node name} of the virtual cluster whose hostfile this is;
    {} for any other hostfile (whose entries are what the site calls its
    hosts)."""
    try:
        return {n["address"]: n["name"] for n in cluster_json(hostfile).get("nodes", [])}
    except (KeyError, TypeError):
        return {}


def cluster_links(hostfile):
    """{node name: sysfs folder of its link's host end} of the virtual
    cluster whose hostfile this is (its cluster.json beside it); {} for
    any other hostfile."""
    if not hostfile:
        return {}
    try:
        state = json.loads((Path(hostfile).parent / "cluster.json").read_text())
        return {n["name"]: Path("/sys/class/net") / n["veth"] for n in state["nodes"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def read_link(folder):
    """(bytes through the link, its operational state), or (None, state)."""
    try:
        total = sum(int((folder / "statistics" / f).read_text()) for f in ("rx_bytes",
                                                                             "tx_bytes"))
        return total, (folder / "operstate").read_text().strip()
    except (OSError, ValueError):
        return None, "gone"


class Watch:
    """The job's last output line and when it came, the header's hosts of
    the ranks, and when each node's link last carried traffic."""

    def __init__(self, links):
        self.start = self.last_output = time.monotonic()
        self.last_line, self.header = "", ""
        self.links = links
        self.moved = {name: self.start for name in links}
        self.seen = {name: read_link(folder) for name, folder in links.items()}
        self.lock = threading.Lock()

    def line(self, text):
        with self.lock:
            self.last_output = time.monotonic()
            if text.strip():
                self.last_line = text.strip()
            if text.startswith("# rank "):
                self.header += text

    def sample(self):
        now = time.monotonic()
        for name, folder in self.links.items():
            state = read_link(folder)
            if state[0] != self.seen[name][0]:
                self.moved[name] = now
            self.seen[name] = state

    def stalled_links(self, now):
        """The nodes whose links carried nothing since the job's output
        stopped (or are not up), with the seconds since they last moved."""
        quiet_since = self.last_output
        return [(name, now - self.moved[name], self.seen[name][1])
                for name in self.links
                if self.moved[name] <= quiet_since + SAMPLE_S or self.seen[name][1] != "up"]

    def reason(self, ranks, now=None):
        now = time.monotonic() if now is None else now
        parts = [f"no progress for {now - self.last_output:.0f} s"
                 + (f" (last output: {self.last_line[:LINE_MAX]!r})" if self.last_line else "")]
        for name, quiet, state in self.stalled_links(now):
            parts.append(f"the link to node {name} stopped carrying traffic "
                         f"{quiet:.0f} s ago" + ("" if state == "up" else f" (it is {state})"))
        hosts = {rank: host for rank, (host, _) in rank_placements(self.header).items()}
        if ranks:
            parts.append("ranks not finished: " + ", ".join(
                f"{r} on {hosts[r]}" if r in hosts else str(r) for r in ranks))
        return "; ".join(parts)


# ---- why a launch started no rank ---------------------------------------------

#: seconds each node has to answer ssh once a launch has failed before any
#: rank started
REACH_TIMEOUT_S = 5


def hostfile_hosts(hostfile):
    """The hosts of an MPI hostfile: `host`, `host:slots` or `host slots=N`
    lines, comments and blank lines left out."""
    try:
        lines = Path(hostfile).read_text().splitlines()
    except OSError:
        return []
    hosts = [line.split("#", 1)[0].split() for line in lines]
    return [words[0].split(":", 1)[0] for words in hosts if words]


def unreachable_hosts(hostfile, env):
    """(host, ssh's last line) of each host of the hostfile that the launch's
    ssh agent cannot run `true` on, asked together.  Hydra's report of a
    proxy it could not start can lose ssh's own words (the proxy's exit
    outruns its stderr: CI, a node whose sshd was killed, "process manager
    error waiting for completion" alone), so the node is asked again here."""
    agent = env.get("NETBENCH_SSH_AGENT")
    if not agent:
        return []
    where = ["ip", "netns", "exec", env["NETBENCH_LAUNCH_NETNS"]] \
        if env.get("NETBENCH_LAUNCH_NETNS") else []
    asked = {host: subprocess.Popen(
        where + [agent, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={REACH_TIMEOUT_S}",
                 host, "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, errors="replace")
        for host in dict.fromkeys(hostfile_hosts(hostfile))}
    found = []
    for host, proc in asked.items():
        try:
            _, said = proc.communicate(timeout=REACH_TIMEOUT_S * 3)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, said = proc.communicate()
            said = said or f"no answer in {REACH_TIMEOUT_S * 3} s"
        if proc.returncode:
            lines = [line.strip() for line in said.splitlines() if line.strip()]
            found.append((host, lines[-1][:LINE_MAX] if lines else f"exit {proc.returncode}"))
    return found


# ---- the supervision ---------------------------------------------------------

def margin(time_limit):
    return min(MARGIN_MAX_S, max(MARGIN_MIN_S, MARGIN_FRACTION * time_limit))


def _relay(stream, watch, out):
    for line in iter(stream.readline, ""):
        watch.line(line)
        out.write(line)
        out.flush()


def _wake_on_exit(proc, wake):
    proc.wait()
    wake.set()


def supervise(argv, env, time_limit=None, hostfile=None, out=None, err=None):
    """Run `argv` (the MPI launcher) with `env`, which holds the launch's
    tag (TAG; the launcher's command line forwards it), relay its stdout;
    end the whole launch before `time_limit` (seconds, ReFrame's) or when
    signalled.  The launcher's exit code, 124 when its time ran out, 128+N
    for signal N."""
    out, err = out or sys.stdout, err or sys.stderr
    tag = env[TAG]
    watch = Watch(cluster_links(hostfile))
    stopped = threading.Event()
    #: set when the launcher exits or a signal came: the loop below wakes
    #: at once instead of at its next sample (a launch of the focused
    #: default run is 1-2 s; a whole sample's wait added 0.5 s to each)
    wake = threading.Event()
    cause = {}

    def stop(signum, _frame):
        cause.setdefault("signal", signum)
        stopped.set()
        wake.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, errors="replace",
                            bufsize=1)
    relay = threading.Thread(target=_relay, args=(proc.stdout, watch, out), daemon=True)
    relay.start()
    threading.Thread(target=_wake_on_exit, args=(proc, wake), daemon=True).start()
    deadline = (watch.start + time_limit - margin(time_limit)) if time_limit else None
    while proc.poll() is None and not stopped.is_set():
        if deadline and time.monotonic() >= deadline:
            cause["deadline"] = time_limit
            break
        watch.sample()
        wake.wait(SAMPLE_S)
    if proc.poll() is not None and not cause:
        # first: what outlived the launcher may hold its stdout open
        end_leftovers(tag, err)
        relay.join(5)
        if proc.returncode and hostfile:
            # before any rank (a node down before the job) or during the
            # run (a node that dropped out): the node by its name, with
            # ssh's words (netbench.results.sweep.unreachable_nodes)
            what = "the launch lost a node" if watch.header else "the launcher started no rank"
            names = node_names(hostfile)
            unreached = unreachable_hosts(hostfile, env)
            for host, said in unreached:
                named = f" (node {names[host]})" if host in names else ""
                err.write(f"netbench.launch: {what}; ssh to {host}{named} fails: {said}\n")
            if unreached:
                # the job's other nodes, so that a report names every node
                # even when no rank started to say where it ran
                others = [names.get(h, h) for h in dict.fromkeys(hostfile_hosts(hostfile))
                          if h not in dict(unreached)]
                err.write(f"netbench.launch: ssh reaches {' '.join(others) or 'no node'}\n")
        err.flush()
        return proc.returncode
    watch.sample()
    ranks = unfinished_ranks(tag)
    killed = end_launch(tag)
    proc.wait()
    relay.join(2)
    if "deadline" in cause:
        how = (f"stopped the job {time.monotonic() - watch.start:.0f} s into its "
               f"{time_limit:.0f} s time limit")
        code = 124
    else:
        how = f"stopped the job on {signal.Signals(cause['signal']).name}"
        code = 128 + cause["signal"]
    err.write(f"netbench.launch: {how}: {watch.reason(ranks)}; ended {killed} processes "
              f"of the launch (ranks, MPI proxies, ssh sessions)\n")
    err.flush()
    return code

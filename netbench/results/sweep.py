"""The output of netbench's `sweep` mode (reframe_checks/src/netbench.c):
every pair of ranks, one rank per node, measured in round-robin rounds.

Read by the benchmark's own description of itself, as every mode's output
(results.benchmark): the table under `# columns:`, whose rows are one
(pair, direction, size) each, the `# rank R host H` placement lines, the
`@` summary figures, and the per-rank CPU lines
`# rank R cpu_seconds C wall_seconds W wait_seconds S wait_cpu_seconds U`.

Rows with `latency` 1 are the pair's ping-pong (half the round trip, timed
by the pair's lower rank, printed once per pair as src < dst): a round trip
has no direction, so both directed pairs carry it.  Rows with `latency` 0
are one-way bandwidth, `src` sending to `dst`.
"""

import math
import re
from dataclasses import dataclass, field

from . import lost
from .benchmark import parse_output, rank_placements


@dataclass
class Link:
    """What the sweep measured from one end to the other."""
    latency_us: float = None
    #: message size in bytes -> one-way bandwidth, 10^6 bit/s
    bandwidth_mbps: dict = field(default_factory=dict)


@dataclass
class RankCpu:
    """What the sweep cost one rank: waiting ranks sleep, so their
    wait_cpu_seconds are a small part of their wait_seconds."""
    cpu_seconds: float
    wall_seconds: float
    wait_seconds: float
    wait_cpu_seconds: float


@dataclass
class SweepResult:
    #: rank -> host it ran on
    hosts: dict
    #: (src rank, dst rank) -> Link, both directions of every measured pair
    by_rank: dict
    #: (round, lower rank, higher rank) of every measured pair, in order
    schedule: list
    rounds: int
    pairs: int
    sweep_seconds: float
    order: str
    cpu: dict
    #: rank -> its process ID (`pid P` of the placement line; older
    #: benchmarks did not print it)
    pids: dict = field(default_factory=dict)

    @property
    def finished(self):
        """The benchmark printed its closing figures: every pair was swept."""
        return self.sweep_seconds is not None

    @property
    def by_host(self):
        """(src host, dst host) -> Link.  With one rank per node each host
        pair is one rank pair; where several rank pairs share a host pair
        (ranks on one host) it holds the worst of them: the highest latency
        and the lowest bandwidth, as the sweep looks for bad links."""
        worst = {}
        for (src, dst), link in self.by_rank.items():
            key = (self.hosts.get(src, str(src)), self.hosts.get(dst, str(dst)))
            seen = worst.setdefault(key, Link())
            if link.latency_us is not None and (seen.latency_us is None
                                                or link.latency_us > seen.latency_us):
                seen.latency_us = link.latency_us
            for nbytes, mbps in link.bandwidth_mbps.items():
                seen.bandwidth_mbps[nbytes] = min(mbps, seen.bandwidth_mbps.get(nbytes, mbps))
        return worst

    def measurements(self):
        """by_host in the form netbench.fleet.judge takes: (src, dst) ->
        {"latency_us": float or None, "bw_Mbps": {bytes: Mbit/s}}."""
        return {pair: {"latency_us": link.latency_us, "bw_Mbps": dict(link.bandwidth_mbps)}
                for pair, link in self.by_host.items()}


def round_robin(n):
    """The rounds of disjoint pairs (a, b), a < b, that the benchmark
    measures n ranks in, as netbench.c's round_robin (the circle method):
    rank m-1 stays, the others rotate; for odd n a phantom rank makes
    m = n + 1 and its partner sits the round out."""
    m = n + 1 if n % 2 else n
    rounds = []
    for r in range(m - 1):
        pairs = []
        for i in range(m // 2):
            x, y = (m - 1, r) if i == 0 else ((r + i) % (m - 1), (r - i) % (m - 1))
            if x < n and y < n:
                pairs.append((min(x, y), max(x, y)))
        rounds.append(pairs)
    return rounds


_PID = re.compile(r"^# rank (\d+) host \S+ cpu \d+ allowed \S+ pid (\d+)", re.MULTILINE)
_CPU = re.compile(r"^# rank (\d+) cpu_seconds (\S+) wall_seconds (\S+) wait_seconds (\S+) "
                  r"wait_cpu_seconds (\S+)", re.MULTILINE)
_ORDER = re.compile(r"^@ order (\w+)", re.MULTILINE)


def check_figures(row):
    """ValueError naming the pair for a figure that is not finite: a NaN
    would vanish in by_host's worst-of and judge nothing."""
    for column in ("usec", "Mbps"):
        value = row.get(column)
        if value is not None and not math.isfinite(value):
            raise ValueError(f"{int(row['src'])}->{int(row['dst'])} at {int(row['bytes'])} "
                             f"bytes: {column}: expected a finite figure, got {value!r}")


def parse_sweep(text):
    """SweepResult of one `netbench sweep` run's output."""
    rows, summary = parse_output(text)
    by_rank, schedule = {}, []
    for row in rows:
        check_figures(row)
        src, dst = int(row["src"]), int(row["dst"])
        if row["latency"]:
            schedule.append((int(row["round"]), src, dst))
            for pair in ((src, dst), (dst, src)):
                by_rank.setdefault(pair, Link()).latency_us = row["usec"]
        else:
            by_rank.setdefault((src, dst), Link()).bandwidth_mbps[int(row["bytes"])] = \
                row["Mbps"]
    order = _ORDER.search(text)
    return SweepResult(
        hosts={rank: host for rank, (host, _) in rank_placements(text).items()},
        by_rank=by_rank, schedule=schedule,
        rounds=int(summary.get("rounds", 0)), pairs=int(summary.get("pairs", 0)),
        sweep_seconds=summary.get("sweep_seconds"),
        order=order.group(1) if order else None,
        cpu={int(m[0]): RankCpu(*map(float, m[1:])) for m in _CPU.findall(text)},
        pids=unique_pids(_PID.findall(text)))


def unique_pids(found):
    """{pid: rank} of the (rank, pid) placement lines: only a PID that one
    rank has, as ranks on different hosts may share one."""
    ranks = {}
    for rank, pid in found:
        ranks.setdefault(int(pid), []).append(int(rank))
    return {pid: owners[0] for pid, owners in ranks.items() if len(owners) == 1}


# -- a node that stopped answering ---------------------------------------------

#: How a launcher names a process or node it lost, in the job's stdout and
#: stderr (tests/data/sweep_lost/ holds real ones): by PID and the host as
#: the hostfile names it, by rank, or by host name.  A rank that *called*
#: MPI_Abort is not among them: it survived, and saw its peer go.  Slurm's
#: words, and the launchers' about a remote daemon, come before these
#: (netbench.results.lost, which also reads srun's task lines).
LOST = (
    # MPICH's hydra: the first process that terminated badly
    re.compile(r"^=\s+(?:RANK (?P<rank>\d+) )?PID (?P<pid>\d+) RUNNING AT (?P<host>\S+)",
               re.MULTILINE),
    # Open MPI's mpirun/prterun: a rank that exited on a signal
    re.compile(r"\bnoticed\s+that\s+process\s+rank\s+(?P<rank>\d+)\s+with\s+PID\s+"
               r"(?P<pid>\d+)\s+on\s+node\s+(?P<host>\S+)\s+exited"),
    # Open MPI: a rank whose peer hung up; a daemon that did not report back
    re.compile(r"^\s*Peer host:\s+(?P<host>\S+)", re.MULTILINE),
    re.compile(r"^\s*Remote host:\s+(?P<host>\S+)", re.MULTILINE),
    # ssh, the launchers' agent: the node's sshd went away
    re.compile(r"^Connection to (?P<host>\S+) closed by remote host", re.MULTILINE),
)


def placed_host(sweep, rank=None, pid=None, host=None, job_nodes=None):
    """The host of the sweep's placement lines that a launcher's report
    means: by rank, else by PID, else by name (a Slurm node's through the
    job's task layout, `job_nodes`: netbench.results.lost.as_placed); None
    when none matches (an address, a host that ran no rank)."""
    if rank is not None and int(rank) in sweep.hosts:
        return sweep.hosts[int(rank)]
    if pid is not None and int(pid) in sweep.pids:
        return sweep.hosts.get(sweep.pids[int(pid)])
    if host in set(sweep.hosts.values()):
        return host
    return lost.as_placed(host, sweep.hosts, job_nodes) if job_nodes and host else None


def reports(text, patterns):
    """(position, {rank, pid, host}) of every match of `patterns` in `text`."""
    for pattern in patterns:
        for match in pattern.finditer(text):
            yield match.start(), match.groupdict()


def first_reported(sweep, said, job_nodes=None):
    """The host of the first of the reports `said` ((position, what) as
    reports()) that names a node of the sweep; None when none does."""
    found = [(at, host) for at, what in said
             for host in [placed_host(sweep, **what, job_nodes=job_nodes)] if host is not None]
    return min(found)[1] if found else None


def lost_hosts(sweep, launcher_text, job_nodes=None):
    """The nodes that stopped answering during a sweep that did not
    finish; [] when it finished or no report names a node of the sweep.
    Slurm's "Node failure on" decides first (every node it names that is
    the job's); else the first report of the launcher about a daemon it
    lost, else the first that names a rank's death: the cause, as the
    launcher takes the other ranks down after it (netbench.results.lost).
    `job_nodes`: the job's nodes in Slurm's order (one rank on each), when
    Slurm's names may not be the nodes' own."""
    if sweep.finished:
        return []
    text = launcher_text or ""
    said = lost.slurm_lost(text, sweep.hosts, job_nodes)
    if said:
        return said
    deaths = [*reports(text, LOST), *((at, {"rank": task, "host": node})
                                      for at, node, task in lost.srun_task_deaths(text))]
    for said in (list(reports(text, lost.DAEMON_LOST)), deaths):
        first = first_reported(sweep, said, job_nodes)
        if first:
            return [first]
    return []


#: netbench's launch naming a node ssh cannot reach once the launcher failed
#: (netbench.rfm.supervise): the host as the hostfile names it and, on a
#: virtual cluster, the node's name; then ssh's own words
UNREACHED = re.compile(r"^netbench\.launch: [^;\n]*; ssh to (?P<host>\S+)"
                       r"(?: \(node (?P<name>[^)\s]+)\))? fails: (?P<said>.*)$", re.MULTILINE)


#: netbench's launch, stopping a job that made no progress: a node whose
#: link is not up (netbench.rfm.supervise.Watch.reason)
LINK_DOWN = re.compile(r"the link to node (?P<name>[^\s;]+) stopped carrying traffic "
                       r"(?P<ago>\d+) s ago \(it is (?P<state>[^)\s]+)\)")


def unreachable_nodes(launcher_text):
    """{node: why} of the nodes the job's launch could not reach by ssh,
    before any rank started (a link down before the sweep) or after one
    dropped out: by the node's name where the launch knew it, else as the
    hostfile names it; why in ssh's words ("... No route to host").  And
    a node whose link went down mid-sweep, which the launch saw when it
    stopped the stalled job."""
    text = launcher_text or ""
    found = {}
    for match in UNREACHED.finditer(text):
        found.setdefault(match["name"] or match["host"], match["said"].strip())
    for match in LINK_DOWN.finditer(text):
        found.setdefault(match["name"], f"its link is {match['state']}: it stopped carrying "
                                        f"traffic {match['ago']} s before the launch ended")
    return found


#: netbench's launch naming the nodes it could reach, beside those it could not
REACHED = re.compile(r"^netbench\.launch: ssh reaches (?P<nodes>.*)$", re.MULTILINE)


def reached_nodes(launcher_text):
    """The nodes the launch reached by ssh when it could not reach some
    (netbench.rfm.supervise): the job's other nodes, by name."""
    found = []
    for match in REACHED.finditer(launcher_text or ""):
        if match["nodes"].strip() != "no node":
            found += match["nodes"].split()
    return sorted(set(found))

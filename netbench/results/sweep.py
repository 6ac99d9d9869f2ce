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

import re
from dataclasses import dataclass, field

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


_CPU = re.compile(r"^# rank (\d+) cpu_seconds (\S+) wall_seconds (\S+) wait_seconds (\S+) "
                  r"wait_cpu_seconds (\S+)", re.MULTILINE)
_ORDER = re.compile(r"^@ order (\w+)", re.MULTILINE)


def parse_sweep(text):
    """SweepResult of one `netbench sweep` run's output."""
    rows, summary = parse_output(text)
    by_rank, schedule = {}, []
    for row in rows:
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
        cpu={int(m[0]): RankCpu(*map(float, m[1:])) for m in _CPU.findall(text)})

"""The output of netbench's benchmark (reframe_checks/src/netbench.c), read
by its own description of itself, never by position:

* `# columns: bytes usec ...` names the table's columns; each whole row
  below it is one message size;
* `@ key value` lines are the run's summary figures (latency_usec,
  peak_Mbps, nhalf_bytes, verify_errors, sweep_seconds, ...);
* `# rank N host H cpu C allowed A,B` says where each rank ran;
* after a rank died, the MPI launcher's report of it (launcher_failure).

A column the benchmark adds later changes nothing that is read by name.
"""

import re
import signal
from collections import Counter

from . import record

#: the unit of each column the benchmark prints (seen in its `# columns:`
#: headers); a column not named here has no unit ("")
COLUMN_UNITS = {"bytes": "B", "usec": "us", "usec_min": "us", "usec_max": "us",
                "usec_lo": "us", "usec_hi": "us",
                "mad_pct": "%", "MBps": "MB/s", "MBps_low": "MB/s", "MBps_high": "MB/s",
                "MBps_mean": "MB/s", "Mbps": "Mbit/s", "samples": "", "reps": "",
                "connections": "", "runs": ""}


class MissingFigure(ValueError):
    """A figure the caller asked for is not in the output (a run cut short)."""


def _numbers(fields):
    try:
        return [float(f) for f in fields]
    except ValueError:
        return None


def table_columns(text):
    """The column names of the last `# columns:` header, [] without one."""
    found = re.findall(r"^# columns:(.*)$", text, re.MULTILINE)
    return found[-1].split() if found else []


def parse_output(text):
    """(table rows as dicts, summary dict) of one netbench run.  Only whole
    rows count: a run whose rank died leaves a row cut where the output
    buffer ended, followed by the launcher's banner (=====...), neither of
    which is a measurement."""
    columns, rows, summary = None, [], {}
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("# columns:"):
            columns = line.split(":", 1)[1].split()
        elif line.startswith("@ "):
            values = _numbers(fields[2:])
            if len(fields) == 3 and values:
                summary[fields[1]] = values[0]
        elif columns and fields and not line.startswith("#"):
            values = _numbers(fields)
            if values and len(values) == len(columns):
                rows.append(dict(zip(columns, values)))
    return rows, summary


def summary_figure(summary, key, name="the output"):
    """The `@ key value` figure, or MissingFigure naming what is missing."""
    if key not in summary:
        raise MissingFigure(f"no '@ {key}' figure in {name}: the benchmark did not finish")
    return summary[key]


def table_figure(rows, nbytes, column, name="the output"):
    """The table's `column` at message size `nbytes`, or MissingFigure."""
    row = next((r for r in rows if r.get("bytes") == nbytes), None)
    if row is None or column not in row:
        raise MissingFigure(f"no {column} figure at {nbytes} bytes in {name}: the "
                            f"benchmark's table has no such row")
    return row[column]


def series(name, text, y_columns):
    """One measured series of a per-case record (netbench.results.record):
    the table of `text` against message size, with the `y_columns` it has."""
    return rows_series(name, parse_output(text)[0], y_columns)


def rows_series(name, rows, y_columns):
    """The same series from rows already parsed (parse_run)."""
    return record.make_series(name, rows, y_columns, COLUMN_UNITS)


# How MPI launchers say that a rank died.  MPICH's hydra prints a banner on
# its stdout, naming the process by PID and host (and, in Intel MPI's hydra,
# by rank); Open MPI's mpirun (4.x) and prterun (5.x) say it on stderr, rank
# first.  Messages wrap across lines, hence the \s+ between words.
_HYDRA_RANK = re.compile(
    r"^=\s+RANK (\d+) PID (\d+) RUNNING AT (\S+)\s*\n=\s+KILLED BY SIGNAL: (\d+)", re.MULTILINE)
# hydra prints this banner only for a process that did not exit (!WIFEXITED),
# and its EXIT CODE is then the raw wait status: the signal's number, plus
# 128 with a core dump.  Its "EXIT STRING ... (signal N)" line follows only
# when the launch itself succeeded: not when a proxy across nodes lost its
# rank, so the code alone must say it
_HYDRA_PID = re.compile(
    r"^=\s+PID (\d+) RUNNING AT (\S+)\s*\n=\s+EXIT CODE: (\d+)", re.MULTILINE)
_OMPI_SIGNAL = re.compile(
    r"\bnoticed\s+that\s+process\s+rank\s+(\d+)\s+with\s+PID\s+(\d+)\s+on\s+node\s+(\S+)"
    r"\s+exited\s+on\s+signal\s+(\d+)")
# Open MPI's ranks say when a peer's connection dropped (the peer died); the
# rank that saw it then aborts, and prterun blames that survivor when its
# abort arrives before the dead rank's status
_OMPI_PEER_LOST = re.compile(
    r"\bpeer\s+process\s+has\s+unexpectedly\s+disconnected.*?Local\s+host:\s*(\S+)\s*\n"
    r"\s*Local\s+PID:\s*(\d+)\s*\n\s*Peer\s+host:\s*(\S+)", re.DOTALL)
# ... or only that its socket closed, naming itself alone
_OMPI_SOCKET_CLOSED = re.compile(
    r"\*\*\* An error occurred in Socket closed\s*\n.*?\*\*\* reported by process \[\d+,(\d+)\]")
# a rank that called MPI_Abort, or whose MPI call failed (the default error
# handler aborts): MPICH says it per rank, Open MPI's error handler names the
# call and rank ("reported by process [job,rank]"), then its launcher
_MPICH_ABORT = re.compile(r"^Abort\((\d+)\) on node \d+ \(rank (\d+) in comm \d+\): (.*)$",
                          re.MULTILINE)
_OMPI_ERRHANDLER = re.compile(
    r"\*\*\* An error occurred in (\S+)\s*\n.*?\*\*\* reported by process \[\d+,(\d+)\]"
    r".*?\*\*\* (MPI_ERR_\w+): ([^\n]*)", re.DOTALL)
_OMPI_MPI_ABORT = re.compile(
    r"\bMPI_ABORT was invoked on rank (\d+) in communicator \S+"
    r"(?:\s+with errorcode (-?\d+)|\s+Proc: \S+\s+Errorcode: (-?\d+))?")
_OMPI_ABORTED = re.compile(
    r"\bhas\s+exited\s+due\s+to\s+process\s+rank\s+(\d+)\s+with\s+PID\s+(\d+)\s+on\s+"
    r"node\s+(\S+)\s+calling\s+\"abort\"")
_OMPI_EXIT = re.compile(
    r"\bdetected\s+that\s+one\s+or\s+more\s+processes\s+exited\s+with\s+non-zero\s+status"
    r".*?Process\s+name:\s+\[\S*?(\d+)\]\s+Exit\s+code:\s+(\d+)", re.DOTALL)


def _signal_name(number):
    """`signal 9 (SIGKILL)`: the number and its symbolic name, the same on
    every platform (launchers print strsignal's text, "Killed")."""
    number = int(number)
    core = " and dumped core" if number & 0x80 else ""
    number &= 0x7F
    try:
        return f"signal {number} ({signal.Signals(number).name}){core}"
    except ValueError:
        return f"signal {number}{core}"


class _Ranks:
    """Where each rank ran, by the benchmark's own header (`# rank N host
    H ... pid P`): names the rank behind a PID or host that a launcher
    reports (hydra names a PID and the hostfile's address, Open MPI a
    peer's host)."""

    def __init__(self, text):
        self.hosts, by_pid = {}, {}
        for m in PLACEMENT.finditer(text):
            self.hosts[int(m[1])] = m[2]
            if m[4]:
                by_pid.setdefault(m[4], []).append(int(m[1]))
        # PIDs of ranks on different hosts may collide: only a unique one names a rank
        self.by_pid = {pid: ranks[0] for pid, ranks in by_pid.items() if len(ranks) == 1}

    def process(self, rank=None, pid=None, host=None):
        """`rank 1 (pid 4242 on node1)`, as much of it as is known."""
        if rank is None and pid in self.by_pid:
            rank = self.by_pid[pid]
        if rank is not None and int(rank) in self.hosts:
            host = self.hosts[int(rank)]        # its name, not the hostfile's address
        where = " ".join(p for p in (f"pid {pid}" if pid and pid != "0" else "",
                                     f"on {host}" if host else "") if p)
        who = f"rank {rank}" if rank is not None else "a rank"
        return f"{who} ({where})" if where else who

    def on_host(self, host):
        """`rank 1 (on node2)`, or the ranks that host ran."""
        ranks = sorted(r for r, h in self.hosts.items() if h == host)
        if len(ranks) == 1:
            return self.process(ranks[0], None, host)
        if ranks:
            return f"a rank on {host} (one of ranks {', '.join(map(str, ranks))})"
        return f"a rank on {host}"

    def of(self, pid, host):
        """The rank number behind a PID (or the only rank of a host), or None."""
        if pid in self.by_pid:
            return self.by_pid[pid]
        ranks = [r for r, h in self.hosts.items() if h == host]
        return ranks[0] if len(ranks) == 1 else None


def _deaths(text, ranks):
    """(position, reason) of each rank the launcher reports dead: killed by a
    signal or exited with a code."""
    for m in _HYDRA_RANK.finditer(text):
        yield m.start(), f"{ranks.process(m[1], m[2], m[3])} was killed by {_signal_name(m[4])}"
    for m in _HYDRA_PID.finditer(text):
        yield m.start(), f"{ranks.process(None, m[1], m[2])} was killed by {_signal_name(m[3])}"
    for m in _OMPI_SIGNAL.finditer(text):
        yield m.start(), f"{ranks.process(m[1], m[2], m[3])} was killed by {_signal_name(m[4])}"
    for m in _OMPI_EXIT.finditer(text):
        yield m.start(), f"{ranks.process(m[1])} exited with code {m[2]}"


def _aborts(text, ranks):
    """(position, rank, reason) of each rank that aborted or whose MPI call failed."""
    for m in _MPICH_ABORT.finditer(text):
        yield m.start(), int(m[2]), f"rank {m[2]} aborted (code {m[1]}): {m[3].strip()}"
    for m in _OMPI_ERRHANDLER.finditer(text):
        yield m.start(), int(m[2]), f"rank {m[2]} failed in {m[1]}: {m[3]} ({m[4].strip()})"
    for m in _OMPI_MPI_ABORT.finditer(text):
        code = m[2] or m[3]
        yield m.start(), int(m[1]), (f"rank {m[1]} called MPI_Abort"
                                     + (f" (code {code})" if code else ""))
    for m in _OMPI_ABORTED.finditer(text):
        yield m.start(), int(m[1]), f"{ranks.process(m[1], m[2], m[3])} called MPI_Abort"


def _lost_peers(text, ranks):
    """(position, the rank that saw it, reason) of each rank whose peer's
    connection dropped (Open MPI): the peer is the cause, named by its host
    when Open MPI says it, else as the only other rank of a 2-rank job."""
    for m in _OMPI_PEER_LOST.finditer(text):
        survivor = ranks.of(m[2], m[1])
        yield (m.start(), survivor, f"{ranks.on_host(m[3])} ended unexpectedly: "
               f"{ranks.process(survivor, m[2], m[1])} lost its connection to it")
    for m in _OMPI_SOCKET_CLOSED.finditer(text):
        survivor = int(m[1])
        others = sorted(set(ranks.hosts) - {survivor})
        peer = ranks.process(others[0]) if len(others) == 1 else f"a peer of rank {survivor}"
        yield (m.start(), survivor, f"{peer} ended unexpectedly: "
               f"{ranks.process(survivor)} lost its connection to it")


def launcher_failure(text):
    """How the MPI launcher (or library) says a rank died, from the job's
    output (stdout and stderr: hydra writes to stdout, Open MPI to stderr),
    e.g. `rank 1 (pid 4242 on node1) was killed by signal 9 (SIGKILL)`, or
    that it aborted (MPI_Abort, or an MPI call's error); None when nothing
    reported a dead rank.  The first report is the cause: the ranks that
    died after it were taken down with the job.

    The benchmark's header names the rank behind a PID (MPICH's hydra names
    no rank) and each rank's host.  A rank that saw its peer's connection
    drop (Open MPI) and aborted is no cause: its lost peer is, with how the
    launcher says that peer ended if it does."""
    ranks = _Ranks(text)
    lost = list(_lost_peers(text, ranks))
    survivors = {rank for _, rank, _ in lost}
    found = list(_deaths(text, ranks))
    found += [(at, why) for at, rank, why in _aborts(text, ranks) if rank not in survivors]
    if lost and not found:
        found = [(at, why) for at, _, why in lost]
    return min(found)[1] if found else None


PLACEMENT = re.compile(
    r"^# rank (\d+) host (\S+) cpu \d+(?: allowed (\S+))?(?: pid (\d+))?", re.MULTILINE)


def rank_placements(text):
    """{rank: (host, CPUs the rank may run on)} from a run's header; an
    empty tuple where the benchmark did not say."""
    return {int(rank): (host, tuple(int(c) for c in allowed.split(",")) if allowed else ())
            for rank, host, allowed, _pid in PLACEMENT.findall(text)}


def stacked_ranks(text):
    """"host:cpuN" for each CPU that two or more ranks are pinned to alone.
    Busy-polling ranks on one CPU take turns in scheduler time slices:
    milliseconds per message, a placement error that is not the network."""
    pinned = Counter(placement for placement in rank_placements(text).values()
                     if len(placement[1]) == 1)
    return sorted(f"{host}:cpu{cpus[0]}" for (host, cpus), n in pinned.items() if n > 1)


def stacked_placements(placements):
    """stacked_ranks of a parsed run's placements ({rank: {host, cpus}})."""
    pinned = Counter((p["host"], p["cpus"][0]) for p in placements.values()
                     if len(p["cpus"]) == 1)
    return sorted(f"{host}:cpu{cpu}" for (host, cpu), n in pinned.items() if n > 1)


#: how netbench.rfm.launch's note on what a launcher left behind begins
#: (the processes it ended then): netbench's own words, never a cause
LAUNCH_LEFT_BEHIND = "netbench.launch: ended what the launcher left"

#: `# host load 1.23 0.90 0.55 ...` (/proc/loadavg) and `# host cpu_pressure
#: some avg10=3.21 ...` (/proc/pressure/cpu), which the job prints after
#: its launches: how busy the host was while it measured
_HOST_LOAD = re.compile(r"^# host load (\S+)", re.MULTILINE)
_HOST_PRESSURE = re.compile(r"^# host cpu_pressure some avg10=(\S+)", re.MULTILINE)
#: `# host core_round_trip_ns 112.4 cpus 0 1`, before and after the run
#: when ranks 0 and 1 share a host: a cache line's round trip between their
#: cores (netbench.c), which moves with the host's mode
_CORE_ROUND_TRIP = re.compile(r"^# host core_round_trip_ns ([0-9.]+) cpus", re.MULTILINE)
#: `# node HOST cpu_pressure P ranks K cpus N [rank_wait W]`, one per node
#: after the run (netbench.c): what each node of the job was doing, and the
#: longest its ranks themselves waited for a CPU (older builds print no W)
_NODE = re.compile(r"^# node (\S+) cpu_pressure ([0-9.]+) ranks (\d+) cpus (\d+)"
                   r"(?: rank_wait ([0-9.]+))?$", re.MULTILINE)


def node_conditions(text):
    """{host: {cpu_pressure, ranks, cpus[, rank_wait]}} of the `# node` lines."""
    found = {}
    for host, pressure, ranks, cpus, wait in _NODE.findall(text):
        found[host] = {"cpu_pressure": float(pressure), "ranks": int(ranks), "cpus": int(cpus)}
        if wait:
            found[host]["rank_wait"] = float(wait)
    return found


def _last_float(pattern, text):
    found = pattern.findall(text)
    try:
        return float(found[-1]) if found else None
    except ValueError:
        return None


def parse_run(text):
    """Everything one launch of the benchmark says, read once: the table
    (every column of every whole row), the `@` summaries, where each rank
    ran, how the launcher said a rank died, the host's load, the ranks'
    cores' round trip and each node's CPU pressure.  The
    record keeps this (record.run_entry); nothing reads the file again."""
    rows, summary = parse_output(text)
    return {"columns": table_columns(text), "rows": rows, "summary": summary,
            "placements": {str(rank): {"host": host, "cpus": list(cpus)}
                           for rank, (host, cpus) in rank_placements(text).items()},
            "failure": launcher_failure(text),
            "host_load": _last_float(_HOST_LOAD, text),
            "cpu_pressure": _last_float(_HOST_PRESSURE, text),
            "core_round_trip_ns": [float(v) for v in _CORE_ROUND_TRIP.findall(text)],
            "nodes": node_conditions(text)}


def started(launch):
    """Whether the benchmark of a parsed launch (parse_run) printed
    anything of its own: its table's header, a row, a summary or where a
    rank ran.  A launch that did not was its launcher's failure to start
    it (Open MPI's "PMIx server's listener thread failed to start"), not
    a measurement."""
    return bool(launch["columns"] or launch["rows"] or launch["summary"]
                or launch["placements"])

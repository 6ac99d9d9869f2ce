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
    r"^=\s+RANK (\d+) PID (\d+) RUNNING AT (\S+)\s*\n=\s+KILLED BY SIGNAL: (\d+)"
    r"(?: \(([^)\n]*)\))?", re.MULTILINE)
_HYDRA_PID = re.compile(
    r"^=\s+PID (\d+) RUNNING AT (\S+)\s*\n=\s+EXIT CODE: (\d+)", re.MULTILINE)
_HYDRA_EXIT_STRING = re.compile(
    r"TERMINATED WITH THE EXIT STRING: ([^(\n]*?)\s*\(signal (\d+)\)")
_OMPI_SIGNAL = re.compile(
    r"\bnoticed\s+that\s+process\s+rank\s+(\d+)\s+with\s+PID\s+(\d+)\s+on\s+node\s+(\S+)"
    r"\s+exited\s+on\s+signal\s+(\d+)(?:\s+\(([^)]*)\))?")
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


def _signal_name(number, name):
    name = " ".join((name or "").split())
    if not name:
        try:
            name = signal.strsignal(int(number)) or ""
        except ValueError:
            name = ""
    return f"signal {number}" + (f" ({name})" if name else "")


def _process(rank, pid, host):
    where = " ".join(p for p in (f"pid {pid}" if pid and pid != "0" else "",
                                 f"on {host}" if host else "") if p)
    who = f"rank {rank}" if rank is not None else "a rank"
    return f"{who} ({where})" if where else who


def launcher_failure(text):
    """How the MPI launcher (or library) says a rank died, from the job's
    output (stdout and stderr: hydra writes to stdout, Open MPI to stderr),
    e.g. `rank 1 (pid 4242 on node1) was killed by signal 9 (Killed)`, or
    that it aborted (MPI_Abort, or an MPI call's error); None when nothing
    reported a dead rank.  The first report is the cause: the
    ranks that died after it were taken down with the job.

    MPICH's hydra names no rank, only a PID: the first of a node's ranks
    that did not exit, which is the killed one unless hydra's cleanup ended
    another rank of that node before it collected the statuses."""
    found = []
    for m in _HYDRA_RANK.finditer(text):
        found.append((m.start(), f"{_process(m[1], m[2], m[3])} was killed by "
                                 f"{_signal_name(m[4], m[5])}"))
    for m in _HYDRA_PID.finditer(text):
        # hydra's EXIT CODE is the signal's number when a signal ended the
        # rank, which its EXIT STRING says
        sig = _HYDRA_EXIT_STRING.search(text, m.end())
        if sig:
            how = f"was killed by {_signal_name(sig[2], sig[1])}"
        else:
            how = f"exited with code {m[3]}"
        found.append((m.start(), f"{_process(None, m[1], m[2])} {how}"))
    for m in _OMPI_SIGNAL.finditer(text):
        found.append((m.start(), f"{_process(m[1], m[2], m[3])} was killed by "
                                 f"{_signal_name(m[4], m[5])}"))
    for m in _OMPI_EXIT.finditer(text):
        found.append((m.start(), f"{_process(m[1], None, None)} exited with code {m[2]}"))
    for m in _MPICH_ABORT.finditer(text):
        found.append((m.start(), f"rank {m[2]} aborted (code {m[1]}): {m[3].strip()}"))
    for m in _OMPI_ERRHANDLER.finditer(text):
        found.append((m.start(), f"rank {m[2]} failed in {m[1]}: {m[3]} ({m[4].strip()})"))
    for m in _OMPI_MPI_ABORT.finditer(text):
        code = m[2] or m[3]
        found.append((m.start(), f"rank {m[1]} called MPI_Abort"
                                 + (f" (code {code})" if code else "")))
    for m in _OMPI_ABORTED.finditer(text):
        found.append((m.start(), f"{_process(m[1], m[2], m[3])} called MPI_Abort"))
    return min(found)[1] if found else None


PLACEMENT = re.compile(r"^# rank (\d+) host (\S+) cpu \d+(?: allowed (\S+))?", re.MULTILINE)


def rank_placements(text):
    """{rank: (host, CPUs the rank may run on)} from a run's header; an
    empty tuple where the benchmark did not say."""
    return {int(rank): (host, tuple(int(c) for c in allowed.split(",")) if allowed else ())
            for rank, host, allowed in PLACEMENT.findall(text)}


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


#: `# host load 1.23 0.90 0.55 ...` (/proc/loadavg) and `# host cpu_pressure
#: some avg10=3.21 ...` (/proc/pressure/cpu), which the job prints after
#: its launches: how busy the host was while it measured
_HOST_LOAD = re.compile(r"^# host load (\S+)", re.MULTILINE)
_HOST_PRESSURE = re.compile(r"^# host cpu_pressure some avg10=(\S+)", re.MULTILINE)


def _last_float(pattern, text):
    found = pattern.findall(text)
    try:
        return float(found[-1]) if found else None
    except ValueError:
        return None


def parse_run(text):
    """Everything one launch of the benchmark says, read once: the table
    (every column of every whole row), the `@` summaries, where each rank
    ran, how the launcher said a rank died, and the host's load.  The
    record keeps this (record.run_entry); nothing reads the file again."""
    rows, summary = parse_output(text)
    return {"columns": table_columns(text), "rows": rows, "summary": summary,
            "placements": {str(rank): {"host": host, "cpus": list(cpus)}
                           for rank, (host, cpus) in rank_placements(text).items()},
            "failure": launcher_failure(text),
            "host_load": _last_float(_HOST_LOAD, text),
            "cpu_pressure": _last_float(_HOST_PRESSURE, text)}

"""Compile and launch the netbench benchmark outside ReFrame, the way the
checks do (same compiler wrapper, launcher, flags and transport settings),
and parse its output.  Used by the tests, the NetPIPE comparison and
`make bench`."""

import os
import re
import signal
import subprocess
from collections import Counter
from pathlib import Path

from . import discovery, paths

SOURCE = paths.SOURCES / "netbench.c"
# Debian's MPICH can hang in MPI_Finalize (platform-facts.md): always bounded
MPI_TIMEOUT = 300


def job_environment(mpi, families, transport="shm"):
    """os.environ plus what the ReFrame environment of `mpi` sets."""
    env = dict(os.environ)
    for key, value in discovery.environment_variables(mpi, families).items():
        env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    env.update(mpi.transports[transport])
    return env


class Benchmark:
    """netbench.c compiled with one MPI."""

    def __init__(self, mpi, families, binary):
        self.mpi, self.families, self.binary = mpi, families, Path(binary)

    @classmethod
    def build(cls, mpi, families, outdir, extra_flags=("-Wall", "-Werror")):
        out = Path(outdir) / "netbench"
        subprocess.run([mpi.cc, "-O2", *extra_flags, "-o", str(out), str(SOURCE), "-lm",
                        "-lpthread"], check=True, capture_output=True,
                       env=job_environment(mpi, families))
        return cls(mpi, families, out)

    def launch_command(self, nranks, launcher_flags=None):
        flags = self.families[self.mpi.family]["launcher_flags"] if launcher_flags is None \
            else launcher_flags
        return [self.mpi.launcher, *flags.split(), "-np", str(nranks)]

    def run(self, nranks, *args, transport="shm", check=True, launcher_flags=None, prefix=()):
        argv = [*prefix, *self.launch_command(nranks, launcher_flags), str(self.binary), *args]
        return self._execute(argv, job_environment(self.mpi, self.families, transport), check)


    def run_on_cluster(self, state, nranks, ppn, *args, transport):
        """Across the nodes of a virtual cluster, as its ReFrame partition
        launches (netbench.launch over ssh)."""
        from . import launch, vcluster
        env = {**job_environment(self.mpi, self.families, transport),
               **vcluster.launch_environment(state)}
        argv = launch.command(nranks, ppn, [str(self.binary), *args], env=env,
                              families=self.families)
        return self._execute(argv, env, check=True)

    def _execute(self, argv, env, check):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=MPI_TIMEOUT, env=env)
        if check and proc.returncode != 0:
            why = launcher_failure(proc.stdout + proc.stderr)
            raise RuntimeError(f"{self.mpi.name}: {' '.join(argv)} failed "
                               f"({why or f'exit code {proc.returncode}'}):\n{proc.stdout}\n"
                               f"{proc.stderr}")
        return proc


def _numbers(fields):
    try:
        return [float(f) for f in fields]
    except ValueError:
        return None


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

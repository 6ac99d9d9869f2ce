"""Compile and launch the netbench benchmark outside ReFrame, the way the
checks do (same compiler wrapper, launcher, flags and transport settings).
Used by the tests, the NetPIPE comparison and `make bench`; its output is
read by netbench.results.benchmark."""

import os
import subprocess
from pathlib import Path

from .. import benchspec
from ..probe import discovery
from ..judgement import knobs as judging_knobs
from ..results.benchmark import launcher_failure, parse_run, started

# Debian's MPICH can hang in MPI_Finalize (docs/explanation/platform-facts.md): always bounded
MPI_TIMEOUT = 300


def job_environment(mpi, families, transport="shm"):
    """os.environ plus what the ReFrame environment of `mpi` sets."""
    env = dict(os.environ)
    for key, value in discovery.environment_variables(mpi, families).items():
        env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    env.update(mpi.transports[transport])
    return env


class Benchmark:
    """The benchmark (benchspec: netbench/data/benchmark.yaml) compiled with
    one MPI."""

    def __init__(self, mpi, families, binary):
        self.mpi, self.families, self.binary = mpi, families, Path(binary)

    @classmethod
    def build(cls, mpi, families, outdir, extra_flags=("-Wall", "-Werror")):
        out = Path(outdir) / benchspec.recipe()["executable"]
        subprocess.run(benchspec.compile_command(mpi.cc, out, extra_flags), check=True,
                       capture_output=True, env=job_environment(mpi, families))
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
        launches (netbench.rfm.launch over ssh)."""
        from .. import vcluster
        from ..rfm import launch
        env = {**job_environment(self.mpi, self.families, transport),
               **vcluster.launch_environment(state)}
        argv = launch.command(nranks, ppn, [str(self.binary), *args], env=env,
                              families=self.families)
        return self._execute(argv, env, check=True)

    def measure(self, nranks, *args, **options):
        """One launch (run) parsed once, as a check's launch is
        (results.benchmark.parse_run): {rows, summary, placements, ...}."""
        return parse_run(self.run(nranks, *args, **options).stdout)

    def measure_on_cluster(self, state, nranks, ppn, *args, transport):
        """One launch across a virtual cluster (run_on_cluster), parsed once."""
        return parse_run(self.run_on_cluster(state, nranks, ppn, *args,
                                             transport=transport).stdout)

    def _execute(self, argv, env, check):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=MPI_TIMEOUT, env=env)
        # a launcher that failed before the benchmark printed anything (Open
        # MPI's "PMIx server's listener thread failed to start") measured
        # nothing: launched again, as the checks' jobs do
        for _ in range(judging_knobs.load().restarts):
            if proc.returncode == 0 or started(parse_run(proc.stdout)):
                break
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=MPI_TIMEOUT,
                                  env=env)
        if check and proc.returncode != 0:
            why = launcher_failure(proc.stdout + proc.stderr)
            raise RuntimeError(f"{self.mpi.name}: {' '.join(argv)} failed "
                               f"({why or f'exit code {proc.returncode}'}):\n{proc.stdout}\n"
                               f"{proc.stderr}")
        return proc

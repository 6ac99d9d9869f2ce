"""A test's own virtual cluster and the ways into it."""

import contextlib
import os
import subprocess
import sys

from conftest import require
from netbench import paths, vcluster

NETBENCH = [sys.executable, "-m", "netbench.cli"]


def require_root():
    require(os.geteuid() == 0, "the virtual cluster needs root (network namespaces)")
    require(os.path.exists(vcluster.SSHD), "sshd missing: apt-get install openssh-server")


@contextlib.contextmanager
def cluster(name, **settings):
    """A cluster for the duration of a `with` block, taken down however the
    block ends; the block's failure wins over a teardown failure."""
    require_root()
    vcluster.down(name)
    state, created = vcluster.up(name, **settings)
    assert created
    try:
        yield state
    finally:
        vcluster.down(name)
        assert vcluster.leftovers(name) == []


def netbench_cli(*args, **kw):
    return subprocess.run(NETBENCH + list(args), capture_output=True, text=True, timeout=120,
                          cwd=paths.REPO, **kw)


def ssh(state, node, command):
    return subprocess.run(vcluster.ssh_command(state, node, command), capture_output=True,
                          text=True, timeout=30)

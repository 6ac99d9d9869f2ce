"""This checkout as a run records it: netbench's commit and the Spack
lock's hash, read once per process, when the run starts (a report
published later copies them from the run's records, never reads them
anew)."""

import functools
import hashlib
import subprocess

from .. import paths


@functools.cache
def commit():
    """`git describe --always --dirty` of the checkout, "unknown" without git."""
    try:
        # --no-optional-locks: read only, never take .git/index.lock from
        # whoever else works in this checkout
        out = subprocess.run(["git", "--no-optional-locks", "-C", str(paths.REPO), "describe",
                              "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


@functools.cache
def spack_lock_sha256():
    """The SHA-256 of spack.lock, None without a Spack environment."""
    lock = paths.REPO / "spack.lock"
    return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else None

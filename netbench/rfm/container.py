"""The netbench image as ReFrame's checks run it: which runtime this host
has, the image's name, and the flags of every `podman run` of the
benchmark (data/container_run.yaml, with the opt-ins the environment
names).  Building the image is netbench/tools/image.py's; what the parity
check makes of its runs, netbench/results/container_parity.py's.
"""

import json
import os
import shlex
import shutil
import subprocess

from .. import paths
from ..datafiles import DataError, load_yaml, validate
from ..results.container_parity import SHARES_PER_RANK

IMAGE = "localhost/netbench:latest"
CONTAINERS = paths.REPO / "containers"
CACHE = paths.REPO / ".containers"
SIF = CACHE / "netbench.sif"
CONF = CONTAINERS / "containers.conf"
RUN_FLAGS_FILE = paths.DATA / "container_run.yaml"
#: replaces the data file's flags when set (e.g. "" for the runtime's default)
RUN_FLAGS_ENV = "NETBENCH_CONTAINER_FLAGS"
#: names of the data file's `opt_in` entries to add (comma-separated): the
#: flags that widen what the container reaches on the host, never shipped on
OPT_IN_ENV = "NETBENCH_CONTAINER_OPT_IN"
_FLAG_LIST = {"type": "array", "items": {"type": "string"}, "minItems": 1}
_TEXT = {"type": "string", "minLength": 1}
RUN_FLAGS_SCHEMA = {
    "type": "object", "required": ["run_flags"], "additionalProperties": False,
    "properties": {
        "run_flags": {"type": "array", "items": {
            "type": "object", "required": ["flags", "why"], "additionalProperties": False,
            "properties": {"flags": _FLAG_LIST, "why": _TEXT}}},
        "opt_in": {"type": "array", "items": {
            "type": "object", "required": ["name", "flags", "exposes", "why"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$",
                                    "description": "expected lower-case words joined by -"},
                           "flags": _FLAG_LIST, "exposes": _TEXT, "why": _TEXT}}}}}
#: in a run flag, the cgroup the container is started from; containers/bin/docker
#: puts it in at run time, in the job (container_run.yaml)
CALLER_CGROUP = "{caller_cgroup}"
#: in a run flag, the CPU weight of the container's ranks: run_flags puts in
#: the kernel's default weight of one process (cpu.shares 1024) per rank
CPU_SHARES = "{cpu_shares}"


class ContainerError(Exception):
    pass


def runtime():
    """`apptainer`, `podman`, or ContainerError saying what to install."""
    for name in ("apptainer", "podman"):
        if shutil.which(name):
            return name
    raise ContainerError("neither apptainer nor podman found: install Apptainer (clusters) "
                         "or podman and runc (apt-get install podman runc debootstrap)")


def podman_env():
    return {**os.environ, "CONTAINERS_CONF": str(CONF)}


def podman(*args, check=True, **kw):
    proc = subprocess.run(["podman", *args], env=podman_env(), text=True, **kw)
    if check and proc.returncode != 0:
        raise ContainerError(f"podman {args[0]} failed (exit {proc.returncode})")
    return proc


def image_exists(name):
    return podman("image", "exists", name, check=False).returncode == 0


def run_flags(path=RUN_FLAGS_FILE, ranks=1):
    """The flags every `podman run` of the benchmark gets: the data file's
    `run_flags` (container_run.yaml) and the `opt_in` entries named in
    NETBENCH_CONTAINER_OPT_IN, or NETBENCH_CONTAINER_FLAGS's words when
    set, with {cpu_shares} for a container of `ranks` ranks
    ({caller_cgroup} and {host_shm_size} are containers/bin/docker's, at
    run time).  ContainerError or DataError: one line naming the variable
    or the file and key."""
    if RUN_FLAGS_ENV in os.environ:
        flags = env_flags(os.environ[RUN_FLAGS_ENV])
    else:
        data = validate(load_yaml(path), RUN_FLAGS_SCHEMA, path)
        flags = [flag for entry in data["run_flags"] + opted_in(data.get("opt_in", []))
                 for flag in entry["flags"]]
    return [flag.replace(CPU_SHARES, str(SHARES_PER_RANK * ranks)) for flag in flags]


def env_flags(text):
    """NETBENCH_CONTAINER_FLAGS's words, split as the shell would."""
    try:
        return shlex.split(text)
    except ValueError as err:
        raise ContainerError(f"{RUN_FLAGS_ENV}: {err} in {text!r}") from None


def opted_in(entries):
    """The `opt_in` entries NETBENCH_CONTAINER_OPT_IN names; ContainerError
    for a name the data file does not offer."""
    wanted = [name.strip() for name in os.environ.get(OPT_IN_ENV, "").split(",")
              if name.strip()]
    offered = {entry["name"]: entry for entry in entries}
    unknown = [name for name in wanted if name not in offered]
    if unknown:
        raise ContainerError(f"{OPT_IN_ENV}: no opt-in {', '.join(map(repr, unknown))} "
                             f"(offered: {', '.join(offered) or 'none'})")
    return [offered[name] for name in dict.fromkeys(wanted)]


def run_flags_problem():
    """None, or the one line saying why the run flags cannot be read
    (reframe_checks/container.py asks once, before any case starts)."""
    try:
        run_flags()
    except (ContainerError, DataError) as err:
        return str(err)
    return None


def inspected(image):
    """podman's description of `image` (a name or an ID), or None when
    there is no such image."""
    proc = podman("image", "inspect", image, check=False, capture_output=True)
    return json.loads(proc.stdout)[0] if proc.returncode == 0 else None


def labels(image=IMAGE):
    """The image's labels (provenance: commit, MPI versions); ContainerError
    when there is no such image."""
    found = inspected(image)
    if found is None:
        raise ContainerError(f"podman image inspect failed: no image {image}")
    return found.get("Labels") or {}

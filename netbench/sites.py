"""Real clusters as ReFrame systems, described as data in
`reframe_checks/sites/<site>.yaml` (see `example-slurm.yaml`).

Each file becomes one system; each partition takes the discovered MPI
environments whose names match its `environs` regex (Spack views are
named `<mpi>-<fabric>`).  Files whose name starts with `example` are
templates and are not loaded.
"""

import re
from pathlib import Path

from . import paths, references
from .datafiles import DataError, load_yaml, require

SITES = paths.CHECKS / "sites"
#: ReFrame's schedulers that make sense for a benchmark site
SCHEDULERS = ("slurm", "squeue", "local", "pbs", "torque", "lsf", "sge", "oar", "flux")
#: ReFrame's launchers plus netbench's own (rfmconfig registers them)
LAUNCHERS = ("srun", "srunalloc", "mpirun", "mpiexec", "local", "netbench-alloc",
             "netbench-mpirun", "netbench-ssh")


def site_files(folder=SITES):
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("example"))


def load_site(path, env_names):
    """The ReFrame system of one site file, DataError naming file and key."""
    data = load_yaml(path)
    name = require(data, "name", str, path, "")
    if not re.fullmatch(r"[A-Za-z][\w-]*", name):
        raise DataError(path, "name", f"{name!r}: use letters, digits, - and _")
    hostnames = require(data, "hostnames", list, path, "")
    for i, pattern in enumerate(hostnames):
        compiled(pattern, path, f"hostnames[{i}]")
    partitions = require(data, "partitions", list, path, "")
    if not partitions:
        raise DataError(path, "partitions", "at least one partition is needed")
    classes = references.interconnect_classes()
    return {
        "name": name,
        "descr": str(data.get("descr", name)),
        "hostnames": hostnames,
        "modules_system": str(data.get("modules_system", "nomod")),
        # ReFrame's working folders stay below the repository, as for `local`
        "stagedir": str(paths.STATE / "stage"),
        "outputdir": str(paths.STATE / "output"),
        "partitions": [partition(p, f"partitions[{i}]", path, env_names, classes)
                       for i, p in enumerate(partitions)],
    }


def partition(spec, where, path, env_names, classes):
    name = require(spec, "name", str, path, where)
    scheduler = choice(spec, "scheduler", SCHEDULERS, path, where)
    launcher = choice(spec, "launcher", LAUNCHERS, path, where)
    pattern = compiled(require(spec, "environs", str, path, where), path, f"{where}.environs")
    extras = require(spec, "extras", dict, path, where)
    interconnect = require(extras, "interconnect", str, path, f"{where}.extras")
    if interconnect not in classes:
        raise DataError(path, f"{where}.extras.interconnect",
                        f"{interconnect!r} is not a class of thresholds.yaml "
                        f"({', '.join(classes)})")
    nodes = require(extras, "nodes", int, path, f"{where}.extras")
    env_vars = spec.get("env_vars", {})
    if not isinstance(env_vars, dict):
        raise DataError(path, f"{where}.env_vars", "expected a mapping NAME: value")
    part = {
        "name": name,
        "descr": str(spec.get("descr", name)),
        "scheduler": scheduler,
        "launcher": launcher,
        "access": [str(a) for a in spec.get("access", [])],
        "environs": [e for e in env_names if pattern.search(e)] or ["builtin"],
        "max_jobs": int(spec.get("max_jobs", 1)),
        "env_vars": [[str(k), str(v)] for k, v in env_vars.items()],
        "extras": {**extras, "interconnect": interconnect, "nodes": nodes},
    }
    if "time_limit" in spec:
        part["time_limit"] = str(spec["time_limit"])
    return part


def choice(spec, key, allowed, path, where):
    value = require(spec, key, str, path, where)
    if value not in allowed:
        raise DataError(path, f"{where}.{key}", f"{value!r}: use one of {', '.join(allowed)}")
    return value


def compiled(pattern, path, key):
    try:
        return re.compile(pattern)
    except (re.error, TypeError) as err:
        raise DataError(path, key, f"not a regular expression: {err}") from err


def site_systems(env_names, folder=SITES):
    return [load_site(p, env_names) for p in site_files(folder)]

"""Real clusters as ReFrame systems, described as data in
`reframe_checks/sites/<site>.yaml` (see `example-slurm.yaml`).

Each file becomes one system; each partition takes the discovered MPI
environments whose names match its `environs` regex (Spack views are
named `<mpi>-<fabric>`).  Files whose name starts with `example` are
templates and are not loaded.
"""

import re
from pathlib import Path

from .. import paths, references
from ..judgement import knobs
from ..datafiles import DataError, load_yaml, validate

SITES = paths.CHECKS / "sites"
#: ReFrame's schedulers that make sense for a benchmark site
SCHEDULERS = ("slurm", "squeue", "local", "pbs", "torque", "lsf", "sge", "oar", "flux")
#: ReFrame's launchers plus netbench's own (reframe_checks/settings.py registers them:
#: rfm/launchers.py)
LAUNCHERS = ("srun", "srunalloc", "mpirun", "mpiexec", "local", "netbench-alloc",
             "netbench-mpirun", "netbench-ssh")
#: ReFrame's modules systems (its configuration schema)
MODULES_SYSTEMS = ("nomod", "lmod", "tmod4", "envmod", "spack")
#: ReFrame's durations (reframe.utility.typecheck.Duration): seconds, or
#: days, hours, minutes and seconds in that order, e.g. 30m, 1h30m, 90s, 1d
DURATION = r"^(\d+(\.\d*)?|(?=\d)(\d+d)?(\d+h)?(\d+m)?(\d+s)?)$"

_STRING = {"type": "string"}
#: a site file, with ReFrame's rules for names (its configuration schema)
SITE_SCHEMA = {
    "type": "object",
    "required": ["name", "hostnames", "partitions"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z][\w-]*$",
                 "description": "use letters, digits, - and _, starting with a letter"},
        "descr": _STRING,
        "hostnames": {"type": "array", "items": _STRING},
        "modules_system": {"enum": list(MODULES_SYSTEMS)},
        "partitions": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["name", "scheduler", "launcher", "environs", "extras"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": r"^[A-Za-z_][\w-]*$",
                         "description": "use letters, digits, - and _, starting with a "
                                        "letter or _"},
                "descr": _STRING,
                "scheduler": {"enum": list(SCHEDULERS)},
                "launcher": {"enum": list(LAUNCHERS)},
                # one scheduler option per item (a string would be one per character)
                "access": {"type": "array", "items": _STRING},
                "time_limit": {
                    "type": ["string", "number"], "minimum": 0, "pattern": DURATION,
                    "description": "not a ReFrame duration: give seconds or "
                                   "<days>d<hours>h<minutes>m<seconds>s, e.g. 30m, 1h30m, "
                                   "90s, 1d"},
                "max_jobs": {"type": "integer", "minimum": 1},
                "environs": _STRING,
                "env_vars": {
                    "type": "object",
                    "propertyNames": {"pattern": r"^[A-Za-z_]\w*$",
                                      "description": "not an environment variable name"},
                    "additionalProperties": {"type": ["string", "number"]}},
                "extras": {
                    "type": "object",
                    "required": ["interconnect", "nodes"],
                    "properties": {
                        "interconnect": _STRING,
                        "nodes": {"type": "integer", "minimum": 1},
                        "line_rate_mbps": {"type": "number", "exclusiveMinimum": 0},
                        # a fabric where a sweep's round of pairs at once would
                        # contend: LinkSweep measures one pair at a time there
                        "sweep_rounds_contend": {"type": "boolean"},
                        # the link whose rate the job reads (netbench/probe/linerate.py):
                        # a net device, or an HCA port such as mlx5_0:1
                        "interface": {"type": "string", "pattern": r"^[\w.:@-]+$",
                                      "description": "a network interface or HCA port name"},
                        # the verdict model's knobs this partition changes: a
                        # profile of reframe_checks/references/profiles/ or a file
                        "judging_profile": {"type": "string", "minLength": 1},
                    }},
            }}},
    },
}


def site_files(folder=SITES):
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("example"))


def load_site(path, env_names):
    """The ReFrame system of one site file, DataError naming file and key."""
    data = validate(load_yaml(path), SITE_SCHEMA, path)
    for i, pattern in enumerate(data["hostnames"]):
        compiled(pattern, path, f"hostnames[{i}]")
    first = {}
    for i, spec in enumerate(data["partitions"]):
        index = first.setdefault(spec["name"], i)
        if index != i:
            raise DataError(path, f"partitions[{i}].name", f"{spec['name']!r} is already "
                                                           f"the name of partitions[{index}]")
    classes = references.interconnect_classes()
    name = data["name"]
    return {
        "name": name,
        "descr": data.get("descr", name),
        "hostnames": data["hostnames"],
        "modules_system": data.get("modules_system", "nomod"),
        # ReFrame's working folders stay below the repository, as for `local`
        "stagedir": str(paths.STATE / "stage"),
        "outputdir": str(paths.STATE / "output"),
        "partitions": [partition(p, f"partitions[{i}]", path, env_names, classes)
                       for i, p in enumerate(data["partitions"])],
    }


def partition(spec, where, path, env_names, classes):
    """One partition of a site file that SITE_SCHEMA accepted."""
    name = spec["name"]
    pattern = compiled(spec["environs"], path, f"{where}.environs")
    extras = spec["extras"]
    if extras["interconnect"] not in classes + [references.AUTO_CLASS]:
        raise DataError(path, f"{where}.extras.interconnect",
                        f"{extras['interconnect']!r} is not a class of thresholds.yaml "
                        f"({', '.join(classes)}) nor {references.AUTO_CLASS!r}")
    if "judging_profile" in extras:
        try:
            knobs.load(profile=extras["judging_profile"])
        except DataError as err:
            raise DataError(path, f"{where}.extras.judging_profile", str(err)) from err
    part = {
        "name": name,
        "descr": spec.get("descr", name),
        "scheduler": spec["scheduler"],
        "launcher": spec["launcher"],
        "access": list(spec.get("access", [])),
        "environs": [e for e in env_names if pattern.search(e)] or ["builtin"],
        "max_jobs": spec.get("max_jobs", 1),
        "env_vars": [[k, str(v)] for k, v in spec.get("env_vars", {}).items()],
        "extras": dict(extras),
    }
    if "time_limit" in spec:
        part["time_limit"] = str(spec["time_limit"])
    return part


def compiled(pattern, path, key):
    try:
        return re.compile(pattern)
    except (re.error, TypeError) as err:
        raise DataError(path, key, f"not a regular expression: {err}") from err


def site_systems(env_names, folder=SITES):
    return [load_site(p, env_names) for p in site_files(folder)]

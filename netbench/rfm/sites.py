"""Real clusters as ReFrame systems, described as data in
`reframe_checks/sites/<site>.yaml` (see `example-slurm.yaml`).

Each file becomes one system; each partition takes the discovered MPI
environments whose names match its `environs` regex (Spack views are
named `<mpi>-<fabric>`).  Files whose name starts with `example` are
templates and are not loaded.
"""

import os
import re
import stat
from pathlib import Path

from .. import paths, references
from ..probe import linerate
from ..judgement import knobs
from ..datafiles import DataError, load_yaml, validate, without_contents
from ..fleet.topology import load_topology
from ..safefile import invoking_uid, others_could_change
from ..vcluster.fabric import TOPOLOGY_KIND

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
_ABSOLUTE = {"type": "string", "pattern": "^/", "description": "expected an absolute path"}
#: a partition's extras: every key netbench's code reads of a partition's
#: extras, each with its type; another key (a typo: `topolgy`) is refused
EXTRAS_SCHEMA = {
    "type": "object",
    "required": ["interconnect", "nodes"],
    "additionalProperties": False,
    "properties": {
        "interconnect": _STRING,
        "nodes": {"type": "integer", "minimum": 1},
        "line_rate_mbps": {"type": "number", "exclusiveMinimum": 0},
        # where line_rate_mbps comes from (a virtual cluster's: tbf)
        "line_rate_source": {"enum": list(linerate.SOURCES)},
        # links that emulate only their rate: latency is not judged
        "emulates": {"enum": ["rate"]},
        # a fabric where a sweep's round of pairs at once would
        # contend: LinkSweep measures one pair at a time there
        "sweep_rounds_contend": {"type": "boolean"},
        # the link whose rate the job reads (netbench/probe/linerate.py):
        # a net device, or an HCA port such as mlx5_0:1
        "interface": {"type": "string", "pattern": r"^[\w.:@-]+$",
                      "description": "a network interface or HCA port name"},
        # the verdict model's knobs this partition changes: a profile of
        # reframe_checks/references/profiles/ by name, or a file beside the
        # site file (site_profile)
        "judging_profile": {"type": "string", "minLength": 1},
        # Slurm's topology.conf or netbench's YAML (netbench.fleet.topology)
        "topology": {"type": "string", "minLength": 1},
        # a file the sweep's job holds with flock (checks/exclusive.py)
        "partition_lock": _ABSOLUTE,
        # the MTU checks' command (argv; the MTU is appended) and the MTU
        # they restore (reframe_checks/mtu_sweep.py)
        "set_mtu": {"type": "array", "minItems": 1, "items": {"type": "string",
                                                              "minLength": 1}},
        "mtu": {"type": "integer", "minimum": 68, "maximum": 65535},
        # sysfs statistics of the host ends of the links (checks/links.py)
        "link_counters": {"type": "array", "items": {
            "type": "string", "pattern": r"^/sys/class/net/[\w.:@-]+/statistics$",
            "description": "a /sys/class/net/<interface>/statistics folder"}},
        # the Slurm a virtual cluster's partition submits to (checks/slurm.py)
        "slurm_conf": _ABSOLUTE,
        # the virtual cluster a partition is (reframe_checks/mtu_sweep.py)
        "vcluster": {"type": "string", "pattern": r"^[A-Za-z][\w-]*$",
                     "description": "a virtual cluster's name"},
        # the container check's runtime and image (reframe_checks/container.py)
        "container_runtime": {"enum": ["podman", "apptainer"]},
        "container_image": {"type": "string", "minLength": 1},
    },
}
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
                "extras": EXTRAS_SCHEMA,
            }}},
    },
}


def site_files(folder=SITES):
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.yaml") if is_site_name(p.name))


def is_site_name(name):
    """Whether a file of the sites folder named `name` is loaded as a site."""
    return name.endswith(".yaml") and not name.startswith("example")


def load_site(path, env_names):
    """The ReFrame system of one site file, DataError naming file and key.
    Read only where trust_problem trusts it: root reads it, and its
    partitions name commands, files and variables of root's jobs."""
    folder, resolved = Path(path).parent.resolve(), Path(path).resolve()
    if not resolved.is_relative_to(folder):
        raise DataError(path, None, f"a symbolic link leading out of the sites folder "
                                    f"{folder}: refused")
    problem = trust_problem(resolved, folder)
    if problem:
        raise DataError(path, None, problem)
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
    extras = dict(extras)
    if "judging_profile" in extras:
        extras["judging_profile"] = site_profile(extras["judging_profile"], path,
                                                 f"{where}.extras.judging_profile")
    if "topology" in extras:
        extras["topology"] = site_topology(extras["topology"], path, f"{where}.extras.topology")
    part = {
        "name": name,
        "descr": spec.get("descr", name),
        "scheduler": spec["scheduler"],
        "launcher": spec["launcher"],
        "access": list(spec.get("access", [])),
        "environs": [e for e in env_names if pattern.search(e)] or ["builtin"],
        "max_jobs": spec.get("max_jobs", 1),
        "env_vars": [[k, str(v)] for k, v in spec.get("env_vars", {}).items()],
        "extras": extras,
    }
    if "time_limit" in spec:
        part["time_limit"] = str(spec["time_limit"])
    return part


#: a judging profile's name: a file `<name>.yaml` of knobs.PROFILES
PROFILE_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*$")


def site_profile(value, site, key):
    """The judging profile a site's partition names: a profile's name (of
    reframe_checks/references/profiles/), kept as the name, or a file beside
    the site file (a value with a / or ending in .yaml), as its absolute
    path once site_file trusts it.  The file is checked as a profile before
    anything else reads it, with errors that never quote it (knobs.load of
    a path): root reads it, and the user named it."""
    if "/" not in value and not value.endswith((".yaml", ".yml")):
        if not PROFILE_NAME.match(value) or not (knobs.PROFILES / f"{value}.yaml").is_file():
            known = ", ".join(sorted(p.stem for p in knobs.PROFILES.glob("*.yaml")))
            raise DataError(site, key, f"{value!r}: no such judging profile (known: {known}; "
                                       f"or a file in a folder beside the site file, e.g. "
                                       f"profiles/{value}.yaml)")
        return value
    file = site_file(value, site, key, beside_only=True)
    try:
        knobs.load(profile=str(file))          # by its path: errors never quote it
    except DataError as err:
        raise DataError(site, key, str(err)) from err
    return str(file)


def site_topology(value, site, key):
    """The absolute path of the topology a site's partition names (Slurm's
    own topology.conf where it is, or a file beside the site file), once
    site_file trusts it and it reads as a topology.  Its errors name the
    line, never quote it."""
    file = site_file(value, site, key, beside_only=False)
    try:
        load_topology(file)
    except DataError as err:
        raise DataError(site, key, str(without_contents(err, TOPOLOGY_KIND))) from err
    return str(file)


def site_file(value, site, key, beside_only):
    """The file a site file names in `value`, resolved against the site
    file's folder: refused (DataError naming the site file and `key`)
    where it leads out of that folder (`..`, an absolute path elsewhere
    when `beside_only`, a symbolic link), or where trust_problem says."""
    folder = Path(site).parent.resolve()
    given = Path(value)
    if ".." in given.parts:
        raise DataError(site, key, f"{value!r}: '..' leads out of the site's folder "
                                   f"{folder}: name a file beside the site file")
    path = given if given.is_absolute() else folder / given
    if beside_only and not path.is_relative_to(folder):
        raise DataError(site, key, f"{value!r}: outside the site's folder {folder}: name a "
                                   f"profile of {knobs.PROFILES} or a file beside the site file")
    resolved = path.resolve()
    if path.is_relative_to(folder) and not resolved.is_relative_to(folder):
        raise DataError(site, key, f"{value!r}: a symbolic link leading out of the site's "
                                   f"folder {folder}: refused")
    if beside_only and resolved.parent == folder and is_site_name(resolved.name):
        raise DataError(site, key, f"{value!r}: a file of the site's folder is read as a "
                                   f"site: put the profile in a folder beside the site file "
                                   f"(e.g. profiles/{given.name})")
    problem = trust_problem(resolved, folder if resolved.is_relative_to(folder) else None)
    if problem:
        raise DataError(site, key, problem)
    return resolved


def trust_problem(path, top=None):
    """Why root must not read `path` (resolved) for a site, or None: not a
    regular file of one link, or it or a folder above it (up to `top`,
    else to /) could be written by another user than root or the caller,
    as sshd's StrictModes refuses a key file."""
    try:
        info = os.lstat(path)
    except OSError as err:
        return f"{path}: cannot read: {err.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return f"{path}: not a regular file"
    if info.st_nlink > 1:
        return (f"{path}: has {info.st_nlink} hard links: a file a site reads has one "
                f"(copy it instead)")
    for part in (path, *path.parents):
        problem = untrusted(part)
        if problem:
            return f"{part}: {problem}: refused, as sshd's StrictModes refuses it"
        if part == top:
            break
    return None


def untrusted(path):
    """Why another user than root or the caller could change `path`, or None."""
    return others_could_change(os.stat(path), trusted_uids())


def trusted_uids():
    """Root, this process's user and, through sudo, the user who ran it."""
    return {0, os.getuid(), invoking_uid()}


def compiled(pattern, path, key):
    try:
        return re.compile(pattern)
    except (re.error, TypeError) as err:
        raise DataError(path, key, f"not a regular expression: {err}") from err


def site_systems(env_names, folder=SITES):
    return [load_site(p, env_names) for p in site_files(folder)]

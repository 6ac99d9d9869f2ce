"""The ReFrame site configuration, generated from the discovered MPIs.

site_configuration() only builds the dictionary ReFrame expects: it reads
files and probes the MPIs (once per process, discovered_mpis), and changes
nothing: no environment variable, no folder, no ReFrame class.

What a ReFrame session of netbench needs besides is done by
`reframe_checks/settings.py` (the file RFM_CONFIG_FILES names, which the
venv's activate script exports), each step called there by name: the
launchers (rfm/launchers.py), the patches of ReFrame (rfm/patches.py),
the state folders (rfm/logs.py), SLURM_CONF (rfm/slurm.py), and
netbench.report's publish_after_session.  Every output ReFrame writes goes
below the repository (`.reframe/`, `reports/`).
"""

import functools
import os
import sys

from .. import benchspec, paths, vcluster
from ..probe import discovery
from . import container, sites
from .logs import logging_config

SYSTEM = "local"
PARTITION = "node"


def shell_value(value):
    """ReFrame writes `export K=V` verbatim into the job script: double-quote
    values with blanks, keeping `$VAR` expansion (e.g. in PATH) working."""
    if any(c.isspace() for c in value) or any(c in value for c in ";&|<>()`'\"\\"):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
        return f'"{escaped}"'
    return value


def environment(mpi, families):
    """A ReFrame environment per MPI: its mpicc and the benchmark's build
    flags (data/benchmark.yaml, the one place they are spelled)."""
    build = benchspec.recipe()
    return {
        "name": mpi.name,
        "cc": mpi.cc,
        "cflags": list(build["cflags"]),
        "ldflags": list(build["ldflags"]),
        "features": mpi.features,
        "env_vars": [[k, shell_value(v)]
                     for k, v in discovery.environment_variables(mpi, families).items()],
        "extras": {
            "mpi_family": mpi.family,
            "mpi_version": mpi.version,
            "mpi_source": mpi.source,
            "mpi_prefix": mpi.prefix,
            "mpi_launcher": mpi.launcher,
            "transports": mpi.transports,
            "fabric": mpi.fabric,
            "known_defects": mpi.known_defects,
            # RDMA transports the MPI could run that this node's fabric
            # cannot carry (probe/fabric.py): counted, never generated
            "fabric_not_found": mpi.fabric_not_found,
            # the rules that read which path the library says it used
            # (netbench.results.datapath), as discovery loaded them
            "provenance": families[mpi.family]["provenance"]["says"],
        },
    }


def available_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


CONTAINER_SYSTEM = "local-container"


def container_system(env_names):
    """`local-container:container`: the ranks inside the netbench image
    (containers/) on this machine, with the runtime it has (none: no such
    system).  A system of its own, selected with --system: ReFrame runs the
    partitions of one system side by side, and two benchmarks busy-polling
    on this machine's cores at once measure each other.  Its feature
    `container` keeps the other checks off it."""
    try:
        name = container.runtime()
    except container.ContainerError:
        return []
    platform = {"type": "Apptainer", "default": True} if name == "apptainer" else {
        # ReFrame's Docker platform runs `docker`: podman answers, with
        # netbench's containers.conf (containers/bin/docker)
        "type": "Docker", "default": True,
        "env_vars": [["PATH", f"{container.CONTAINERS / 'bin'}:$PATH"],
                     ["CONTAINERS_CONF", str(container.CONF)]]}
    partition = {
        "name": "container",
        "descr": f"ranks inside the netbench image ({name}), this node",
        "scheduler": "local",
        "launcher": "local",
        "environs": env_names or ["builtin"],
        "max_jobs": 1,
        "features": ["container"],
        "container_platforms": [platform],
        "processor": {"num_cpus": available_cpus()},
        "extras": {"interconnect": "intranode", "nodes": 1, "container_runtime": name,
                   "container_image": str(container.SIF) if name == "apptainer"
                   else container.IMAGE},
    }
    # after `local`, whose hostname pattern ReFrame's auto-detection matches first
    return [{"name": CONTAINER_SYSTEM, "descr": "this machine, ranks in the netbench image",
             "hostnames": [".*"], "modules_system": "nomod",
             "stagedir": str(paths.STATE / "stage"), "outputdir": str(paths.STATE / "output"),
             "partitions": [partition]}]


def local_system(env_names):
    return {
        "name": SYSTEM,
        "descr": "this machine, one node, all discovered MPIs",
        "hostnames": [".*"],
        "stagedir": str(paths.STATE / "stage"),
        "outputdir": str(paths.STATE / "output"),
        "modules_system": "nomod",
        "partitions": [{
            "name": PARTITION,
            "descr": "ranks on this node",
            "scheduler": "local",
            "launcher": "netbench-mpirun",
            "environs": env_names or ["builtin"],
            "max_jobs": 1,
            "processor": {"num_cpus": available_cpus()},
            "extras": {"interconnect": "intranode", "nodes": 1},
        }],
    }


#: how often ReFrame looks whether a job of the local scheduler ended: a
#: waitpid, so cheap.  ReFrame's default starts at 10 a second and slows by
#: 10 % a look, so a job of 2.5 s was found ended up to 0.5 s late, and the
#: focused default run's 17 jobs lost seconds to it.  A batch scheduler's
#: systems keep ReFrame's default: each of their looks asks the controller.
LOCAL_POLLING = {"poll_rate_max": 20, "poll_rate_decay": 0.02, "poll_rate_min": 1}


def local_polling(systems):
    """ReFrame's `general` entry of the systems whose every partition
    runs jobs as local processes: LOCAL_POLLING; none when there is none."""
    local = [system["name"] for system in systems
             if all(part["scheduler"] == "local" for part in system["partitions"])]
    return [{"target_systems": local, **LOCAL_POLLING}] if local else []


def cluster_systems(env_names):
    """The ReFrame systems of the virtual clusters that are up (`netbench
    vcluster up`); selected with `--system vcluster-<name>`.  They come after
    `local`, whose hostname pattern matches everywhere, so ReFrame's
    auto-detection keeps picking this machine."""
    systems = []
    for system in vcluster.running_systems():
        for part in system["partitions"]:
            part["environs"] = env_names or ["builtin"]
            part.setdefault("processor", {"num_cpus": available_cpus()})
        system.setdefault("stagedir", str(paths.STATE / "stage"))
        system.setdefault("outputdir", str(paths.STATE / "output"))
        systems.append(system)
    return systems


def site_folder():
    """reframe_checks/sites, or the folder NETBENCH_SITES names."""
    return os.environ.get("NETBENCH_SITES") or sites.SITES


@functools.cache
def discovered_mpis():
    """(families, MPIs) of this machine, discovered once per process:
    discovery starts each MPI's probes, and ReFrame may load the
    configuration more than once."""
    families = discovery.load_families()
    return families, tuple(discovery.discover(families=families, on_error=say_refused))


def say_refused(cand, err):
    """One line for a folder refused by name (a space in a view's name):
    the session goes on with the other MPIs.  Other probe failures stay
    `netbench discover`'s to report."""
    if isinstance(err, discovery.RefusedName):
        print(f"netbench: {err}", file=sys.stderr)


def refuse_requested_transports_without_fabric(mpis, argv=None):
    """A transport the command line names (`-n '...%transport=ucx-rc-x'`)
    whose device or provider fabric discovery did not find: DataError, one
    line naming mpi_families.yaml, the transport and what is missing."""
    from .. import selection
    for transport in discovery.requested_transports(selection.requested_names(argv)):
        discovery.refuse_transport_without_fabric(transport, mpis)


def site_configuration(mpis=None):
    """The whole configuration dictionary ReFrame expects, for the
    discovered MPIs (or `mpis`).  Pure: see the module's docstring."""
    if mpis is None:
        families, mpis = discovered_mpis()
        refuse_requested_transports_without_fabric(mpis)
    else:
        families = discovery.load_families()
    envs = [environment(m, families) for m in mpis]
    # sites first: ReFrame takes the first system whose hostnames match,
    # and `local` matches every host
    systems = (sites.site_systems([e["name"] for e in envs], site_folder())
               + [local_system([e["name"] for e in envs])]
               + container_system([e["name"] for e in envs])
               + cluster_systems([e["name"] for e in envs]))
    return {
        "systems": systems,
        "environments": envs,
        "logging": logging_config(),
        "general": [{
            # ReFrame's own report lands here; netbench.report publishes it
            # with the HTML page as reports/<session>/run-report.json
            "report_file": str(paths.STATE / "reports" / "run-report-{sessionid}.json"),
            # ReFrame names the JUnit file before it numbers the session:
            # this process's, renamed beside its run report when it exits
            # (report.publish.place_junit_beside)
            "report_junit": str(paths.junit_file()),
            "topology_prefix": str(paths.STATE / "topology"),
            "check_search_path": [str(paths.CHECKS)],
            "purge_environment": False,
        }, *local_polling(systems)],
        # ReFrame's results database: every session is stored, so that
        # --list-stored-sessions and --performance-compare work, and the
        # report's history and `netbench compare` read it (report/store.py)
        "storage": [{"enable": True, "sqlite_db_file": str(paths.RESULTS_DB)}],
    }

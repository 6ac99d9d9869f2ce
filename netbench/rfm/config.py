"""The ReFrame site configuration, generated from the discovered MPIs.

site_configuration() only builds the dictionary ReFrame expects: it reads
files and probes the MPIs (once per process, discovered_mpis), and changes
nothing: no environment variable, no folder, no ReFrame class.

What a ReFrame session of netbench needs besides is done by
`reframe_checks/settings.py` (the file RFM_CONFIG_FILES names, which the
venv's activate script exports), each step called there by name:
register_launchers, refuse_empty_runs, make_state_folders,
point_slurm_clients_at_running_cluster, and netbench.report's
publish_after_session.  Every output ReFrame writes goes below the
repository (`.reframe/`, `reports/`).
"""

import functools
import json
import os
import sys
import time

from . import benchspec, discovery, paths, sites, vcluster

SYSTEM = "local"
PARTITION = "node"


def _register_launcher(name, command):
    """Register a ReFrame job launcher whose `command(job)` is `command`;
    once per interpreter (the configuration may be loaded twice)."""
    from reframe.core.backends import getlauncher
    from reframe.core.backends import register_launcher as register
    from reframe.core.launchers import JobLauncher

    try:
        return getlauncher(name)
    except Exception:
        pass
    class Launcher(JobLauncher):
        def command(self, job):
            return command(job)

    return register(name)(Launcher)


def register_launchers():
    """netbench's ReFrame job launchers, which the partitions name: once
    per interpreter."""
    register_mpirun_launcher()
    register_cluster_launcher()
    register_allocation_launcher()


def time_limit_flags(job):
    """`--time-limit S`: netbench.launch ends the whole launch (remote
    ranks, proxies and ssh sessions included) and says why, before ReFrame's
    own time limit ends the job script alone with "job timed out"."""
    return ["--time-limit", f"{job.time_limit:g}"] if job.time_limit else []


def register_mpirun_launcher():
    """`netbench-mpirun`: the environment's own launcher (NETBENCH_MPIRUN,
    set per programming environment, with NETBENCH_MPIRUN_FLAGS), so one
    partition serves MPICH's mpiexec.hydra and Open MPI's prterun alike;
    through netbench.launch --here, which ends all of the launch when its
    time is up (Open MPI's ranks have process groups of their own)."""
    return _register_launcher("netbench-mpirun", lambda job: [
        sys.executable, "-m", "netbench.launch", "--here", "-np", str(job.num_tasks),
        *time_limit_flags(job), "--"])


def register_cluster_launcher():
    """`netbench-ssh`: MPI across the nodes of a cluster partition, through
    netbench.launch, which adds the family's flags for hostfile, ssh agent
    and cluster network (data/mpi_families.yaml, `remote_flags`)."""
    return _register_launcher("netbench-ssh", lambda job: [
        sys.executable, "-m", "netbench.launch", "-np", str(job.num_tasks),
        "--ppn", str(job.num_tasks_per_node or 1), *time_limit_flags(job), "--"])


def register_allocation_launcher():
    """`netbench-alloc`: the MPI's own launcher inside a Slurm allocation
    (the alternative to srun), through netbench.launch --allocation."""
    return _register_launcher("netbench-alloc", lambda job: [
        sys.executable, "-m", "netbench.launch", "--allocation", "-np", str(job.num_tasks),
        "--ppn", str(job.num_tasks_per_node or 1), *time_limit_flags(job), "--"])


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
    from . import container
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


def point_slurm_clients_at_running_cluster():
    """With one virtual cluster of this checkout running Slurm and
    SLURM_CONF unset, set SLURM_CONF for this process to that cluster's.
    Otherwise SLURM_CONF stays as the user set it (the checks fail with a
    message when it names another cluster than the partition's).

    The process's own environment, not the partition's: the partition's
    `env_vars` (vcluster/systems.py) reach the job script only, while
    ReFrame runs sbatch, squeue, scancel and scontrol in its own
    environment (reframe/core/schedulers/slurm.py), and has no setting for
    a scheduler's environment."""
    confs = slurm_confs(vcluster.running_systems())
    if len(confs) == 1 and not os.environ.get("SLURM_CONF"):
        os.environ["SLURM_CONF"] = confs.pop()


def slurm_confs(systems):
    """The Slurm configuration files the partitions of `systems` submit to."""
    return {p["extras"]["slurm_conf"] for s in systems for p in s["partitions"]
            if "slurm_conf" in p.get("extras", {})}


def site_folder():
    """reframe_checks/sites, or the folder NETBENCH_SITES names."""
    return os.environ.get("NETBENCH_SITES") or sites.SITES


def refuse_empty_runs():
    """A run whose filters match no test case stops with one line and exit
    code 1: ReFrame itself reports `PASSED 0/0` and exits 0, and a typo in
    `-n`, `-t` or `-p` would look like a clean run.  ReFrame (4.10) has no
    option or hook for it and the check files cannot know what the filters
    leave, so this wraps the runner's entry point, once per interpreter;
    reframe_checks/settings.py calls it."""
    from reframe.frontend.executors import Runner

    if getattr(Runner.runall, "netbench_refuses_empty", False):
        return
    runall = Runner.runall

    def checked_runall(self, testcases, restored_cases=None):
        if not testcases and not restored_cases:
            sys.stdout.flush()
            print(EMPTY_RUN, file=sys.stderr)
            sys.exit(1)
        return runall(self, testcases, restored_cases)

    checked_runall.netbench_refuses_empty = True
    Runner.runall = checked_runall


EMPTY_RUN = "netbench: no test case matched the filters"


def tell_verdicts_apart_in_the_exit_code():
    """ReFrame exits 1 for any failed case and 0 otherwise; netbench's
    verdicts are four (report.verdict.exit_code): a loss shown (1), cases
    that could not run to the end (2), inconclusive (3), pass (0).  ReFrame
    (4.10) has no option for it and ends its `main` with sys.exit(code):
    this gives its module a `sys` whose exit refines the code from the run
    report ReFrame has just written.  Once per interpreter."""
    import types

    from reframe.frontend import cli

    if getattr(cli.sys, "netbench_refines_exit", False):
        return
    started = time.time()
    real_sys = cli.sys

    def exit(code=0):
        real_sys.exit(refined_exit_code(code, started))

    proxy = types.ModuleType("sys")
    proxy.__dict__.update(real_sys.__dict__)
    proxy.exit = exit
    proxy.netbench_refines_exit = True
    cli.sys = proxy


def refined_exit_code(code, started):
    """`code` refined by the run report this session wrote, if it wrote one."""
    from .report.publish import RAW_REPORTS
    from .report.verdict import exit_code

    fresh = [p for p in RAW_REPORTS.glob("run-report-*.json")
             if p.stat().st_mtime >= started]
    if not fresh or not isinstance(code, int):
        return code
    try:
        with open(max(fresh, key=lambda p: p.stat().st_mtime)) as f:
            return exit_code(json.load(f), code)
    except (OSError, ValueError):
        return code


def say_what_was_not_generated():
    """After ReFrame has loaded the check files (for -l, -r and --dry-run
    alike), one line per reason a check generated fewer cases, with the
    count (netbench/selection.py), and how to reach the whole matrix from
    a focused run.  ReFrame has no hook after loading; this wraps its
    loader's entry point, once per interpreter; settings.py calls it."""
    from reframe.frontend.loader import RegressionCheckLoader

    if getattr(RegressionCheckLoader.load_all, "netbench_reports_dropped", False):
        return
    load_all = RegressionCheckLoader.load_all

    def load_all_and_report(self, *args, **kwargs):
        loaded = load_all(self, *args, **kwargs)
        from reframe.core.logging import getlogger
        from . import selection
        for line in selection.not_generated_lines():
            getlogger().info(line)
        if not selection.full_matrix_requested():
            getlogger().info("the focused default set: `-t full` runs the whole matrix, "
                             "`-t seeds` the source documents' experiments")
        return loaded

    load_all_and_report.netbench_reports_dropped = True
    RegressionCheckLoader.load_all = load_all_and_report


def log_file_stamp(pid=None):
    """strftime pattern of the log file's suffix: the session's start to
    the second, and the ReFrame process's PID, so that two sessions started
    in one second (parallel test runs, CI) write a log each."""
    return f"%Y%m%dT%H%M%S-{pid or os.getpid()}"


def logging_config():
    logs = paths.STATE / "logs"
    perflogs = paths.STATE / "perflogs"
    return [{
        "level": "debug",
        "handlers": [
            {"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"},
            {"type": "file", "name": str(logs / "reframe.log"), "level": "debug",
             "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s",
             "append": False, "timestamp": log_file_stamp()},
        ],
        "handlers_perflog": [{
            "type": "filelog",
            "prefix": "%(check_system)s/%(check_partition)s",
            "level": "info",
            "format": ("%(check_job_completion_time)s|%(check_info)s|%(check_environ)s|"
                       "%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s|"
                       "ref=%(check_perf_ref)s (l=%(check_perf_lower_thres)s, "
                       "u=%(check_perf_upper_thres)s)|%(check_perf_result)s"),
            "append": True,
            "basedir": str(perflogs),
        }],
    }]


def junit_file(pid=None):
    """The JUnit XML the ReFrame process `pid` (default: this one) writes:
    ReFrame expands no session number in `report_junit`, so two sessions
    that end together need a name each."""
    return paths.STATE / "reports" / f"junit-{pid or os.getpid()}.xml"


#: ReFrame's working folders below paths.STATE
STATE_FOLDERS = ("logs", "perflogs", "stage", "output", "topology", "reports")


def make_state_folders():
    """ReFrame's working folders and reports/.  ReFrame opens its log file
    (.reframe/logs/) before it runs anything and does not create the
    file's folder."""
    for sub in STATE_FOLDERS:
        paths.state_dir(sub)
    os.makedirs(paths.REPORTS, exist_ok=True)


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


def site_configuration(mpis=None):
    """The whole configuration dictionary ReFrame expects, for the
    discovered MPIs (or `mpis`).  Pure: see the module's docstring."""
    if mpis is None:
        families, mpis = discovered_mpis()
    else:
        families = discovery.load_families()
    envs = [environment(m, families) for m in mpis]
    return {
        # sites first: ReFrame takes the first system whose hostnames match,
        # and `local` matches every host
        "systems": sites.site_systems([e["name"] for e in envs], site_folder())
                   + [local_system([e["name"] for e in envs])]
                   + container_system([e["name"] for e in envs])
                   + cluster_systems([e["name"] for e in envs]),
        "environments": envs,
        "logging": logging_config(),
        "general": [{
            # ReFrame's own report lands here; netbench.report publishes it
            # with the HTML page as reports/<session>/run-report.json
            "report_file": str(paths.STATE / "reports" / "run-report-{sessionid}.json"),
            # ReFrame names the JUnit file before it numbers the session:
            # this process's, renamed beside its run report when it exits
            # (report.publish.place_junit_beside)
            "report_junit": str(junit_file()),
            "topology_prefix": str(paths.STATE / "topology"),
            "check_search_path": [str(paths.CHECKS)],
            "purge_environment": False,
        }],
        # ReFrame's results database: every session is stored, so that
        # --list-stored-sessions and --performance-compare work, and the
        # report's history and `netbench compare` read it (report/store.py)
        "storage": [{"enable": True, "sqlite_db_file": str(paths.RESULTS_DB)}],
    }

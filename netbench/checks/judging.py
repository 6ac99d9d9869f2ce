"""Judging a case by the documented references of its interconnect class
(thresholds.yaml and the seed files), and writing what judged it into the
case's record."""

import shlex
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_before, variable

from .. import judgement, paths, references
from ..probe import fabric, linerate
from ..judgement import baseline, knobs
from ..judgement.conditions import CPU_BOUND_BYTES
from ..report import reasons
from ..results import record as results_record

#: the thresholds class of cases whose ranks share one node
INTRANODE_CLASS = "intranode"


class Judging(rfm.RegressionTestPlugin):
    """ReFrame's references from the thresholds of the case's class, the
    same figures in its `record`, and the sanity assertion that some
    documented threshold judges it.  Mixed into MpiRun (uses `transport`,
    `placement` and `record`)."""

    #: the thresholds' check kind of the case (`kind`) follows from the
    #: check's category (checks/category.py)
    #: where the report draws a judged figure on the case's first series:
    #: {variable: (y column, message size; None: the size the source gives
    #: beside the figure)}
    drawn_references = {"latency": ("usec", 1), "peak_bw": ("Mbps", None)}
    #: the folder of thresholds.yaml and the seed files the case is judged
    #: by (`-S thresholds_folder=DIR` judges by a copy)
    thresholds_folder = variable(str, value=str(paths.REFERENCES))

    #: what each node of the job printed of its line rate (netbench.probe.linerate)
    line_rate_output = "linerate.out"

    # ---- the line rate: declared, or discovered by the job on its nodes ----

    def needs_line_rate_discovery(self):
        """Across nodes, when the partition declares no line rate and its
        class is `auto` or judges some figure relative to the line rate."""
        extras = self.current_partition.extras
        if getattr(self, "placement", "internode") == "intranode" or \
                extras.get("line_rate_mbps"):
            return False
        if extras.get("interconnect") == references.AUTO_CLASS:
            return True
        kind, transport = self.judged_by()
        return bool(set(references.thresholds_for(
            extras.get("interconnect", ""), kind, transport,
            folder=Path(self.thresholds_folder), line_rate_mbps=1.0))
            - set(references.thresholds_for(
                extras.get("interconnect", ""), kind, transport,
                folder=Path(self.thresholds_folder))))

    @run_before("run")
    def discover_line_rate(self):
        """Before the benchmark, one process per node of the job reads its
        link's rate (`python -m netbench.probe.linerate`, through the job's own
        launcher); the partition's `interface` extra names the link, else
        the route to another node of the job does."""
        if not self.needs_line_rate_discovery():
            return
        launch = self.launch_prefix()
        interface = self.current_partition.extras.get("interface")
        args = f" --interface {shlex.quote(str(interface))}" if interface else ""
        self.prerun_cmds.append(f"{launch} {shlex.quote(sys.executable)} -m netbench.probe.linerate"
                                f"{args} > {self.line_rate_output} 2>&1 || true")

    def line_rate(self):
        """The partition's netbench.probe.linerate.LineRate: declared (or a
        virtual cluster's tbf), else the slowest node's discovered one."""
        discovered = linerate.parse_job_output(self.read_stage_file(self.line_rate_output))
        return linerate.resolve(self.current_partition.extras, discovered)

    # ---- performance, in this order ----

    @run_before("performance")
    def set_perf_variables(self):
        """Checks whose performance variables depend on the parsed output
        set them here (before set_references, which judges them)."""

    @run_before("performance")
    def set_references(self):
        """ReFrame's references, and the same figures in the record: the
        report draws what judged the case, not today's files.  A figure
        the rule (netbench.judgement) leaves inconclusive is reported
        against an unbounded reference, so ReFrame neither passes nor fails
        it on its own: the record says inconclusive and why."""
        judged = self.judged_references()
        self.decisions = self.decide_figures()
        self.judge_the_curve_by_its_baseline()
        references = {var: self.reframe_reference(var, ref) for var, (ref, _) in judged.items()}
        entries = {}
        for var, ((value, lower, upper, unit), threshold) in judged.items():
            figure = threshold.figure if threshold else None
            entries[var] = results_record.reference(
                value, lower, upper, unit, figure=figure and figure.key,
                citation=figure and figure.citation,
                interconnect=self.interconnect_class() if figure else None,
                at=self.reference_position(var, figure))
        if baseline.RATIO in self.decisions:
            ratio = (1.0, None, 0.0, "x")
            references[baseline.RATIO] = self.reframe_reference(baseline.RATIO, ratio)
            entries[baseline.RATIO] = results_record.reference(
                *ratio, figure="baseline", citation=self.baseline_source())
        # one assignment: ReFrame scopes the dictionary on assignment
        self.reference = {self.current_partition.fullname: references}
        self.record = {**self.record, "references": entries}
        unjudged = self.unjudged_figures()
        if unjudged:
            self.record["unjudged"] = unjudged
        self.record_decisions()

    #: {variable: netbench.judgement.Decision} of the case's judged figures
    decisions = {}
    #: the per-size decisions against the learned baseline, for the record
    baseline_sizes = []

    def judge_the_curve_by_its_baseline(self):
        """The per-size decisions against the partition's learned baseline
        (`usec@<bytes>`) become one: performance variable vs_baseline, the
        worst size's figure over its bound, judged at most 1; a loss must
        span judging.yaml's min_span neighbouring sizes (judgement.curve)."""
        bounds = self.judged_bounds()
        sizes = {var: d for var, d in self.decisions.items() if "@" in var}
        if not sizes:
            return
        combined, self.baseline_sizes = baseline.combine(sizes, bounds, self.baseline_source(),
                                                         self.judging_knobs().min_span)
        self.decisions = {var: d for var, d in self.decisions.items() if "@" not in var}
        self.decisions[baseline.RATIO] = combined
        self.perf_variables[baseline.RATIO] = sn.make_performance_function(
            sn.defer(combined.value), "x")

    def judging_knobs(self):
        """The verdict model's knobs: judging.yaml of the references the
        case is judged by, with the partition's profile over them
        (extras.judging_profile)."""
        return knobs.load(self.thresholds_folder,
                          self.current_partition.extras.get("judging_profile"))

    def baseline_source(self):
        path = baseline.file_for(self.current_partition.fullname,
                                 Path(self.thresholds_folder) / "baselines")
        return f"{path.name}, accepted runs of this partition"

    def decide_figures(self):
        """{variable: Decision} from every launch (checks that launch
        netbench's benchmark: NetbenchRun); {} where ReFrame's reference
        alone judges one launch's figure."""
        return {}

    def reframe_reference(self, var, ref):
        """ReFrame's reference tuple for `var`: unbounded when the rule left
        the figure inconclusive (ReFrame knows only pass and fail)."""
        decision = self.decisions.get(var)
        if decision is not None and decision.verdict not in (judgement.PASS, judgement.FAIL):
            return (ref[0], None, None, ref[3])
        return ref

    def record_decisions(self):
        """The decisions, their bounds and the runs they rest on, into the
        record; the case's verdict is the worst of its figures'.  Each
        keeps its reason code and numbers, and their words (report.reasons)
        for readers of the record."""
        if not self.decisions:
            return
        bounds = {**self.judged_bounds(), baseline.RATIO: judgement.Bound("upper", 1.0)}
        self.record["verdicts"] = {
            var: {**decision.to_json(), "reason": reasons.render(decision.code, decision.numbers),
                  "bound": bounds[var].to_json()}
            for var, decision in self.decisions.items()}
        if self.baseline_sizes:
            self.record["verdicts"][baseline.RATIO]["sizes"] = self.baseline_sizes
        self.record["verdict"] = judgement.case_verdict(
            d.verdict for d in self.decisions.values())
        # every judged case keeps the conditions it was measured under: a
        # baseline learned from it compares later runs' with them
        self.record["host"] = self.host_load()

    def judged_bounds(self):
        return {}

    def host_load(self):
        """{load, cpu_pressure} the job saw after its launches."""
        return {}

    def judged_references(self):
        """{performance variable: (ReFrame's reference tuple, the Threshold
        it comes from or None for a rule of the check's own)}, less what
        the partition cannot be judged on (unjudged_figures)."""
        mine = set(self.perf_variables) - set(self.unjudged_figures())
        return {var: (t.reference, t) for var, t in self.thresholds().items() if var in mine}

    #: why a latency across a link that emulates only its rate is not judged
    EMULATED_LATENCY = ("the link emulates only its rate (a token bucket on a veth): small "
                        "messages never wait in the bucket, so their latency is this host's "
                        "scheduler's, not a wire's; reported, not judged")

    def unjudged_figures(self):
        """{performance variable: why it is reported but not judged}: across
        links that emulate only their rate, latency and a baseline's sizes
        up to CPU_BOUND_BYTES."""
        if not self.link_is_emulated():
            return {}
        unjudged = {var: self.EMULATED_LATENCY for var in self.perf_variables
                    if var == "latency" or var.endswith("_latency")}
        if baseline.case_bounds(self.baseline_case()):
            unjudged[f"vs_baseline up to {reasons.size_words(CPU_BOUND_BYTES)}"] = \
                self.EMULATED_LATENCY
        return unjudged

    def baseline_case(self):
        """This case's entry in its partition's baseline (the references
        folder's baselines/), or None without one."""
        if "_baseline_case" not in self.__dict__:   # read once per case, not per question
            learned = baseline.for_partition(self.current_partition.fullname,
                                             Path(self.thresholds_folder) / "baselines")
            self._baseline_case = baseline.case_of(
                learned, baseline.case_name({"display_name": self.display_name}),
                self.current_environ.name)
        return self._baseline_case

    def baseline_bounds(self):
        """{bytes: Bound} of this case's baseline, less the sizes a link
        that emulates only its rate cannot judge (its latency sizes: see
        unjudged_figures)."""
        bounds = baseline.case_bounds(self.baseline_case())
        if self.link_is_emulated():
            bounds = {n: b for n, b in bounds.items() if n > CPU_BOUND_BYTES}
        return bounds

    def ranks_share_a_node(self):
        """Ranks 0 and 1 on one node: every figure between them is its cores'."""
        return getattr(self, "placement", "") == "intranode"

    def link_is_emulated(self):
        """Ranks across nodes joined by links that emulate only their rate
        (a token bucket on a veth, forwarded by this host's CPUs)."""
        return (getattr(self, "placement", "") == "internode"
                and self.current_partition.extras.get("emulates") == "rate")


    def reference_position(self, var, figure):
        """Where the report draws `var`'s figure on the case's first series:
        {series, y, bytes}, or None."""
        series = self.record.get("series") or []
        if var not in self.drawn_references or not series or figure is None:
            return None
        column, nbytes = self.drawn_references[var]
        if nbytes is None:
            nbytes = references.figure_message_size(figure, Path(self.thresholds_folder))
        if nbytes is None or column not in results_record.y_columns(series[0]):
            return None
        return {"series": series[0]["name"], "y": column, "bytes": float(nbytes)}

    def judged_by(self):
        """(check kind, transport) of the thresholds that judge the case."""
        return self.kind, self.transport

    def interconnect_class(self):
        """The class of thresholds.yaml that judges the case: the partition's
        (its links between nodes) when ranks span nodes; `intranode` when
        they all share one node, whose paths (shared memory, TCP loopback)
        the partition's link class does not describe."""
        if getattr(self, "placement", "internode") == "intranode":
            return INTRANODE_CLASS
        declared = self.current_partition.extras.get("interconnect", "")
        if declared != references.AUTO_CLASS:
            return declared
        choice = self.rdma_choice()
        if choice is not None:
            return choice.cname
        return linerate.matching_class(
            self.line_rate(), references.class_matches(Path(self.thresholds_folder))) or ""

    def rdma_choice(self):
        """The RDMA class `interconnect: auto` chose for an RDMA transport's
        case across nodes (netbench.probe.fabric.choose_rdma_class, from the
        fabric discovery the case was generated from), or None: the class
        comes from elsewhere (declared, TCP, one node)."""
        kind, transport = self.judged_by()
        if (getattr(self, "placement", "internode") == "intranode"
                or self.current_partition.extras.get("interconnect") != references.AUTO_CLASS
                or not references.is_rdma_transport(transport, Path(self.thresholds_folder))):
            return None
        return fabric.choose_rdma_class(
            fabric.node_fabric(), references.rdma_class_matches(Path(self.thresholds_folder)))

    def thresholds(self, line_rate_mbps=None):
        """{variable: Threshold} of the case's interconnect class, scaled to
        the partition's line rate (or `line_rate_mbps`; an RDMA class `auto`
        chose: the rate of the port it was chosen by, unless declared)."""
        kind, transport = self.judged_by()
        choice = self.rdma_choice()
        if not line_rate_mbps and choice and choice.cname and \
                not self.current_partition.extras.get("line_rate_mbps"):
            line_rate_mbps = choice.link.rate_mbps
        return references.thresholds_for(
            self.interconnect_class(), kind, transport, folder=Path(self.thresholds_folder),
            line_rate_mbps=line_rate_mbps or self.line_rate().mbps)

    def unjudged_reason(self):
        """Why the case cannot be held to documented thresholds, or None:
        it can, or its kind is informational by design (no class documents
        it).  Without thresholds ReFrame compares with 0, unbounded, and
        passes: such a case must fail instead."""
        kind, transport = self.judged_by()
        choice = self.rdma_choice()
        if choice is not None and not choice.cname:
            return references.undeclared_rdma_class(choice.why, Path(self.thresholds_folder))
        rate = self.line_rate()
        if choice is not None and not rate.mbps:
            rate = linerate.LineRate(choice.link.rate_mbps, "rdma", choice.link.name)
        cname = self.interconnect_class()
        if not cname and self.current_partition.extras.get("interconnect") == \
                references.AUTO_CLASS:
            found = (f"{rate.link_layer or 'a'} link at {rate.mbps:g} Mbit/s" if rate.mbps
                     else f"no line rate ({rate.why})")
            return (f"interconnect class auto: the nodes discovered {found}, which no class "
                    f"of thresholds.yaml matches; declare extras.interconnect")
        reason = references.missing_thresholds(cname, kind, transport,
                                               folder=Path(self.thresholds_folder))
        if reason:
            return reason
        if not rate.mbps:
            relative = sorted(set(self.thresholds(line_rate_mbps=1.0)) - set(self.thresholds()))
            if relative:
                return (f"the thresholds of {', '.join(relative)} are relative to the line "
                        f"rate, and partition {self.current_partition.fullname} declares "
                        f"none (extras.line_rate_mbps) and its nodes discovered none "
                        f"({rate.why or 'not asked'})")
        return None

    @sn.deferrable
    def assert_judged(self):
        """Fails the case that no documented threshold judges (see
        unjudged_reason)."""
        reason = self.unjudged_reason()
        if reason:
            raise sn.SanityError(f"not judged: {reason}")
        return True

"""The case's record (netbench/results/record.py): what it measured, the
report section that draws it, its legend label and scaling line, and where
it ran."""

import shlex
import sys

import reframe as rfm
from reframe.core.builtins import run_before, variable

from ..probe import checkout, nodestate
from ..results import record as results_record


class Recording(rfm.RegressionTestPlugin):
    """Writes `record` before the sanity stage, so a case that fails its
    sanity or references still has it; Judging adds the references.  Mixed
    into MpiRun (uses `transport`, `placement`, interconnect_class)."""

    #: what the case measured, how the report draws it, what judged it and
    #: where it ran (netbench/results/record.py): written before the
    #: performance stage, so a case that fails its references still has it
    record = variable(dict, value={})
    #: the report section that draws the case (`section`, one of
    #: results.record.SECTIONS) follows from the check's category
    #: (checks/category.py, data/check_categories.yaml)
    #: parameters that place a case along the scaling plot's x axis (its
    #: ranks), not on a line of its own
    scaling_parameters = ("ranks", "layout")

    #: the stage file of the nodes' state (netbench.probe.nodestate)
    node_state_output = "node_state.out"

    @run_before("run")
    def capture_node_state(self):
        """Before anything else of the job: the tuning-relevant state of
        each node, read on the node (`python -m netbench.probe.nodestate`, through
        the job's launcher when the ranks span nodes), so the record says
        what the case ran under."""
        tool = f"{shlex.quote(sys.executable)} -m netbench.probe.nodestate"
        if getattr(self, "placement", "") == "internode":
            tool = f"{self.launch_prefix()} {tool}"
        else:
            tool += " --interface lo"       # ranks on one node: no NIC between them
        self.prerun_cmds.insert(0, f"{tool} > {self.node_state_output} 2>&1 || true")

    @run_before("sanity")
    def record_measurement(self):
        """The record without its references (set_references adds them):
        written before sanity, so a failed case still shows its series."""
        self.record = results_record.make(self.section, self.series_label(),
                                          self.measured_series(),
                                          self.provenance(), group=self.scaling_group(),
                                          runs=self.measured_runs(),
                                          node_state=nodestate.parse_job_output(
                                              self.read_stage_file(self.node_state_output)),
                                          layers=self.measured_layers())

    def measured_runs(self):
        """{run name: every launch, parsed} (results.record `runs`); {} for
        checks whose output is not netbench's benchmark's."""
        return {}

    def measured_layers(self):
        """The layers below the MPI measured beside it (results.record
        `layers`), None for checks that measure one layer."""
        return None

    def measured_series(self):
        """The series the case measured (results.record), read from its
        output in the stage folder; [] when there is none."""
        return []

    def measured_rows(self):
        """The rows of the case's first series (its record), [] before
        record_measurement or when it measured none."""
        series = self.record.get("series") or []
        return series[0]["rows"] if series else []

    def series_label(self):
        """The legend label of the case's curves: the environment and the
        check's parameters."""
        return " ".join([self.current_environ.name] + self.parameter_labels())

    def parameter_labels(self, leave_out=()):
        """The check's parameter values as label words, formatted as in its
        display name: a word as it is (`blocking`, `shm`, `1ppn-2`), a
        number with its parameter's name (`ranks=4`)."""
        words = []
        for name, param in type(self).param_space.params.items():
            value = getattr(self, name)
            if name in leave_out or value is None:
                continue
            shown = param.format(value)
            words.append(f"{name}={shown}" if isinstance(shown, (int, float)) else str(shown))
        return words

    def scaling_group(self):
        """The line of the scaling plot the case is one point of: the label
        without the process count, plus the processes per node."""
        if self.section not in results_record.SCALING_SECTIONS:
            return ""
        parts = [self.current_environ.name] + self.parameter_labels(self.scaling_parameters)
        if self.procs_per_node:
            parts.append(f"{self.procs_per_node} per node")
        return " ".join(parts)

    def provenance(self):
        """Where and how the case ran, for its record."""
        env = self.current_environ.extras
        return {"mpi_family": env.get("mpi_family", ""),
                "mpi_version": str(env.get("mpi_version", "")),
                "mpi_source": env.get("mpi_source", ""),
                "transport": str(self.transport), "placement": str(self.placement),
                "ranks": int(self.num_tasks or 0),
                "ranks_per_node": int(self.num_tasks_per_node or 0),
                "partition": self.current_partition.fullname,
                "netbench_commit": checkout.commit(),
                "spack_lock_sha256": checkout.spack_lock_sha256(),
                "interconnect": self.interconnect_class(),
                "link_emulated": bool(self.link_is_emulated()),
                **self.line_rate_provenance()}

    def line_rate_provenance(self):
        """The line rate the case was judged against and where it came from
        (declared, tbf, infiniband, sysfs, ethtool; checks/judging.py)."""
        rate = self.line_rate()
        return {"line_rate_mbps": rate.mbps, "line_rate_source": rate.source}

"""MpiRun: an MPI benchmark run judged against the documented references
of the partition's interconnect class; what netbench's own benchmark
(netbench_run.py) and the OSU/IMB/NetPIPE binaries have in common.

Hook order.  ReFrame runs the hooks of one stage in reverse MRO order (the
least specialised class first; "Pipeline hooks are normally executed in
reverse MRO order", ReFrame's regression test API), and a class's own hooks
in the order they are defined.  MpiRun's bases are listed so that the
reverse MRO, MpiJob, Categorized, JobOutcome, Judging, LinkCounters,
Recording, gives the order the hooks depend on:

  init (first) Categorized: take_category (the check's one declared
               category gives `kind`, `section` and `bench_mode`; an
               unknown one stops the check as ReFrame loads it)

  setup        MpiJob: require_declared_attributes, record_provenance,
               select_transport, place_ranks (after select_transport);
               JobOutcome: require_matching_slurm_conf
  pre-run      Judging: discover_line_rate (its launch before the counters'
               first reading); LinkCounters: count_link_traffic (before the
               checks' own); Recording: capture_node_state (first of the
               job's commands: the nodes' state before anything runs)
  pre-sanity   JobOutcome: read_job_outcome (the job's output read once
               for why a rank did not finish); LinkCounters:
               count_link_traffic_after;
               Recording: record_measurement (before the checks' sanity)
  pre-perf     Judging: set_perf_variables, then set_references (which
               judges them); LinkCounters: report_link_traffic (after
               set_perf_variables, which may replace perf_variables whole)

  init (last)  CaseGeneration: generate_possible_cases_only (always_last,
               after the checks' own init hooks have set ranks and layout)

A check's own hooks come after these; a hook it overrides by name keeps its
place.  tests/test_checks_structure.py holds the order.
"""

from .base import MpiJob
from .category import Categorized
from .generation import CaseGeneration
from .judging import Judging
from .links import LinkCounters
from .recording import Recording
from .slurm import JobOutcome


class MpiRun(CaseGeneration, Recording, LinkCounters, Judging, JobOutcome, Categorized,
             MpiJob):
    """An MPI run: placed on the partition (MpiJob: `transport`,
    `placement`, `num_ranks`), of one declared `category` (Categorized),
    its ranks seen to finish (JobOutcome), its traffic seen on the links
    (LinkCounters), judged (Judging: the category's `kind`) and recorded
    for the report (Recording: the category's `section`,
    measured_series)."""

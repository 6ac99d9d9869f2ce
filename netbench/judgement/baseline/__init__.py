"""Learned baselines: what this system's own accepted runs measured, per
message size, as the band a later run is held to.

`accept` builds one baseline file per system:partition from at least
`baseline.min_runs` (judging.yaml) accepted sessions.  For every case (its
check and parameters, on one environment) and every message size, each
run gives the time per message of its best launch (the judging rule's
pick: a busy host only adds time).  The band keeps all of them, the fast
and the slow mode of a bimodal host alike:

    centre   the median of the runs' figures
    low      the fastest run's figure
    high     the slowest run's figure
    upper    the bound a later run fails beyond: the slowest run, and never
             less than judging.yaml's min_change.baseline above the centre, nor than the
             run-to-run noise pooled over the size and its neighbours
             (three runs understate a host's noise at any one size)

A case also keeps the conditions its accepted runs were measured under:
the median of their jobs' highest CPU pressure (PSI), and where ranks 0
and 1 shared a host the slowest core round trip of its runs.  A later
run is compared with them (judgement.conditions): a band learned on a
contended host already holds what contention does.

Judging time per message at every size covers latency and bandwidth
alike: at one size, bandwidth is the message over its time.

A baseline file, `reframe_checks/references/baselines/<system>-<partition>
.yaml` (`<system>+<partition>.yaml` when the system's name holds a `-`:
file_for), names its system and partition and judges no other; it carries
its provenance (sessions, commits, MPI builds, tuning state,
date) and is data a site commits.  Pure: reads records and files.

The package: the file (`files`), the sessions it is learned from
(`sessions`), the band and the curve judged against it (`band`)."""

from .band import (NOISE_NEIGHBOURS, RATIO, band, build, combine, estimates_at, figure_spec,
                   judged_curve, measured, pooled_noise, size_entry, variable)
from .files import (BASELINES, COLUMN, NAME, SCHEMA, SIZE_SCHEMA, UNIT, VERSION, Unfit,
                    case_bounds, case_name, case_of, check, check_partition_name, dumped,
                    file_for, for_partition, load, partition_of, show, write)
from .sessions import (Accepted, CaseRun, accepted_pressure, accepted_runs, best_launch_times,
                       read_of_record, session_provenance, slowest_core_round_trip)

__all__ = ["NOISE_NEIGHBOURS", "RATIO", "band", "build", "combine", "estimates_at",
           "figure_spec", "judged_curve", "measured", "pooled_noise", "size_entry",
           "variable", "BASELINES", "COLUMN", "NAME", "SCHEMA", "SIZE_SCHEMA",
           "UNIT", "VERSION", "Unfit", "case_bounds", "case_name", "case_of", "check",
           "check_partition_name", "dumped", "file_for", "for_partition", "load",
           "partition_of", "show", "write", "Accepted", "CaseRun", "accepted_pressure",
           "accepted_runs", "best_launch_times", "read_of_record", "session_provenance",
           "slowest_core_round_trip"]

"""Helpers shared by several test modules that are not pytest fixtures
(those are in conftest.py): one module per subject.  A test module imports
from here, never from another test module (test_suite_layout.py).

- vcluster: a test's own virtual cluster, the netbench CLI, ssh into a node
- suite:    ReFrame sessions as a user starts them; cases and figures of a run report
- reports:  small run reports and sessions as the page reads them
- browser:  headless Chromium
- launches: real launches: a rank's PID, each MPI's transport between nodes
- tune:     the tuning playbooks on a virtual cluster, a node's and the host's settings
"""


def write_knobs(folder, **sections):
    """judging.yaml in `folder`: netbench's own knobs with `sections` put
    over them ({"replicates": {"launches": 1}, ...}), so a test changes
    only what it is about and keeps up with the file's keys."""
    from pathlib import Path

    import yaml

    from netbench.judgement import knobs
    data = knobs.merged(yaml.safe_load(knobs.KNOBS_FILE.read_text()), sections)
    path = Path(folder) / knobs.KNOBS_FILE.name
    path.write_text(yaml.safe_dump(data))
    return path


#: conditions that never differ from a reference's: for tests about what a
#: verdict renders, not about the host's conditions
IGNORE_CONDITIONS = {"conditions": {"cpu_pressure_points": 100, "cores_short_pressure": 100,
                                    "core_round_trip_factor": 1000, "time_slice_ns": 1e12}}


def conditions_differed(host):
    """Whether a record's `host` (the highest CPU pressure any node read)
    differs from a quiet host's by the verdict model's conditions
    (judgement.conditions): what lets a sweep leave a suspect unconfirmed."""
    from netbench.judgement import conditions, knobs
    seen = {"nodes": {"job": {"cpu_pressure": (host or {}).get("cpu_pressure")}}}
    return bool(conditions.differences(seen, None, knobs.load().conditions))

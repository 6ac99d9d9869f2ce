"""ReFrame configuration for netbench: a local system recognised on any
host, one programming environment per discovered MPI.

Loaded through RFM_CONFIG_FILES, which `.venv/bin/activate` exports.
netbench.rfm.config.site_configuration() only builds the dictionary; what a
netbench session needs besides is done here, one named step each.
"""

import os
import sys

# the checks and this file import netbench; make it importable even from a
# plain checkout (the venv installs it in editable mode)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from netbench.datafiles import DataError  # noqa: E402
from netbench.report import publish_after_session  # noqa: E402
from netbench.rfm import config, launchers, logs, patches, slurm  # noqa: E402

try:
    site_configuration = config.site_configuration()
except DataError as _err:
    # one line naming the file and key, not a traceback of the loader;
    # ReFrame names no log after it, so its start-up log goes now
    logs.remove_the_start_up_log()
    sys.exit(f"netbench: {_err}")

# the partitions name netbench's launchers (netbench-mpirun, -ssh, -alloc)
launchers.register_launchers()
# a filter that matches no test case exits 1, not `PASSED 0/0` (ReFrame has
# no option or hook for it: this wraps its runner)
patches.refuse_empty_runs()
# the exit code tells a loss (1) from cases that did not run to the end (2)
# and inconclusive cases (3), an interrupt (130): ReFrame exits 1 or 0
patches.tell_verdicts_apart_in_the_exit_code()
# SIGTERM stops a session as Ctrl-C does, even while ReFrame writes its log
patches.stop_on_sigterm_whatever_runs()
# how many cases the session was to run, how many ran, what stopped it: the
# run report's record, and the JUnit of a session cut short says so first
patches.record_how_the_session_ended()
# one line per reason a case was not generated (netbench/selection.py),
# printed once the check files are loaded
patches.say_what_was_not_generated()
# ReFrame's deprecation warnings without reading every frame's source file
# for each (listing the checks 1.5 s -> 1.1 s)
patches.find_deprecation_callers_without_source()
# ReFrame opens its log file in .reframe/logs/ before it creates any folder
logs.make_state_folders()
logs.remove_the_start_up_log_at_exit()
# sbatch and squeue run in ReFrame's own environment: with one virtual
# cluster running Slurm and SLURM_CONF unset, they need its slurm.conf
slurm.point_slurm_clients_at_running_cluster()
# the HTML report of every session: reports/<session>/, when ReFrame exits
publish_after_session()

"""Whether the job's ranks all finished, and the Slurm guard: a partition
that is a Slurm cluster takes the job only with its own SLURM_CONF."""

import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before

from ..results import benchmark
from ..textsafe import printable

#: how Slurm says it ended a job early, in the job's stderr: the controller's
#: cancellation (slurmstepd), then srun's errors, the cause first: a node
#: that failed, a task killed by a signal (not srun's own SIGTERM to the
#: step's other tasks), Slurm's MPI plugin refusing the wire-up, then any
#: other (the ranks that exited because a peer died come last)
SLURM_CANCELLED = r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+ (DUE TO [A-Z ]+)"
SRUN_ERRORS = [r"^srun: error: (Node failure on .+)$",
               r"^srun: error: (\S+: tasks? [\d,-]+: (?!Exited with exit code|Terminated).+)$",
               # Slurm's PMI server refused the ranks' wire-up: the ranks then
               # exit with a code, which says less than this line
               r"^slurmstepd\S*: error: (mpi/\S+: .+)$",
               r"^srun: error: (.+)$"]


def slurm_failure(stderr_text):
    """Why Slurm ended a job early, from the job's stderr; None when it
    did not (the cancellation, then the cause srun saw)."""
    cancelled = re.search(SLURM_CANCELLED, stderr_text)
    # once Slurm cancelled the job, the tasks it terminated are no cause;
    # a node failure still says which node
    errors = SRUN_ERRORS[:1] if cancelled else SRUN_ERRORS
    cause = next((m for m in (re.search(p, stderr_text, re.MULTILINE) for p in errors)
                  if m), None)
    return "; ".join(m.group(1).strip() for m in (cancelled, cause) if m) or None


#: netbench.rfm.launch's line when it ended a launch that ran out of time or was
#: cancelled (netbench/rfm/supervise.py): what it saw, before the MPI launcher's
#: words about the ranks it killed
LAUNCH_STOPPED = r"^netbench\.launch: (stopped the job .*)$"


def job_failure(stdout_text, stderr_text):
    """Why the job's ranks did not all finish, from its output: Slurm's
    reason when Slurm ended the job (the ranks it killed are no cause),
    else the rank the MPI launcher saw die and how (`rank 1 (pid N on
    host) was killed by signal 9 (SIGKILL)`), or netbench.rfm.launch's own
    reason when it ended a launch that ran out of time; None when none."""
    reason = slurm_failure(stderr_text)
    if reason:
        return printable(f"Slurm ended the job: {reason}")
    stopped = re.search(LAUNCH_STOPPED, stderr_text, re.MULTILINE)
    if stopped:
        return printable(stopped[1])
    # host names in it are what the launcher printed: escaped (textsafe)
    failure = benchmark.launcher_failure(f"{stdout_text}\n{stderr_text}")
    return printable(failure) if failure else None


class JobOutcome(rfm.RegressionTestPlugin):
    """The Slurm guard at setup, and the first sanity assertion of every
    run: its ranks all finished.  Mixed into MpiRun (uses its
    read_stage_file)."""

    @run_after("setup")
    def require_matching_slurm_conf(self):
        """ReFrame submits with its own environment's SLURM_CONF: it must
        name the partition's cluster, or the job lands on another one."""
        conf = self.current_partition.extras.get("slurm_conf")
        if conf and os.environ.get("SLURM_CONF") != conf:
            raise ValueError(f"partition {self.current_partition.fullname} is the Slurm of "
                             f"{conf}, but SLURM_CONF={os.environ.get('SLURM_CONF', '')!r}: "
                             f"export SLURM_CONF={conf}")

    #: why the job's ranks did not all finish (job_failure), read once
    #: before the sanity stage; "" when they did
    job_outcome = ""

    def outcome_outputs(self):
        """Further files of the stage folder that a launcher wrote to
        besides the job's stdout (MpiVsTcp's second run)."""
        return ()

    def outcome_texts(self):
        """(stdout, stderr) the job's outcome is read from: its stdout and
        those outputs, and its stderr."""
        stdout = "\n".join(self.read_stage_file(f)
                           for f in (self.job.stdout, *self.outcome_outputs()))
        return stdout, self.read_stage_file(self.job.stderr)

    @run_before("sanity")
    def read_job_outcome(self):
        """The job's outputs (outcome_texts), read once for the reason a
        rank did not finish."""
        self.job_outcome = job_failure(*self.outcome_texts()) or ""

    @sn.deferrable
    def assert_ranks_finished(self):
        """Every rank finished: neither Slurm ended the job or a step early
        (time limit, node failure, a task killed; ReFrame's squeue scheduler
        sees only that the job left the queue), nor did the MPI launcher
        report a rank that died (`rank 1 (pid N on host) was killed by
        signal 9 (SIGKILL)`).  First of the sanity assertions: the output
        of such a run is cut short, and the other assertions and the
        figures would report its symptoms."""
        if self.job_outcome:
            raise sn.SanityError(self.job_outcome)
        return True

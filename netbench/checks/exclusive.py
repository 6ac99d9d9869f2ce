"""A job that needs every node of its partition to itself (the fabric
sweep: two at once share the links, and each sees the other's traffic as a
slow node).

Slurm and LSF partitions give it an exclusive allocation (ReFrame's
`exclusive_access`); a partition that names a lock file in its extras
(`partition_lock`: a virtual cluster's, root's, in its folder) is held with
flock(1) by the job script for its whole run, and a job that finds it held
stops at once with REFUSED_PREFIX's line.  A partition with neither cannot
be held: the check refuses it (`problem`).
"""

import shlex

#: schedulers whose ReFrame backend turns exclusive_access into an option
EXCLUSIVE_SCHEDULERS = ("slurm", "squeue", "lsf")
#: the job's line when the partition is held by another job (its reason)
REFUSED_PREFIX = "netbench: refused:"
LOCK_FD = 9


def problem(part):
    """Why a job cannot hold `part` to itself, or None."""
    if part.scheduler.registered_name in EXCLUSIVE_SCHEDULERS:
        return None
    if part.extras.get("partition_lock"):
        return None
    return ("the partition cannot be held by one job (no exclusive allocation, no "
            "partition_lock in its extras): a sweep needs every node to itself")


def hold_command(lock):
    """Shell lines that take `lock` for the rest of the job script (its
    descriptor stays open until the script ends) or end the job with
    REFUSED_PREFIX's line when another job holds it."""
    path = shlex.quote(lock)
    return (f"{{ exec {LOCK_FD}<{path}; }} 2>/dev/null || "
            f"{{ echo '{REFUSED_PREFIX} cannot open the partition lock '{path} >&2; exit 1; }}; "
            f"flock -n {LOCK_FD} || {{ echo '{REFUSED_PREFIX} another job holds the partition "
            f"(lock '{path}'), one sweep runs at a time: run this one when it is done' >&2; "
            f"exit 1; }}")


def refusal(stderr_text):
    """The refusal line of a job's stderr, without its prefix; None."""
    for line in stderr_text.splitlines():
        if line.startswith(REFUSED_PREFIX):
            return line[len("netbench: "):]
    return None

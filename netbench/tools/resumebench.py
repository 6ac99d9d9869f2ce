"""`make bench-report`: what planning `netbench resume` costs on a large
cluster (issue #54: "a resume of 1,000 drained nodes planned in under
10 s").

Slurm's node list of a 4,000-node cluster with 1,000 nodes drained by
netbench (tests/data/slurm_resume/sinfo-1000-drained.txt, sinfo's format as
captured from slurm-wlm 22.05; its README says how it was written) is
planned as `netbench resume --dry-run` plans the list sinfo gives it
(netbench.fleet.drain.parse_sinfo, resume_plan, and the dry run's lines,
netbench.slurmresume.plan_lines), in a fresh interpreter each time, imports
included: wall and CPU time and peak RSS (the child's rusage), the median
of the repeats.  Without Slurm: sinfo's output is the captured file, no
Slurm client is run or imitated.  Prints figures; asserts nothing.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .. import paths

LISTING = paths.REPO / "tests" / "data" / "slurm_resume" / "sinfo-1000-drained.txt"

#: what the child runs: the dry run's planning of the captured listing
PLAN = """
import sys
from netbench.fleet import drain
from netbench.slurmresume import plan_lines
plan = drain.resume_plan(drain.parse_sinfo(open(sys.argv[1]).read()))
lines = list(plan_lines(plan))
print(len(plan.retest), len(plan.inconclusive), len(plan.left_alone), len(lines))
"""


def plan_cost(listing):
    """(wall s, CPU s, peak RSS MB, the child's counts line) of one plan."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", PLAN, str(listing)], cwd=paths.REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read().decode(errors="replace").strip()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, \
        out if proc.returncode == 0 else f"failed ({proc.returncode})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listing", type=Path, default=LISTING)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    runs = [plan_cost(args.listing) for _ in range(args.repeats)]
    wall, cpu, peak = (statistics.median(r[i] for r in runs) for i in range(3))
    retest, inconclusive, left, lines = (runs[0][3].split() + ["?"] * 4)[:4]
    print(f"resume --dry-run plan of {args.listing.name}: {retest} to re-test, "
          f"{inconclusive} inconclusive, {left} left alone, {lines} lines; median of "
          f"{args.repeats}: {wall:.2f} s wall, {cpu:.2f} s CPU, {peak:.0f} MB peak RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

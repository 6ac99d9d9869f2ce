"""`python -m netbench.judgement.remeasure JUDGING_JSON`: the runs a job
must launch again, one name a line, or nothing when every judged figure is
decided (netbench.judgement.model).  The job script runs it between
launches (job_lines), in its stage folder, so the next launch follows
within the same job and allocation; the checks decide the same way after
the job from the same files.

JUDGING_JSON (written by the check before the job):

    {"runs": {run name: the first launch's output file},
     "figures": {variable: {"run": run name, "spec": figure spec
                            (figures.py), "bound": {"side", "value"},
                            "kind": the reference's kind, "conditions": the
                            reference's conditions or null}},
     "knobs": the model's knobs as the check loaded them (knobs.to_json)}

A run's later launches are `NAME-2.out`, `NAME-3.out`, ... beside it.
"""

import os
import shlex
import sys

from ..datafiles import DataError, load_json
from ..results.benchmark import parse_run, started
from . import figures
from . import conditions, knobs as judging_knobs
from .model import UNDECIDED, Bound, Reference, Replicate, judge

#: what the job prints after its launches: how busy the host was (an
#: inconclusive verdict names it); /proc/pressure exists from Linux 4.20
HOST_LOAD_LINES = [
    'echo "# host load $(cat /proc/loadavg 2>/dev/null)"',
    '[ -r /proc/pressure/cpu ] && echo "# host cpu_pressure $(head -n 1 /proc/pressure/cpu)" '
    '|| true',
]


def bound_of(ref, lower, upper, unit):
    """The Bound of ReFrame's reference tuple (value, lower, upper as
    fractions): the side a figure fails on; None when unbounded.  A
    reference bounded on both sides is judged on the side its unit makes
    worse (a time above, a rate below)."""
    if not ref:
        return None
    upper_bound = Bound("upper", ref * (1 + upper)) if upper is not None else None
    lower_bound = Bound("lower", ref * (1 + lower)) if lower is not None else None
    if upper_bound and lower_bound:
        return upper_bound if unit in ("us", "s", "ms", "ns") else lower_bound
    return upper_bound or lower_bound


def launch_files(folder, run, first):
    """The output files of every launch of `run` in `folder`, in order:
    its first, then the later launches `RUN-2.out`, `RUN-3.out`, ...
    (job_lines names them so)."""
    files = [first]
    while os.path.exists(os.path.join(folder, f"{run}-{len(files) + 1}.out")):
        files.append(f"{run}-{len(files) + 1}.out")
    return files


def undecided_runs(description, folder=".", say=None):
    """The names of the runs with a figure still undecided, and of those
    whose every launch so far failed to start (at most the knobs'
    `restarts` more); `say(words)` is told why those launch again.  A
    figure is decided as the check decides it (model.judge): a miss the
    host's conditions explain is measured again while the budget lasts."""
    knobs = description_knobs(description)
    launches = {}
    again = set()
    for run, first in description["runs"].items():
        files = launch_files(folder, run, first)
        parsed = [parse_run(_read(os.path.join(folder, f))) for f in files]
        launches[run] = parsed
        if not any(started(p) for p in parsed) and len(parsed) <= knobs.restarts:
            again.add(run)
            if say:
                say(f"{run}: {', '.join(files)} printed nothing of the benchmark (its launcher "
                    f"failed to start it): launching it once more")
    for figure in description["figures"].values():
        run = figure["run"]
        if run not in launches:
            continue
        reference = Reference(Bound(figure["bound"]["side"], float(figure["bound"]["value"])),
                              figure.get("kind", "threshold"), figure.get("conditions"))
        decision = judge(replicates(launches[run], figure["spec"]), reference, knobs)
        if decision.verdict == UNDECIDED:
            again.add(run)
    return sorted(again)


def replicates(parsed_launches, spec):
    """The Replicates of one figure over a run's parsed launches (those
    without the figure, cut short, left out)."""
    found = []
    for launch in parsed_launches:
        try:
            estimate = figures.estimate(launch["rows"], spec)
        except figures.NoFigure:
            continue
        found.append(Replicate(estimate, conditions.of_launch(launch)))
    return found


def description_knobs(description):
    """The knobs the check judges by (sent in the description), else
    netbench's."""
    given = description.get("knobs")
    return judging_knobs.from_json(given) if given else judging_knobs.load()


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


#: what the job prints to its stderr before each later round of launches
#: (job_lines): the rounds' stderr apart (stderr_rounds)
AGAIN_LINE = "netbench: launching again"


def stderr_rounds(text):
    """The job's stderr cut into its rounds of launches: the first round's,
    then each later round's from its AGAIN_LINE on."""
    rounds = [""]
    for line in text.splitlines(keepends=True):
        if line.startswith(AGAIN_LINE):
            rounds.append("")
        rounds[-1] += line
    return rounds


def rounds_never_started(started):
    """The rounds of launches (0 the first) in which no launch started,
    when a later round's launch did: the launcher's failure to start them
    was launched again (undecided_runs) and is not how the job ended.
    `started`: {run: [whether each launch started, in order]}; round K
    holds each run's launch K.  None passed over when no later launch
    started: then the failure to start is the job's outcome."""
    rounds = max((len(s) for s in started.values()), default=0)
    launched = [[s[k] for s in started.values() if len(s) > k] for k in range(rounds)]
    last_started = max((k for k, round_ in enumerate(launched) if any(round_)), default=-1)
    return [k for k, round_ in enumerate(launched) if k < last_started and not any(round_)]


#: the job script's variable holding when its first launch started
#: (date +%s), set by START_LINE
START = "netbench_started"
START_LINE = f"{START}=$(date +%s)"


def job_lines(commands, judging_file, launches, time_limit, time_share):
    """The job script's lines that launch each run again while it has an
    undecided figure, up to `launches` launches in all: `commands` {run
    name: its command line}.  With `time_limit` (seconds), a launch starts
    only while the launches so far, plus one more of their mean length,
    end within `time_share` of it (the script must run START_LINE before the
    first launch): on a host so busy that launches crawl, the figure ends
    inconclusive instead of the job being killed at its limit."""
    if launches < 2 or not commands:
        return []
    tool = f"{shlex.quote(sys.executable)} -m netbench.judgement.remeasure {judging_file}"
    cases = " ".join(f"{name}) {command} > {name}-$n.out ;;"
                     for name, command in sorted(commands.items()))
    in_time = ""
    if time_limit:
        budget = int(time_limit * time_share)
        in_time = (f'spent=$(( $(date +%s) - ${START} )); '
                   f'if [ $(( spent + spent / (n - 1) )) -gt {budget} ]; then '
                   f'echo "netbench: no launch $n: $spent s spent of the job\'s {budget} s" >&2; '
                   f"break; fi; ")
    return [f"for n in $(seq 2 {launches}); do "
            f'again=$({tool}) || break; [ -n "$again" ] || break; {in_time}'
            f'echo "{AGAIN_LINE} (undecided, or never started): $again" >&2; '
            f"for run in $again; do case $run in {cases} esac; done; done"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.exit("usage: python -m netbench.judgement.remeasure JUDGING_JSON")
    try:
        description = load_json(argv[0], kind="record")
        runs = undecided_runs(description, os.path.dirname(os.path.abspath(argv[0])),
                              say=lambda words: print(f"netbench.judgement.remeasure: {words}",
                                                      file=sys.stderr))
    except (DataError, OSError, ValueError, KeyError, TypeError) as err:
        # the job goes on without another launch; the check decides from
        # what it has and says so
        sys.exit(f"netbench.judgement.remeasure: {argv[0]}: {err}")
    print("\n".join(runs))


if __name__ == "__main__":
    main()

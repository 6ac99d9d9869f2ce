"""Which test cases a ReFrame session generates: the focused default set,
or the whole matrix; and only cases that can run.

ReFrame filters by tag or name only after it has instantiated every check,
and a case it cannot run shows up as a SKIP line.  netbench decides both
earlier, while each check is initialised (checks/base.py,
`generate_possible_cases_only`):

- A session whose command line selects nothing itself (no `-t`, `-n`, `-E`)
  gets the focused default set: the cases that answer "does this network
  perform as it should".  Any selection (`-t full`, `-t seeds`, `-n ...`)
  selects from the whole matrix.  `-t default` names the focused set.
- A case that could only skip (a transport its MPI does not offer, a
  placement its partition cannot host, a benchmark binary no view has) is
  not generated; each reason is counted and printed once before the run
  (`not_generated_lines`).

Pure: no ReFrame import; the checks pass partitions and environments in.
"""

import argparse
import re
import sys
from collections import Counter

#: every generated case carries FULL_TAG; the focused set also DEFAULT_TAG
FULL_TAG = "full"
DEFAULT_TAG = "default"

#: reason -> cases not generated, this session (one ReFrame process)
NOT_GENERATED = Counter()
#: reason -> the details behind it ("mpich: tcp"), printed on its line
NOT_GENERATED_DETAILS = {}


def _selection_options(argv):
    """ReFrame's own selection options (-t/--tag, -n/--name,
    -E/--filter-expr) as its command line gives them."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("-t", "--tag", action="append", default=[])
    parser.add_argument("-n", "--name", action="append", default=[])
    parser.add_argument("-E", "--filter-expr", action="append", default=[])
    known, _ = parser.parse_known_args(argv)
    return known


def full_matrix_requested(argv=None):
    """True unless the command line leaves the choice of checks to netbench
    (no selection option, or only `-t default`)."""
    options = _selection_options(sys.argv[1:] if argv is None else argv)
    if options.name or options.filter_expr:
        return True
    return any(tag != DEFAULT_TAG for tag in options.tag)


def requested_tags(argv=None):
    return _selection_options(sys.argv[1:] if argv is None else argv).tag


def requested_names(argv=None):
    """The command line's `-n` patterns."""
    return _selection_options(sys.argv[1:] if argv is None else argv).name


def plan(candidates, partition_problem, environment_problem, in_scope=None):
    """The partitions and environments a check keeps, and why the others
    were dropped.

    `candidates` maps each partition ReFrame would run the check on to its
    environments.  `partition_problem(part)` and `environment_problem(env)`
    return why no case can run there: None (it can), a reason, or a pair
    (reason, detail) whose details are listed on the reason's line.
    netbench's rules are
    separable, so the kept partitions times the kept environments are
    exactly the runnable cases.  `in_scope(env)` (None: everything) says
    whether an environment's case belongs to this session's set; cases out
    of scope are neither run nor reported as dropped.

    Returns (partitions, environment names, Counter (reason, detail) ->
    cases)."""
    dropped = Counter()
    parts, env_names = [], []
    for part, envs in candidates.items():
        envs = [e for e in envs if in_scope is None or in_scope(e)]
        why = partition_problem(part)
        if why:
            dropped[_keyed(why)] += len(envs)
            continue
        kept = 0
        for env in envs:
            why = environment_problem(env)
            if why:
                dropped[_keyed(why)] += 1
            else:
                kept += 1
                if env.name not in env_names:
                    env_names.append(env.name)
        if kept:
            parts.append(part)
    return parts, env_names, dropped


def _keyed(why):
    return why if isinstance(why, tuple) else (why, None)


def selected_by_command_line(tags, display_name, argv=None):
    """Whether ReFrame's -t and -n filters of the command line would select
    a check of these tags and display name (as ReFrame's own filters match:
    every -t pattern some tag; any -n regex the name without spaces)."""
    options = _selection_options(sys.argv[1:] if argv is None else argv)
    if not all(any(re.search(p, t) for t in tags) for p in options.tag):
        return False
    regexes = [n for n in options.name if "@" not in n and not n.startswith("/")]
    if regexes and not re.search("|".join(regexes), display_name.replace(" ", "")):
        return False
    return True


def record_not_generated(dropped, tags, argv=None, display_name=""):
    """Count dropped cases for the session's summary, unless the command
    line's filters would not have selected the check anyway."""
    if not selected_by_command_line(tags, display_name, argv):
        return
    for (reason, detail), n in dropped.items():
        NOT_GENERATED[reason] += n
        if detail:
            NOT_GENERATED_DETAILS.setdefault(reason, set()).add(detail)


def not_generated_lines(counts=None, details=None):
    """One line per reason, the most frequent first, its details after it."""
    counts = NOT_GENERATED if counts is None else counts
    details = NOT_GENERATED_DETAILS if details is None else details
    lines = []
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if not n:
            continue
        detail = "; ".join(sorted(details.get(reason, ())))
        lines.append(f"{n} case{'s' if n != 1 else ''} not generated: {reason}"
                     + (f" ({detail})" if detail else ""))
    return lines

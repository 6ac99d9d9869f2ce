"""The fabric sweep's failure reasons (LinkSweep), one line each: the
suspects, and why a sweep did not finish.  Host names are whatever the
nodes called themselves and launcher messages whatever the launcher
printed: both pass through textsafe.printable, so a name holding terminal
escapes reaches the operator's terminal as the escapes it is made of."""

import re

from ..textsafe import printable
from ..results.benchmark import LAUNCH_LEFT_BEHIND
from ..results.lost import JOB_NODES_LINE
from ..results.suspects import (END_SLOW, ENDS_FINE, NO_HEALTHY_PARTNER, SLOW_WITH_HEALTHY,
                                UNREACHABLE)

#: a suspect's confirmation against healthy partners (netbench.fleet.confirm), in words
CONFIRMATION_WORDS = {
    SLOW_WITH_HEALTHY: "bad with the healthy partners measured again",
    ENDS_FINE: "each end fine with the healthy partners measured again: the link, not a node",
    END_SLOW: "an end bad with the healthy partners measured again",
    NO_HEALTHY_PARTNER: "no healthy partner measured again",
}


def describe(suspect):
    """One suspect in the case's failure reason."""
    if suspect.direction == UNREACHABLE:
        return describe_lost(suspect)
    names = "->".join(suspect.names) if suspect.kind == "pair" else suspect.names[0]
    if suspect.kind == "switch-link":
        names = suspect.component or f"{suspect.names[0]}<->{suspect.names[-1]}"
    pairs = ", ".join(f"{e.src}->{e.dst} {e.value:.4g}" for e in suspect.evidence[:6])
    # a path's links the pairs cannot tell apart (fleet.components.path_suspect)
    why = f" ({suspect.reason})" if suspect.reason else ""
    return printable(f"{suspect.kind} {names} ({suspect.direction}): {suspect.metric} "
                     f"{suspect.value:.4g} vs fleet median {suspect.fleet_median:.4g} "
                     f"[{pairs}]{why}{describe_confirmation(suspect)}")


def describe_confirmation(suspect):
    """"; confirmed: <words> [a->b figure (bound B), ...]", or nothing for a
    suspect the sweep did not measure again against healthy partners."""
    if suspect.confirmed is None:
        return ""
    figures = ", ".join(f"{e.src}->{e.dst} {e.value:.4g}" for e in suspect.confirmation[:6])
    bound = f" (bound {suspect.confirmation[0].bound:.4g})" if suspect.confirmation else ""
    return (f"; confirmed: {CONFIRMATION_WORDS[suspect.confirmed]}"
            + (f" [{figures}]{bound}" if figures else ""))


def describe_within_noise(suspect, stat, bound, mad_multiple):
    """A suspect beyond the relative band that the fleet's own spread
    (`stat`: its metric's FleetStat) widened to `bound`: too noisy to tell."""
    return printable(f"within the fleet's own spread ({mad_multiple:g} x its MAD "
                     f"{stat.fleet_mad:.4g} widened the band to {bound:.4g}): "
                     + describe(suspect))


def describe_lost(suspect):
    """A node that stopped answering, with what its pairs measured before;
    one the launch could not reach, with why (ssh's words)."""
    if suspect.reason:
        return printable(f"node {suspect.names[0]} ({UNREACHABLE}): {suspect.reason}")
    measured = ", ".join(f"{e.src}->{e.dst} {e.value:.4g}" for e in suspect.evidence[:6])
    metric = suspect.evidence[0].metric if suspect.evidence else None
    before = f"; before it, {metric}: {measured}" if measured else "; none of its pairs was measured"
    return printable(f"node {suspect.names[0]} ({UNREACHABLE}): stopped answering mid-sweep "
                     f"after {suspect.value:g} of its pairs (the other nodes: "
                     f"{suspect.fleet_median:g}){before}")


#: the job's note when what is left of its time limit is too little for
#: another pass (reframe_checks/link_sweep.py): "<this> N: S s left ..."
NO_TIME_LEFT = "netbench: no time left for sweep pass"
#: netbench's launch, ending a launch at its time limit (rfm/supervise.py)
TIME_LIMIT = re.compile(r"^netbench\.launch: stopped the job (?P<after>\d+) s into its "
                        r"(?P<limit>\d+) s time limit", re.MULTILINE)

#: lines of the job's stderr that netbench's own tools wrote: no cause
OURS = ("# launch:", "netbench.fleet.remeasure:", "netbench: sweeping again", NO_TIME_LEFT,
        "netbench.launch: ssh reaches", JOB_NODES_LINE,
        LAUNCH_LEFT_BEHIND)
#: ssh, the launchers' agent, saying why it reached no node, in its own
#: words or as netbench's launch asked it again (rfm/supervise.py)
SSH = ("ssh: ", "Connection to ", "Permission denied",
       "netbench.launch: the launcher started no rank", "netbench.launch: the launch lost")


def benchmark_message(stderr_text):
    """What the job's stderr says went wrong: the benchmark's own error
    (`netbench: ...`, its usage errors and failures), else ssh's (a node
    the launcher could not reach), else its last line; None when it says
    nothing but netbench's own notes."""
    lines = [line.strip() for line in (stderr_text or "").splitlines()
             if line.strip() and not line.strip().startswith(OURS)]
    for wanted in (lambda line: line.startswith("netbench: "),
                   lambda line: line.startswith(SSH)):
        found = [line for line in lines if wanted(line)]
        if found:
            return found[0]
    return lines[-1] if lines else None


def unfinished(lost, launcher_failure, stderr_text):
    """Why the sweep did not finish, for the case's reason: the node that
    stopped answering, then what the launcher said died and the benchmark's
    own message, whichever there are."""
    parts = [describe(s) for s in lost]
    cause = launcher_failure or benchmark_message(stderr_text)
    head = "the sweep lost a node: " if lost else "the benchmark did not finish its sweep"
    text = head + "; ".join(parts)
    # an unreachable node's reason is ssh's line already: not twice
    if cause and not any(s.reason and s.reason in cause for s in lost):
        text += f"{'; ' if lost else ': '}{cause}"
    return printable(text)


def out_of_time(limit, measured, missing, verdict_words):
    """The reason of a sweep its launch ended at the job's time limit
    (`limit` seconds): how many pairs it measured, those it did not reach
    (`missing`: "a->b" directions, the first few named), and what the
    pairs it measured say (`verdict_words`)."""
    shown = ", ".join(missing[:8]) + (f", ... ({len(missing)} in all)"
                                      if len(missing) > 8 else "")
    return printable(f"the sweep reached the job's {limit} s time limit after {measured} "
                     f"directions of pairs; not measured: {shown or 'none'}; "
                     f"of what it measured: {verdict_words}")

"""The fabric sweep's failure reasons (LinkSweep), one line each: the
suspects, and why a sweep did not finish.  Host names are whatever the
nodes called themselves and launcher messages whatever the launcher
printed: both pass through textsafe.printable, so a name holding terminal
escapes reaches the operator's terminal as the escapes it is made of."""

from ..textsafe import printable
from .judge import UNREACHABLE


def describe(suspect):
    """One suspect in the case's failure reason."""
    if suspect.direction == UNREACHABLE:
        return describe_lost(suspect)
    names = "->".join(suspect.names) if suspect.kind == "pair" else suspect.names[0]
    pairs = ", ".join(f"{e.src}->{e.dst} {e.value:.4g}" for e in suspect.evidence[:6])
    return printable(f"{suspect.kind} {names} ({suspect.direction}): {suspect.metric} "
                     f"{suspect.value:.4g} vs fleet median {suspect.fleet_median:.4g} "
                     f"[{pairs}]")


def describe_lost(suspect):
    """A node that stopped answering, with what its pairs measured before."""
    measured = ", ".join(f"{e.src}->{e.dst} {e.value:.4g}" for e in suspect.evidence[:6])
    metric = suspect.evidence[0].metric if suspect.evidence else None
    before = f"; before it, {metric}: {measured}" if measured else "; none of its pairs was measured"
    return printable(f"node {suspect.names[0]} ({UNREACHABLE}): stopped answering mid-sweep "
                     f"after {suspect.value:g} of its pairs (the other nodes: "
                     f"{suspect.fleet_median:g}){before}")


def benchmark_message(stderr_text):
    """The benchmark's own error (`netbench: ...`, its usage errors and
    failures), else the last line of the job's stderr that netbench's
    launcher did not write; None for an empty stderr."""
    lines = [line.strip() for line in (stderr_text or "").splitlines() if line.strip()]
    own = [line for line in lines if line.startswith("netbench: ")
           and not line.startswith("netbench: sweeping again")]
    if own:
        return own[0]
    others = [line for line in lines if not line.startswith("# launch:")]
    return others[-1] if others else None


def unfinished(lost, launcher_failure, stderr_text):
    """Why the sweep did not finish, for the case's reason: the node that
    stopped answering, then what the launcher said died and the benchmark's
    own message, whichever there are."""
    parts = [describe(s) for s in lost]
    cause = launcher_failure or benchmark_message(stderr_text)
    head = "the sweep lost a node: " if lost else "the benchmark did not finish its sweep"
    text = head + "; ".join(parts)
    if cause:
        text += f"{'; ' if lost else ': '}{cause}"
    return printable(text)

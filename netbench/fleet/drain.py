"""drain.sh: what an operator might run after reading suspects.json.

netbench never drains a node: the script's every scontrol line is a
comment, one per suspect *node*; a suspect link gets a comment naming it
(draining either end would hide, not fix, a cable).  An administrator runs
this file as root, and its text comes from a run report anyone could have
written, so every byte of it is netbench's own or comes from a closed
vocabulary or is escaped:

- host names: a plain host name (HOST_NAME), else refused (named in a
  comment, escaped);
- kind, direction and metric: judge's vocabularies (KINDS,
  NODE_DIRECTIONS, METRIC; a pair's `a->b` only of its own two names),
  else written as "refused";
- numbers: finite numbers, printed by netbench, else "?";
- the reason prefix and anything else in a comment: printable ASCII on
  one line (comment_text);
- the words of each scontrol line are quoted with shlex.quote, so that
  uncommenting it cannot run anything but scontrol.
"""

import math
import re
import shlex

from ..results.suspects import KINDS, METRIC, NODE_DIRECTIONS, UNREACHABLE

#: what Slurm and DNS call a host: letters, digits, dot, dash, underscore
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z")

HEADER = """\
#!/bin/sh
# drain.sh: written by netbench's sweep (netbench/fleet/drain.py) from
# suspects.json.  netbench never runs it.
#
# Review before running: each suspect node's scontrol line is commented
# out; uncomment only the nodes you have checked (re-measure them first).
# Suspect links (a cable, a switch port) are listed as comments only:
# draining either end would hide the fault, not fix it.
"""


def safe_host(name):
    """`name` when it is a plain host name, else None."""
    return name if isinstance(name, str) and HOST_NAME.match(name) else None


def comment_text(text):
    """`text` made safe inside a shell comment: one line, printable ASCII."""
    return ascii(str(text))[1:-1]


def figure(value):
    """A finite number as netbench prints it; anything else is '?'."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)
    return f"{value:g}" if ok else "?"


def metric_of(suspect):
    return suspect.metric if isinstance(suspect.metric, str) and METRIC.match(suspect.metric) \
        else "refused metric"


def node_direction(suspect):
    direction = suspect.direction
    return direction if isinstance(direction, str) and direction in NODE_DIRECTIONS \
        else "refused direction"


def pair_direction(suspect, ends):
    """both, or `a->b` of the pair's own (plain) names; else refused."""
    direction = suspect.direction
    if direction == "both":
        return direction
    if None not in ends and direction in (f"{ends[0]}->{ends[1]}", f"{ends[1]}->{ends[0]}"):
        return direction
    return "refused direction"


def drain_reason(suspect, reason_prefix):
    """The scontrol Reason: netbench's words and figures only."""
    if suspect.direction == UNREACHABLE:
        return (f"{reason_prefix}: stopped answering mid-sweep after "
                f"{figure(suspect.value)} of its pairs (the others: "
                f"{figure(suspect.fleet_median)})")
    return (f"{reason_prefix}: {metric_of(suspect)} {figure(suspect.value)} "
            f"vs fleet median {figure(suspect.fleet_median)}")


def refused_name(name):
    return comment_text(repr(name))


def node_lines(suspect, reason_prefix):
    name = suspect.names[0] if suspect.names else None
    host = safe_host(name)
    if host is None:
        return [f"# refused node name {refused_name(name)}: not a host name"]
    reason = drain_reason(suspect, reason_prefix)
    return [f"# {reason} ({node_direction(suspect)})",
            f"# scontrol update NodeName={shlex.quote(host)} State=DRAIN "
            f"Reason={shlex.quote(reason)}"]


def pair_lines(suspect):
    names = list(suspect.names)[:2]
    ends = [safe_host(n) for n in names]
    shown = " and ".join(refused_name(n) if host is None else host
                         for n, host in zip(names, ends))
    return [f"# link between {shown} ({pair_direction(suspect, ends)}): "
            f"{metric_of(suspect)} {figure(suspect.value)} vs fleet median "
            f"{figure(suspect.fleet_median)}; not drained, check the cable or port"]


def switch_lines(suspect):
    """A switch or the link between a switch and its parent: named, never
    drained (draining the nodes under it would hide the fault)."""
    names = [safe_host(n) or f"refused name {refused_name(n)}" for n in suspect.names[:2]]
    what = (f"link between switch {names[0]} and its parent {names[-1]}"
            if suspect.kind == "switch-link" else f"switch {names[0]}")
    return [f"# {what} ({node_direction(suspect)}): {metric_of(suspect)} "
            f"{figure(suspect.value)} vs fleet median {figure(suspect.fleet_median)}; "
            f"not drained, check the switch and its ports"]


def suspect_lines(suspect, reason_prefix):
    if suspect.kind == "node":
        return node_lines(suspect, reason_prefix)
    if suspect.kind == "pair":
        return pair_lines(suspect)
    if suspect.kind in ("switch-link", "switch"):
        return switch_lines(suspect)
    return [f"# refused suspect of kind {comment_text(repr(suspect.kind))}: "
            f"not one of {', '.join(KINDS)}"]


def drain_script(suspects, reason_prefix="netbench"):
    """The text of drain.sh for `suspects` (results.suspects.Suspect)."""
    reason_prefix = comment_text(reason_prefix)
    lines = [HEADER.rstrip("\n")]
    for suspect in suspects:
        lines.append("")
        lines += suspect_lines(suspect, reason_prefix)
    if not suspects:
        lines += ["", "# no suspects: nothing to drain"]
    return "\n".join(lines) + "\n"

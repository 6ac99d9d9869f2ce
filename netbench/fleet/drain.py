"""What to drain after a sweep: drain.sh, and the plan `netbench drain`
carries out (netbench.slurmdrain and netbench.slurmresume run Slurm; this
module decides).

`drain_plan`: from a session's suspects.json and the Slurm nodes, each
suspect node to drain with netbench's reason (``netbench: <session>: ...``,
the prefix `netbench resume` recognises its own drains by), each node left
alone because someone else drained it, each link named and not drained,
and the names the cluster does not have (then nothing is drained).

drain.sh, for sites that review by hand: the script's every scontrol line
is a comment, one per suspect *node*; a suspect link gets a comment naming
it (draining either end would hide, not fix, a cable).  An administrator runs
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

import dataclasses
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
# `netbench drain SESSION` does the same with Slurm's own state checked
# first (a node someone else drained is left alone; --dry-run shows it),
# and `netbench resume` re-tests and returns the nodes it drained.
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
    """The scontrol Reason: netbench's words and figures only (and an
    unreachable node's reason, ssh's words, made one printable line)."""
    if suspect.direction == UNREACHABLE and suspect.reason:
        return f"{reason_prefix}: unreachable: {comment_text(suspect.reason)}"
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
    if suspect.reason and suspect.component:
        # a path whose links and switches the sweep cannot tell apart
        # (fleet.components.path_suspect): every one of them to check
        path = comment_text(suspect.component)
        what = f"path {path} between switches {names[0]} and {names[-1]}"
        ends = [safe_host(n) for n in suspect.names[:2]]
        return [f"# {what} ({pair_direction(suspect, ends)}): {metric_of(suspect)} "
                f"{figure(suspect.value)} vs fleet median {figure(suspect.fleet_median)}; "
                f"not drained, the sweep cannot tell its links apart: check each"]
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


# -- netbench drain: the plan ------------------------------------------------

#: the start of every Reason netbench gives a node it drains: `netbench
#: resume` touches only nodes drained with it
REASON_PREFIX = "netbench: "
#: Slurm keeps a node's reason short; netbench's stays well within it
REASON_MAX = 200


@dataclasses.dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str                # sinfo's long state: idle, drained, draining, down, ...
    reason: str = ""          # "" without one

    @property
    def drained(self):
        """Drained or draining: no new job starts on it."""
        return self.state.startswith("drain")

    @property
    def drained_by_netbench(self):
        return self.drained and is_netbench_reason(self.reason)

    @property
    def in_service(self):
        """Up and taking jobs, idle: a partner a re-test may use."""
        return self.state == "idle"


def is_netbench_reason(reason):
    return isinstance(reason, str) and reason.startswith(REASON_PREFIX)


@dataclasses.dataclass
class DrainPlan:
    drain: list = dataclasses.field(default_factory=list)        # (node, reason)
    already: list = dataclasses.field(default_factory=list)      # drained by netbench
    left_alone: list = dataclasses.field(default_factory=list)   # SlurmNode someone drained
    links: list = dataclasses.field(default_factory=list)        # text, not drained
    unknown: list = dataclasses.field(default_factory=list)      # names Slurm does not have
    refused: list = dataclasses.field(default_factory=list)      # text: no host name


def session_reason(session, suspect):
    """netbench's Reason for draining `suspect`'s node after `session`."""
    reason = drain_reason(suspect, f"{REASON_PREFIX}{comment_text(session)}")
    return reason[:REASON_MAX]


def drain_plan(session, suspects, nodes):
    """What `netbench drain` does for `suspects` (results.suspects.Suspect,
    every sweep's of the session) on a cluster whose Slurm nodes are
    `nodes` ({name: SlurmNode}).  A suspect naming a node the cluster does
    not have makes the plan drain nothing (plan.unknown says which): the
    report is another cluster's."""
    plan = DrainPlan()
    wanted = {}
    for suspect in suspects:
        if suspect.kind == "pair":
            plan.links.append(pair_lines(suspect)[0].lstrip("# "))
            continue
        name = suspect.names[0] if suspect.kind == "node" and suspect.names else None
        host = safe_host(name)
        if host is None:
            plan.refused.append(f"suspect {refused_name(name)} of kind "
                                f"{comment_text(repr(suspect.kind))}: not a node's host name")
            continue
        wanted.setdefault(host, session_reason(session, suspect))
    plan.unknown = sorted(set(wanted) - set(nodes))
    if plan.unknown:
        return plan
    for host, reason in wanted.items():
        node = nodes[host]
        if node.drained_by_netbench:
            plan.already.append(node)
        elif node.drained or node.reason:
            # drained, or down, with someone else's reason: theirs to undo
            plan.left_alone.append(node)
        else:
            plan.drain.append((host, reason))
    return plan


# -- netbench resume: the plan -----------------------------------------------

#: the fewest partners a re-test may have: with one, a slow pair cannot say
#: which end is slow (the judge leaves one node out of the fleet's median,
#: netbench.fleet.judge), so a slowed node measured against one partner
#: "passes" as often as not
MIN_PARTNERS = 2
#: what follows REASON_PREFIX in the Reason of a node whose re-test could
#: not decide: still netbench's own, so a later resume re-tests it
INCONCLUSIVE = "re-test inconclusive"


def parse_sinfo(text):
    """{name: SlurmNode} of `sinfo -a -h -N -o %N|%T|%E` output (one line per
    node and partition: a node in two partitions is one node).  sinfo's
    long state carries a suffix for a node not responding (*) and others;
    a node without a reason shows "none"."""
    nodes = {}
    for line in text.splitlines():
        name, state, reason = (line.split("|", 2) + ["", ""])[:3]
        reason = "" if reason.strip() == "none" else reason.strip()
        nodes[name.strip()] = SlurmNode(name.strip(), state.strip().rstrip("*~#!%$@^-"), reason)
    return nodes


def inconclusive_reason(why):
    """The Reason of a node left drained because its re-test could not
    decide: netbench's prefix, so it stays netbench's to re-test."""
    return f"{REASON_PREFIX}{INCONCLUSIVE}: {comment_text(why)}"[:REASON_MAX]


def too_few_partners(count):
    return f"only {count} healthy partner(s) in service"


def healthy_partners(nodes):
    """The nodes a re-test may measure against: idle, no reason of anyone's
    (a node drained or down by anyone, or under test, is not healthy)."""
    return sorted(n.name for n in nodes.values() if n.in_service and not n.reason)


@dataclasses.dataclass
class ResumePlan:
    retest: list = dataclasses.field(default_factory=list)        # (SlurmNode, [partner])
    inconclusive: list = dataclasses.field(default_factory=list)  # (SlurmNode, why)
    draining: list = dataclasses.field(default_factory=list)      # ours, jobs still running
    left_alone: list = dataclasses.field(default_factory=list)    # someone else's


def resume_plan(nodes, partners=MIN_PARTNERS):
    """What `netbench resume` does on a cluster whose Slurm nodes are
    `nodes` ({name: SlurmNode}): each node netbench drained (and that no
    job runs on any more) re-tested against `partners` healthy nodes, or
    left drained, inconclusive, when fewer than MIN_PARTNERS are in
    service; a node someone else drained left alone.  ValueError when
    `partners` is below MIN_PARTNERS."""
    if partners < MIN_PARTNERS:
        raise ValueError(f"--partners {partners}: use {MIN_PARTNERS} or more (with one "
                         f"partner a slow pair cannot say which end is slow)")
    plan = ResumePlan()
    healthy = healthy_partners(nodes)
    for node in sorted(nodes.values(), key=lambda n: n.name):
        if node.drained and not node.drained_by_netbench:
            plan.left_alone.append(node)
        elif node.drained_by_netbench and node.state == "draining":
            plan.draining.append(node)
        elif node.drained_by_netbench and len(healthy) < MIN_PARTNERS:
            plan.inconclusive.append((node, too_few_partners(len(healthy))))
        elif node.drained_by_netbench:
            plan.retest.append((node, rotated(healthy, len(plan.retest), partners)))
    return plan


def rotated(healthy, k, count):
    """The k-th re-test's `count` partners (all of them when fewer): taken
    in turn from the healthy nodes, so that one partner slower than its
    state says makes few re-tests inconclusive, not all."""
    count = min(count, len(healthy))
    start = k * count % len(healthy)
    return [healthy[(start + j) % len(healthy)] for j in range(count)]


def unchanged_since_planned(planned, now):
    """Why `now` (the node as Slurm shows it just before netbench changes
    it) may not be changed, or None: it must still be drained with the
    very reason netbench read when it planned (LBNL NHC's rule: never
    touch a node whose reason is not your own, and read it again before
    acting).  An administrator who drained it meanwhile, or resumed it,
    or took it down, owns it now."""
    if now is None:
        return f"{planned.name} is no longer in Slurm's node list"
    if now.drained and now.reason == planned.reason:
        return None
    return (f"{now.name} is now {now.state}" + (f" ({now.reason})" if now.reason else "")
            + ": changed by someone else during the re-test, left as it is")

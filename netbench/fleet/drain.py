"""drain.sh: what an operator might run after reading suspects.json.

netbench never drains a node: the script's every scontrol line is a
comment, one per suspect *node*; a suspect link gets a comment naming it
(draining either end would hide, not fix, a cable).  Host names come from
the measurements, i.e. from whatever the nodes called themselves: a name
that is not a plain host name is refused (named in a comment, escaped),
and every word is quoted with shlex.quote so that uncommenting a line
cannot run anything but scontrol.
"""

import re
import shlex

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


def drain_reason(suspect, reason_prefix):
    return (f"{reason_prefix}: {suspect.metric} {suspect.value:g} "
            f"vs fleet median {suspect.fleet_median:g}")


def node_lines(suspect, reason_prefix):
    name = suspect.names[0]
    host = safe_host(name)
    if host is None:
        return [f"# refused node name {comment_text(repr(name))}: not a host name"]
    reason = drain_reason(suspect, reason_prefix)
    return [f"# {comment_text(reason)} ({suspect.direction})",
            f"# scontrol update NodeName={shlex.quote(host)} State=DRAIN "
            f"Reason={shlex.quote(comment_text(reason))}"]


def pair_lines(suspect):
    ends = " and ".join(comment_text(repr(n)) if safe_host(n) is None else n
                        for n in suspect.names)
    return [f"# link between {ends} ({comment_text(suspect.direction)}): "
            f"{comment_text(suspect.metric)} {suspect.value:g} vs fleet median "
            f"{suspect.fleet_median:g}; not drained, check the cable or port"]


def drain_script(suspects, reason_prefix="netbench"):
    """The text of drain.sh for `suspects` (judge.Suspect)."""
    reason_prefix = comment_text(reason_prefix)
    lines = [HEADER.rstrip("\n")]
    for suspect in suspects:
        lines.append("")
        if suspect.kind == "node":
            lines += node_lines(suspect, reason_prefix)
        else:
            lines += pair_lines(suspect)
    if not suspects:
        lines += ["", "# no suspects: nothing to drain"]
    return "\n".join(lines) + "\n"

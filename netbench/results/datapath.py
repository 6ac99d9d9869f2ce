"""Which path a launch's MPI library says it took, from its own words in
the launch's output: the lines mpi_families.yaml's `provenance.switches`
make it print (MPICH's debug summary, Open MPI's framework verbosity,
UCX's endpoint lanes), read by that family's `provenance.says` rules.

The answer is {transport, provider, device, evidence}: netbench's
transport name (shm, tcp, ofi-tcp, ucx-tcp, ucx-rc-x, ofi-verbs, ...),
the library's own name of the component and device, and the line it came
from.  Words no rule knows leave the transport UNKNOWN, never a guess.
Pure: no ReFrame, no subprocess.
"""

import re

#: the transport of a launch whose library said nothing a rule knows
UNKNOWN = "unknown"

#: the longest evidence line kept in a record
EVIDENCE_CHARS = 300


class _Defaulting(dict):
    """Template values: a group the match left empty reads as ''."""

    def __missing__(self, key):
        return ""


def unknown_path():
    return {"transport": UNKNOWN, "provider": "", "device": "", "evidence": ""}


def line_at(text, position):
    """The whole line of `text` that holds `position`, stripped."""
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return text[start:end if end >= 0 else len(text)].strip()


def path_of(rule, match, text):
    """The path one rule's match names (see the module's docstring): the
    rule's `map` turns the library's words into netbench's transport name;
    provider and device keep the library's own words (`sm`, `sysv`)."""
    said = _Defaulting({k: v for k, v in match.groupdict().items() if v is not None})
    named = _Defaulting(said)
    for group, names in (rule.get("map") or {}).items():
        named[group] = names.get(said.get(group, ""), UNKNOWN)
    transport = rule["transport"].format_map(named)
    return {"transport": UNKNOWN if UNKNOWN in transport else transport,
            "provider": str(rule.get("provider", "")).format_map(said),
            "device": str(rule.get("device", "")).format_map(said),
            "evidence": line_at(text, match.start())[:EVIDENCE_CHARS]}


def library_path(text, rules, across_nodes=False):
    """The path the launch output `text` says its library took, by the
    family's `says` rules in order: the first rule that matches decides.
    Across nodes, words about ranks that share a node (`local`) are passed
    over: between nodes no shared memory can carry the messages; words
    that tell only between nodes (`remote`: an endpoint whose first lane is
    a network's) are read only there."""
    for rule in rules or []:
        if rule.get("local" if across_nodes else "remote"):
            continue
        match = re.search(rule["regex"], text, re.MULTILINE)
        if match:
            return path_of(rule, match, text)
    return unknown_path()

"""A fabric's tree of switches, from the site's own files: Slurm's
`topology.conf` (topology/tree) first, else a small netbench YAML file.

topology.conf, one switch per line (parameter names are case-insensitive,
`#` starts a comment; Slurm's hostlist expressions name the children)::

    SwitchName=leaf1 Nodes=node[01-04,07]
    SwitchName=spine Switches=leaf[1-3] LinkSpeed=100

The netbench file, for a site without one (`*.yaml` / `*.yml`)::

    switches:
      spine: {switches: "leaf[1-3]"}
      leaf1: {nodes: "node[01-04,07]"}

Refused, with one line naming the file, the line and the problem
(netbench.datafiles.DataError): a malformed hostlist, a node under two
leaves, a switch under two parents or below itself (a loop), a child
switch that no line defines, a node the cluster does not have (`known`),
an unknown parameter.  Pure Python: the judgement (netbench.fleet
.components) and the virtual cluster (`vcluster up --topology`) read it.
"""

import dataclasses
import re

from ..datafiles import DataError, load_yaml, read_bytes

#: the parameters of a topology/tree line (LinkSpeed is Slurm's, and unused)
KEYS = ("switchname", "switches", "nodes", "linkspeed")
NAME = re.compile(r"[A-Za-z0-9_.:-]+\Z")
#: hostlists larger than this are refused: a typo such as n[1-99999999]
#: would build a list of a hundred million names
MAX_NAMES = 1 << 20
#: the most digits of a number in a hostlist's brackets: a billion hosts'
#: worth, and a number Python turns into an int at once (a 5000-digit one
#: is refused before int() sees it)
MAX_DIGITS = 9
#: a number in brackets: ASCII digits only, as Slurm reads them (Python's
#: int() and \d also take Arabic-Indic and other Unicode digits)
RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?\Z", re.ASCII)


@dataclasses.dataclass(frozen=True)
class Topology:
    """Switches by name: each with its parent (None at the top), its child
    switches and the nodes on it (leaves hold nodes); `source`: the file."""
    parent: dict            # switch -> parent switch or None
    children: dict          # switch -> [child switches]
    nodes: dict             # switch -> [nodes on it]
    source: str = ""

    @property
    def switches(self):
        return list(self.parent)

    @property
    def roots(self):
        return [s for s, p in self.parent.items() if p is None]

    def leaf_of(self):
        """{node: the switch it hangs on}."""
        return {node: switch for switch, nodes in self.nodes.items() for node in nodes}

    def all_nodes(self):
        return [node for switch in self.ordered_switches() for node in self.nodes[switch]]

    def ordered_switches(self):
        """Every switch, depth first from the top, children in file order:
        the order the heat map's rows follow, so a leaf is a block."""
        out = []

        def visit(switch):
            out.append(switch)
            for child in self.children[switch]:
                visit(child)
        for root in self.roots:
            visit(root)
        return out

    def path_up(self, switch):
        """`switch`, its parent, ... up to its top switch."""
        path = []
        while switch is not None:
            path.append(switch)
            switch = self.parent[switch]
        return path

    def below(self):
        """{switch: the set of nodes in its subtree}."""
        out = {}
        for switch in reversed(self.ordered_switches()):
            found = set(self.nodes[switch])
            for child in self.children[switch]:
                found |= out[child]
            out[switch] = found
        return out


class _Problem(Exception):
    """A problem of one line of a topology file (its text)."""


# -- hostlists ------------------------------------------------------------------

def shown(text, most=60):
    """`text` quoted for an error line, cut short: a hostlist can be long."""
    quoted = repr(text)
    return quoted if len(quoted) <= most else quoted[:most - 4] + "...'"


def expand_hostlist(text):
    """Slurm's hostlist expression as names, in order: `tux[0-3,12]`,
    `a,b`, `rack[1-2]-n[01-04]` (zero padding kept); _Problem if malformed
    or naming more than MAX_NAMES hosts, counted from its brackets before
    any name is built."""
    items = split_top_level(text)
    if sum(count_names(item) for item in items) > MAX_NAMES:
        raise _Problem(f"hostlist {shown(text)} names more than {MAX_NAMES} hosts")
    return [name for item in items for name in expand_one(item)]


def count_names(item):
    """How many names one item of a hostlist expands to: the product of
    its bracketed lists' sizes, each range checked (expand_ranges' rules)."""
    count = 1
    for ranges in re.findall(r"\[([^\[\]]*)\]", item):
        count *= sum(high - low + 1 for low, high, _ in parsed_ranges(item, ranges))
    return count


def parsed_ranges(item, ranges):
    """[(low, high, zero-padded width)] of a bracketed list `01-04,07`;
    _Problem on anything but ASCII numbers of at most MAX_DIGITS digits,
    or a range that runs backwards."""
    out = []
    for part in ranges.split(","):
        match = RANGE.match(part)
        if not match:
            raise _Problem(f"hostlist item {shown(item)}: {shown(part)} is not a number or a range "
                           f"(ASCII digits)")
        low, high = match.group(1), match.group(2) or match.group(1)
        if max(len(low), len(high)) > MAX_DIGITS:
            raise _Problem(f"hostlist item {shown(item)}: a number of more than {MAX_DIGITS} "
                           f"digits")
        if int(high) < int(low):
            raise _Problem(f"hostlist item {shown(item)}: range {shown(part)} runs backwards")
        out.append((int(low), int(high), len(low) if low.startswith("0") else 0))
    return out


def split_top_level(text):
    """The comma-separated items of a hostlist, commas inside [] kept."""
    items, depth, current = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise _Problem(f"hostlist {shown(text)}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise _Problem(f"hostlist {shown(text)}: ']' without '['")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    if depth:
        raise _Problem(f"hostlist {shown(text)}: '[' without ']'")
    items.append(current)
    if any(not item for item in items):
        raise _Problem(f"hostlist {shown(text)}: an empty name")
    return items


def expand_one(item):
    """One item of a hostlist: a plain name, or a prefix, a bracketed range
    list and the rest (itself expanded)."""
    match = re.match(r"([^\[\]]*)\[([^\[\]]*)\](.*)\Z", item)
    if not match:
        if not NAME.match(item):
            raise _Problem(f"hostlist item {shown(item)}: not a host name")
        return [item]
    prefix, ranges, rest = match.groups()
    tails = expand_one(rest) if rest else [""]
    return [f"{prefix}{number}{tail}" for number in expand_ranges(item, ranges)
            for tail in tails]


def expand_ranges(item, ranges):
    """`01-04,07` as ['01', '02', '03', '04', '07']."""
    return [str(n).zfill(width) for low, high, width in parsed_ranges(item, ranges)
            for n in range(low, high + 1)]


# -- the files ----------------------------------------------------------------------

def load_topology(path, known=None):
    """The Topology of `path` (topology.conf, or a netbench YAML file by its
    suffix); `known`: the cluster's nodes, when it has a list to check
    against.  DataError naming the file and line otherwise."""
    path = str(path)
    if path.endswith((".yaml", ".yml")):
        entries = yaml_entries(path)
    else:
        entries = conf_entries(path)
    return build(path, entries, known)


def partition_topology(path, hosts):
    """The Topology of a partition's file (`extras.topology`) for a sweep of
    `hosts`, its nodes: a file that puts one of them under no switch is
    refused (DataError, one line), as a judgement that left such a node
    out of every switch would name the wrong component.  The file may name
    more nodes than the partition has (Slurm's covers the whole cluster)."""
    topology = load_topology(path)
    leaf_of = topology.leaf_of()
    missing = sorted(set(hosts) - set(leaf_of))
    if missing:
        raise DataError(path, None, f"node {missing[0]} of the partition is under no switch "
                                    f"({len(missing)} of its {len(set(hosts))} nodes are not "
                                    f"in the file: not this partition's topology)")
    return topology


def conf_entries(path):
    """[(line number, switch, [child switches], [nodes])] of topology.conf."""
    try:
        text = read_bytes(path, "topology").decode()
    except UnicodeDecodeError as err:
        raise DataError(path, None, f"not UTF-8 text ({err.reason})") from err
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            entries.append((number, *conf_line(line)))
        except _Problem as err:
            raise DataError(path, f"line {number}", str(err)) from None
    if not entries:
        raise DataError(path, None, "no SwitchName line: not a topology/tree topology.conf")
    return entries


def conf_line(line):
    """(switch, [child switches], [nodes]) of one topology.conf line."""
    fields = {}
    for token in line.split():
        key, eq, value = token.partition("=")
        if not eq or not value:
            raise _Problem(f"{shown(token)}: expected Key=Value")
        if key.lower() not in KEYS:
            raise _Problem(f"unknown parameter {shown(key)} (topology/tree has "
                           f"SwitchName, Switches, Nodes, LinkSpeed)")
        if key.lower() in fields:
            raise _Problem(f"{key} given twice")
        fields[key.lower()] = value
    if "switchname" not in fields:
        raise _Problem("no SwitchName=")
    switch = fields["switchname"]
    if not NAME.match(switch):
        raise _Problem(f"SwitchName {shown(switch)}: not a switch name")
    return (switch, expand_hostlist(fields.get("switches", "")) if "switches" in fields else [],
            expand_hostlist(fields["nodes"]) if "nodes" in fields else [])


def yaml_entries(path):
    """The same entries from netbench's YAML file; the "line" a problem
    names is the switch's key."""
    data = load_yaml(path, kind="topology")
    switches = data.get("switches")
    if not isinstance(switches, dict) or not switches:
        raise DataError(path, "switches", "expected a mapping of switch names")
    entries = []
    for switch, spec in switches.items():
        where = f"switches.{switch}"
        if not isinstance(spec, dict) or set(spec) - {"switches", "nodes"}:
            raise DataError(path, where, "expected a mapping with `switches` and/or `nodes`")
        try:
            if not NAME.match(str(switch)):
                raise _Problem(f"{shown(switch)}: not a switch name")
            entries.append((where, str(switch), *(
                expand_hostlist(spec[key]) if isinstance(spec.get(key), str)
                else _list_of_names(spec.get(key)) for key in ("switches", "nodes"))))
        except _Problem as err:
            raise DataError(path, where, str(err)) from None
    return entries


def _list_of_names(value):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Problem("expected a hostlist or a list of names")
    return [name for v in value for name in expand_hostlist(v)]


def where_of(line):
    return line if isinstance(line, str) else f"line {line}"


def build(path, entries, known=None):
    """The Topology of parsed entries, checked whole."""
    parent, children, nodes, defined = {}, {}, {}, {}
    leaf_of = {}
    for line, switch, child_switches, node_names in entries:
        where = where_of(line)
        if switch in defined:
            raise DataError(path, where, f"switch {switch} is defined again (first at "
                                         f"{where_of(defined[switch])})")
        defined[switch] = line
        children[switch], nodes[switch] = child_switches, node_names
        for node in node_names:
            if node in leaf_of:
                raise DataError(path, where, f"node {node} is under two leaves: "
                                             f"{leaf_of[node][0]} and {switch}")
            leaf_of[node] = (switch, line)
            if known is not None and node not in known:
                raise DataError(path, where, f"unknown node {node}: the cluster's nodes are "
                                             f"{short_list(sorted(known))}")
    for switch, line in defined.items():
        for child in children[switch]:
            where = where_of(line)
            if child not in defined:
                raise DataError(path, where, f"switch {child} under {switch} is defined by "
                                             f"no line")
            if child == switch:
                raise DataError(path, where, f"switch loop: {switch} is under itself")
            if child in parent:
                raise DataError(path, where, f"switch {child} has two parents: "
                                             f"{parent[child]} and {switch}")
            parent[child] = switch
    for switch in defined:
        parent.setdefault(switch, None)
    check_loops(path, parent, defined)
    if known is not None:
        missing = sorted(set(known) - set(leaf_of))
        if missing:
            raise DataError(path, None, f"node {missing[0]} of the cluster is under no "
                                        f"switch")
    ordered = {s: parent[s] for s in defined}
    return Topology(ordered, children, nodes, path)


def check_loops(path, parent, defined):
    """Every switch reaches a top switch (one without a parent)."""
    for switch in defined:
        seen, current = [], switch
        while current is not None:
            if current in seen:
                loop = " -> ".join(seen[seen.index(current):] + [current])
                raise DataError(path, where_of(defined[current]), f"switch loop: {loop}")
            seen.append(current)
            current = parent[current]


def short_list(names, most=6):
    shown = ", ".join(names[:most])
    return shown + (f", ... ({len(names)} in all)" if len(names) > most else "")

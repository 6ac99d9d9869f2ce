"""The fault named as the component: from a sweep's bad pairs and the
fabric's tree of switches (netbench.fleet.topology), the fewest components
that explain them.

Candidates, each with the pairs that cross it:

- a node (its NIC or cable): every pair with it, per direction (what it
  sends, what it receives);
- a switch link, the link between a switch and its parent: the pairs with
  one end under the switch and the other outside, per direction
  (``egress``: leaving the switch's subtree, what `vcluster fault
  --switch-link S --direction out` slows; ``ingress``: entering it); the
  pairs under the switch do not cross it;
- a switch: every pair whose path runs through it (for a leaf, every pair
  with one of its nodes; above, the pairs between its child subtrees).

A candidate fits a direction when its bad pairs there are more than
`node_majority` of the pairs measured there, and at least
`node_min_bad_pairs` (thresholds.yaml `sweep:`, the rule a node is named
by without a topology).  Greedy set cover, one component at a time: the
fitting candidate that explains the most bad pairs not yet explained, less
the healthy pairs it would claim (so a leaf's uplink, whose every crossing
pair is bad, beats the spine above it, whose pairs between the other
leaves are fine, and beats each of its nodes, bad with only the partners
across it); ties go to the smaller component (node, switch link, switch).
It stops when no candidate explains more bad pairs than it claims healthy
ones.  Bad pairs no component explains are suspects of kind ``pair``, as
without a topology.

Latency is a property of the unordered pair: its candidates have one
direction, ``both``.  Counts are numpy bincounts over the pairs and a
leaf-by-leaf matrix, so a full sweep of 1024 nodes (a million pairs per
metric) is judged in seconds.
"""

import dataclasses

import numpy as np

from ..results.suspects import LATENCY
from .attribution import make_suspect, pair_direction
from .figures import distinct, family, undirected

#: the order ties are broken in: the smaller component first
KIND_ORDER = {"node": 0, "switch-link": 1, "switch": 2}
OUT, IN = "egress", "ingress"


@dataclasses.dataclass(frozen=True)
class Fabric:
    """The topology over the judged hosts, as index arrays: leaf[host] (the
    leaf switch's index among `leaves`, or len(leaves) for a host the
    topology does not name), and per switch the leaves under it and which
    child subtree each leaf is in (-1: not under it; for a leaf's own
    nodes, -2: nodes are distinct children)."""
    hosts: list
    switches: list
    parent: dict
    leaf: np.ndarray            # host -> leaf column
    under: np.ndarray           # switch x (leaves + 1): the leaf is under it
    child: np.ndarray           # switch x (leaves + 1): child subtree, -1, -2


def fabric_of(topology, hosts):
    """The Fabric of `topology` (netbench.fleet.topology.Topology) for the
    judged `hosts`."""
    switches = topology.ordered_switches()
    leaves = [s for s in switches if topology.nodes[s]]
    column = {s: i for i, s in enumerate(leaves)}
    leaf_of = topology.leaf_of()
    leaf = np.array([column[leaf_of[h]] if h in leaf_of else len(leaves) for h in hosts],
                    dtype=np.int64)
    under = np.zeros((len(switches), len(leaves) + 1), dtype=bool)
    child = np.full((len(switches), len(leaves) + 1), -1, dtype=np.int64)
    for s, switch in enumerate(switches):
        kids = {c: k for k, c in enumerate(topology.children[switch])}
        for lf in leaves:
            path = topology.path_up(lf)
            if switch in path:
                under[s, column[lf]] = True
                # a leaf's own nodes are each a child of their own
                child[s, column[lf]] = -2 if lf == switch else kids[path[path.index(switch) - 1]]
    return Fabric(list(hosts), switches, dict(topology.parent), leaf, under, child)


# -- counting the pairs each candidate explains -----------------------------------

def leaf_matrix(fabric, src, dst):
    """Pairs counted from leaf column to leaf column, hosts the topology
    does not name left out (the last row and column are zero)."""
    size = fabric.under.shape[1]
    matrix = np.bincount(fabric.leaf[src] * size + fabric.leaf[dst],
                         minlength=size * size).reshape(size, size).astype(float)
    matrix[-1, :] = 0
    matrix[:, -1] = 0
    return matrix


def counts(fabric, src, dst):
    """{"node": (out[n], in[n]), "switch-link": (out[s], in[s]),
    "switch": (through[s],)}: how many of the directed pairs (src[i],
    dst[i]) each candidate explains."""
    n = len(fabric.hosts)
    matrix = leaf_matrix(fabric, src, dst)
    inside = fabric.under.astype(float)
    outside = 1.0 - inside
    outside[:, -1] = 0
    link_out = np.einsum("sa,ab,sb->s", inside, matrix, outside)
    link_in = np.einsum("sa,ab,sb->s", outside, matrix, inside)
    through = np.empty(len(fabric.switches))
    for s in range(len(fabric.switches)):
        mask = fabric.under[s]
        ends = matrix[mask, :].sum() + matrix[:, mask].sum() - matrix[np.ix_(mask, mask)].sum()
        same = 0.0
        for c in set(fabric.child[s][fabric.child[s] >= 0].tolist()):
            sub = fabric.child[s] == c
            same += matrix[np.ix_(sub, sub)].sum()
        through[s] = ends - same
    return {"node": (np.bincount(src, minlength=n).astype(float),
                     np.bincount(dst, minlength=n).astype(float)),
            "switch-link": (link_out, link_in), "switch": (through,)}


def explained_by(fabric, kind, index, directions, src, dst):
    """Boolean mask: which pairs (src[i], dst[i]) the candidate explains in
    `directions` (a subset of (OUT, IN); a switch has one, "both")."""
    if kind == "node":
        mask = np.zeros(len(src), dtype=bool)
        if OUT in directions:
            mask |= src == index
        if IN in directions:
            mask |= dst == index
        return mask
    known = (fabric.leaf[src] < fabric.under.shape[1] - 1) & \
        (fabric.leaf[dst] < fabric.under.shape[1] - 1)
    in_src, in_dst = fabric.under[index][fabric.leaf[src]], fabric.under[index][fabric.leaf[dst]]
    if kind == "switch-link":
        mask = np.zeros(len(src), dtype=bool)
        if OUT in directions:
            mask |= in_src & ~in_dst
        if IN in directions:
            mask |= in_dst & ~in_src
        return mask & known
    child_src, child_dst = fabric.child[index][fabric.leaf[src]], \
        fabric.child[index][fabric.leaf[dst]]
    same_child = (child_src == child_dst) & (child_src >= 0)
    return (in_src | in_dst) & ~same_child & known


# -- the pairs one component carries --------------------------------------------------

def shared_paths(topology, figures):
    """[(component, mask of `figures`' entries that run through it)] for
    every switch link and switch of `topology` that some of the measured
    pairs run through (fleet.figures.fleet_stat leaves such a component's
    pairs out of the median it holds the others to; fleet.judge names
    those that leave too few others)."""
    fabric = fabric_of(topology, figures.hosts)
    out = []
    for index, switch in enumerate(fabric.switches):
        if not fabric.under[index][:-1].any():
            continue
        kinds = (("switch-link", (OUT, IN)),) if fabric.parent[switch] is not None else ()
        for kind, directions in kinds + (("switch", ("both",)),):
            mask = explained_by(fabric, kind, index, directions, figures.src, figures.dst)
            if mask.any():
                names = component_name(fabric, Candidate(kind, index, directions, 0.0))[1]
                out.append((names, mask))
    return out


# -- the cover ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Candidate:
    kind: str
    index: int
    directions: tuple          # the directions it fits: (OUT,), (IN,), (OUT, IN), ("both",)
    healthy: float             # measured pairs in those directions that are not bad

    def order(self, fabric):
        name = fabric.hosts[self.index] if self.kind == "node" else fabric.switches[self.index]
        return KIND_ORDER[self.kind], name


def fits(bad, measured, rule):
    return bad >= rule.node_min_bad_pairs and bad > rule.node_majority * measured


def candidates(fabric, measured, bad, rule, undirected_family, cleared=()):
    """Every candidate that fits at least one direction; no node of
    `cleared` (fine with a healthy partner: fleet.confirm)."""
    found = []
    for kind in ("node", "switch-link", "switch"):
        per_direction = list(zip(measured[kind], bad[kind]))
        if kind != "switch" and undirected_family:
            per_direction = [(per_direction[0][0] + per_direction[1][0],
                              per_direction[0][1] + per_direction[1][1])]
        labels = (("both",) if kind == "switch" or undirected_family else (OUT, IN))
        for index in range(len(per_direction[0][0])):
            if kind == "switch-link" and fabric.parent[fabric.switches[index]] is None:
                continue                         # a top switch has no link up
            if kind == "switch" and not fabric.under[index][:-1].any():
                continue
            if kind == "node" and fabric.hosts[index] in cleared:
                continue
            fitting = [(label, m[index], b[index])
                       for label, (m, b) in zip(labels, per_direction)
                       if fits(b[index], m[index], rule)]
            if fitting:
                directions = tuple(label for label, _, _ in fitting)
                if directions == ("both",) and kind != "switch":
                    directions = (OUT, IN)
                found.append(Candidate(kind, index, directions,
                                       float(sum(m - b for _, m, b in fitting))))
    return found


def cover(fabric, measured_src, measured_dst, bad_src, bad_dst, rule, undirected_family,
          cleared=()):
    """[(Candidate, mask of the bad pairs it explains, [the candidates the
    pairs cannot tell from it])] chosen greedily, and the mask of the bad
    pairs none explains."""
    measured = counts(fabric, measured_src, measured_dst)
    bad = counts(fabric, bad_src, bad_dst)
    pool = candidates(fabric, measured, bad, rule, undirected_family, cleared)
    left = np.ones(len(bad_src), dtype=bool)
    chosen = []
    while pool and left.any():
        best, best_mask, best_key = None, None, None
        for candidate in pool:
            mask = explained_by(fabric, candidate.kind, candidate.index, candidate.directions,
                                bad_src, bad_dst) & left
            gain = int(mask.sum()) - candidate.healthy
            key = (-gain, candidate.order(fabric))
            if mask.any() and gain > 0 and (best_key is None or key < best_key):
                best, best_mask, best_key = candidate, mask, key
        if best is None:
            break
        twins = alike(fabric, best, pool, measured_src, measured_dst)
        chosen.append((best, best_mask, twins))
        left &= ~best_mask
        pool = [c for c in pool if c is not best and c not in twins]
    return chosen, left


def alike(fabric, best, pool, measured_src, measured_dst):
    """The switch links and switches of `pool` that carry exactly the
    measured pairs `best` does, in the directions each fits: no sweep can
    tell them apart (two leaves under one spine: every pair through one
    uplink runs through the other and the spine).  A node is never one:
    its pairs are its own."""
    if best.kind == "node":
        return []
    carried = explained_by(fabric, best.kind, best.index, best.directions,
                           measured_src, measured_dst)
    return [c for c in pool if c is not best and c.kind != "node"
            and np.array_equal(explained_by(fabric, c.kind, c.index, c.directions,
                                            measured_src, measured_dst), carried)]


# -- suspects --------------------------------------------------------------------------

def component_name(fabric, candidate):
    """(names, component text) of a chosen candidate."""
    if candidate.kind == "node":
        host = fabric.hosts[candidate.index]
        return (host,), host
    switch = fabric.switches[candidate.index]
    if candidate.kind == "switch":
        return (switch,), switch
    parent = fabric.parent[switch]
    return (switch, parent), f"{switch}<->{parent}"


def path_suspect(fabric, alike_candidates, evidence, stats, reference_of):
    """One suspect for switch links and switches the sweep cannot tell
    apart (alike): of kind ``switch-link`` when a link is among them,
    named by the two switches at the ends of the path they make (leaf1,
    leaf2), its component that path (`leaf1<->spine<->leaf2`), its
    direction from one end to the other where only one is bad, and its
    reason which components the pairs cannot separate."""
    names = sorted(component_name(fabric, c)[1] for c in alike_candidates)
    ends = path_ends(fabric, alike_candidates)
    why = (f"every pair through one of {', '.join(names)} runs through the others: "
           f"the sweep cannot tell which is slow")
    if ends is None:
        first = alike_candidates[0]
        suspect = make_suspect(first.kind, component_name(fabric, first)[0], "both",
                               evidence, stats, reference_of, " | ".join(names))
        return dataclasses.replace(suspect, reason=why)
    a, b = ends
    path = fabric_path(fabric, a, b)
    kind = "switch-link" if any(c.kind == "switch-link" for c in alike_candidates) \
        else "switch"
    suspect = make_suspect(kind, (a, b), path_direction(fabric, a, b, evidence), evidence,
                           stats, reference_of, "<->".join(path))
    return dataclasses.replace(suspect, reason=why)


def path_ends(fabric, alike_candidates):
    """The two switches at the ends of the path the alike switch links
    make (each the end of one link only), or None when they make none."""
    seen = {}
    for c in alike_candidates:
        if c.kind == "switch-link":
            switch = fabric.switches[c.index]
            for end in (switch, fabric.parent[switch]):
                seen[end] = seen.get(end, 0) + 1
    ends = sorted(s for s, count in seen.items() if count == 1)
    return tuple(ends) if len(ends) == 2 else None


def fabric_path(fabric, a, b):
    """The switches from `a` up to the lowest switch above both, and down
    to `b`."""
    up_a, up_b = [a], [b]
    while up_a[-1] is not None:
        up_a.append(fabric.parent[up_a[-1]])
    while up_b[-1] is not None:
        up_b.append(fabric.parent[up_b[-1]])
    top = next(s for s in up_a if s in up_b)
    return up_a[:up_a.index(top) + 1] + list(reversed(up_b[:up_b.index(top)]))


def path_direction(fabric, a, b, evidence):
    """`a->b` when every bad pair runs from a's side of the path to b's,
    `b->a` the other way, else both."""
    index = {h: i for i, h in enumerate(fabric.hosts)}
    column = {s: k for k, s in enumerate(fabric.switches)}

    def on_side(switch, host):
        return bool(fabric.under[column[switch]][fabric.leaf[index[host]]])
    if any(e.metric == LATENCY for e in evidence):
        return "both"
    if all(on_side(a, e.src) and on_side(b, e.dst) for e in evidence):
        return f"{a}->{b}"
    if all(on_side(b, e.src) and on_side(a, e.dst) for e in evidence):
        return f"{b}->{a}"
    return "both"


def direction_of(candidate):
    if candidate.directions in (("both",), (OUT, IN)):
        return "both"
    return candidate.directions[0]


def attribute(bad, figures_by_metric, stats, rule, reference_of, topology, cleared=()):
    """Suspects per metric family, as attribution.attribute's, with the
    components the topology offers: the fewest nodes, switch links and
    switches that explain the bad pairs, then the bad pairs left as
    suspects of kind ``pair``.  `figures_by_metric`: judge's
    {metric: Figures}, whose pairs were measured; `cleared`: hosts never
    named as nodes (fleet.confirm)."""
    suspects = []
    for fam in sorted({family(e.metric) for e in bad}):
        in_family = [e for e in bad if family(e.metric) == fam]
        metrics = [m for m in figures_by_metric if family(m) == fam]
        hosts = figures_by_metric[metrics[0]].hosts
        index = {h: i for i, h in enumerate(hosts)}
        fabric = fabric_of(topology, hosts)
        n = len(hosts)
        measured = distinct(np.concatenate([
            figures_by_metric[m].src * n + figures_by_metric[m].dst for m in metrics]))
        pair_codes = np.array([index[e.src] * n + index[e.dst] for e in in_family],
                              dtype=np.int64)
        undirected_family = fam == LATENCY
        if undirected_family:
            measured, pair_codes = distinct(undirected(measured, n)), undirected(pair_codes, n)
        bad_codes, which = np.unique(pair_codes, return_inverse=True)
        chosen, left = cover(fabric, measured // n, measured % n, bad_codes // n,
                             bad_codes % n, rule, undirected_family, cleared)
        for candidate, mask, twins in chosen:
            evidence = [e for e, i in zip(in_family, which) if mask[i]]
            if twins:
                suspects.append(path_suspect(fabric, [candidate] + twins, evidence, stats,
                                             reference_of))
                continue
            names, component = component_name(fabric, candidate)
            suspects.append(make_suspect(candidate.kind, names, direction_of(candidate),
                                         evidence, stats, reference_of, component))
        by_pair = {}
        for e, i in zip(in_family, which):
            if left[i]:
                by_pair.setdefault(tuple(sorted((e.src, e.dst))), []).append(e)
        for (a, b), evidence in sorted(by_pair.items()):
            suspects.append(make_suspect("pair", [a, b], pair_direction(a, b, evidence),
                                         evidence, stats, reference_of))
    return suspects

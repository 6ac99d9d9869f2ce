"""From a sweep's bad pairs to its suspects: a node bad with a majority
of its partners, else the pair (netbench.fleet.judge states the rule);
the pairs of a partial sweep; a suspect's direction and headline metric.
netbench.fleet.components names switch links and switches from the same
pairs, netbench.fleet.confirm clears nodes with their healthy partners."""

import statistics

import numpy as np

from ..results.suspects import LATENCY, Suspect
from .figures import distinct, family, metric_size, undirected


def partners_with_bad_pairs(bad):
    """{host: the partners it has bad pairs with}, in one pass over `bad`."""
    partners = {}
    for e in bad:
        partners.setdefault(e.src, set()).add(e.dst)
        partners.setdefault(e.dst, set()).add(e.src)
    return partners


def measured_partners(codes, hosts):
    """{host: how many hosts it was measured with}: every other host in a
    full sweep, its K partners in a partial one (`partner_pairs`).
    `codes`: pair_codes of the measurements."""
    n = len(hosts)
    codes = distinct(undirected(codes, n))
    counts = np.bincount(codes // n, minlength=n) + np.bincount(codes % n, minlength=n)
    return dict(zip(hosts, counts.tolist()))


def suspect_nodes(bad, hosts, rule, partners=None, cleared=()):
    """Nodes whose pairs are bad with a majority of their (measured)
    partners (`partners`: measured_partners), in at least
    node_min_bad_pairs pairs.  A bad cable touches one partner of each of
    its ends; a bad node touches all of its partners, and with 3 nodes
    that is 2 of 2 for it against 1 of 2 for the others."""
    bad_partners = partners_with_bad_pairs(bad)
    out = []
    for host in hosts:
        if host in cleared:
            continue                # fine with a healthy partner: fleet.confirm
        count = len(bad_partners.get(host, ()))
        measured = partners[host] if partners and host in partners else len(hosts) - 1
        if count >= rule.node_min_bad_pairs and count > rule.node_majority * measured:
            out.append(host)
    return out


def partner_pairs(n, k):
    """Pairs (a, b), a < b, of a partial sweep of n nodes in which each node
    meets about k partners: node i with i+1 .. i+ceil(k/2) (mod n), a
    circulant graph, so the pairs cover the fleet connected, every node has
    between k and k+1 partners, and n*k/2 pairs replace n(n-1)/2."""
    reach = min(-(-k // 2), n // 2)
    return sorted({tuple(sorted((i, (i + d) % n))) for i in range(n)
                   for d in range(1, reach + 1) if (i + d) % n != i})


def node_direction(host, evidence):
    if any(e.metric == LATENCY for e in evidence):
        return "both"
    outgoing = any(e.src == host for e in evidence)
    incoming = any(e.dst == host for e in evidence)
    return "both" if outgoing and incoming else ("egress" if outgoing else "ingress")


def pair_direction(a, b, evidence):
    if any(e.metric == LATENCY for e in evidence):
        return "both"
    directions = {(e.src, e.dst) for e in evidence}
    if directions == {(a, b)}:
        return f"{a}->{b}"
    if directions == {(b, a)}:
        return f"{b}->{a}"
    return "both"


def headline_metric(evidence):
    """The metric a suspect is named on: its family's largest size judged bad
    (latency has one)."""
    metrics = {e.metric for e in evidence}
    return max(metrics, key=lambda m: metric_size(m) or 0)


def make_suspect(kind, names, direction, evidence, stats, reference_of, component=None):
    """`component`: what to replace (default: the node, or the pair's link)."""
    metric = headline_metric(evidence)
    value = statistics.median(e.value for e in evidence if e.metric == metric)
    return Suspect(kind, tuple(names), metric, value, stats[metric].fleet_median,
                   reference_of(metric), direction, tuple(evidence),
                   component or "<->".join(names))


def attribute(bad, hosts, stats, rule, reference_of, partners=None, cleared=()):
    """Suspects per metric family: nodes first (none of `cleared`), then
    the bad pairs no suspect node explains."""
    suspects = []
    for fam in sorted({family(e.metric) for e in bad}):
        in_family = [e for e in bad if family(e.metric) == fam]
        nodes = suspect_nodes(in_family, hosts, rule, partners, cleared)
        by_node, by_pair = evidence_by_suspect(in_family, nodes)
        for host in nodes:
            suspects.append(make_suspect("node", [host], node_direction(host, by_node[host]),
                                         by_node[host], stats, reference_of))
        for (a, b), evidence in sorted(by_pair.items()):
            suspects.append(make_suspect("pair", [a, b], pair_direction(a, b, evidence),
                                         evidence, stats, reference_of))
    return suspects


def evidence_by_suspect(bad, nodes):
    """({suspect node: its bad pairs}, {(a, b) sorted: the bad pairs of a
    and b that no suspect node explains}), in one pass over `bad`."""
    by_node, by_pair = {host: [] for host in nodes}, {}
    for e in bad:
        ends = [host for host in dict.fromkeys((e.src, e.dst)) if host in by_node]
        for host in ends:
            by_node[host].append(e)
        if not ends:
            by_pair.setdefault(tuple(sorted((e.src, e.dst))), []).append(e)
    return by_node, by_pair

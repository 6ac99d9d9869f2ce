"""Confirm before blame (issue #36): each suspect measured again against
partners the sweep found healthy, in the same job, and judged by them.

Which hosts are suspects: the ends of the pairs still undecided (outside
the band) that no suspect node explains, and the nodes bad with a majority
of their partners (attribution.suspect_nodes, the rule a node is named by).  A
slow node makes every pair it is in undecided, so "in no undecided pair"
would leave no healthy host at all; its partners are healthy, it is not.

The re-measure step (fleet.remeasure) adds, for every end of an undecided
pair (hosts_to_confirm: but the partners of a slow node that met every
healthy host already), pairs with `confirm_partners` healthy hosts
(thresholds.yaml `sweep:`), preferring, in order: a partner under another
leaf switch than the host's (with a topology: a host fine across leaves
clears its NIC and its leaf's uplink at once, so a node fault is told from
a switch-link fault), a partner in no undecided pair at all, a partner it
has no undecided pair with (fresh evidence; a slow node has none, and its
undecided pairs with healthy hosts are its confirmation), a pair chosen
already for the partner, a pair in a tournament round the pass runs
already (the benchmark measures a `-L` list in the tournament's rounds,
each round's pairs disjoint and at once: a pair in a round the pass
already runs costs no round of its own), the partner with the fewest
confirmation pairs so far, then its name.

The judgement (judge.judge with `remeasured`): a node is named only when
it is also bad with a majority (`node_majority`) of the healthy partners
measured again, those it met to be confirmed when it met any; a node
fine with them is no node fault, and its bad pairs are named as what else
explains them (pairs, a switch link).  Each suspect carries its confirmation: the
figures of its hosts against their healthy partners, and a code
(results.suspects CONFIRMATION_CODES) the report puts into words.
"""

import dataclasses

import numpy as np

from .attribution import suspect_nodes
from ..results.suspects import (ENDS_FINE, END_SLOW, NO_HEALTHY_PARTNER, SLOW_WITH_HEALTHY,
                                UNREACHABLE, Evidence)


class _Pair:
    """What attribution.suspect_nodes reads of a bad pair."""

    def __init__(self, src, dst):
        self.src, self.dst = src, dst


def bad_nodes(pairs, hosts, rule):
    """The hosts bad with a majority of their partners in the (src, dst)
    `pairs` outside the band (attribution.suspect_nodes, the rule a node is
    named by)."""
    undirected = {tuple(sorted(p)) for p in pairs}
    return set(suspect_nodes([_Pair(a, b) for a, b in undirected], hosts, rule))


def suspect_hosts(pairs, hosts, rule, nodes=None):
    """The hosts the (src, dst) `pairs` outside the band point at: the nodes
    bad with a majority of their partners (`nodes`, when known), and both
    ends of every pair no such node explains."""
    nodes = bad_nodes(pairs, hosts, rule) if nodes is None else nodes
    undirected = {tuple(sorted(p)) for p in pairs}
    ends = {h for a, b in undirected if not {a, b} & nodes for h in (a, b)}
    return nodes | ends


def healthy_hosts(pairs, hosts, rule, nodes=None):
    """The hosts the sweep found healthy: every host no pair outside the
    band points at."""
    return sorted(set(hosts) - suspect_hosts(pairs, hosts, rule, nodes))


def hosts_to_confirm(suspect_pairs, hosts, healthy, rule, nodes=None):
    """The ends of the (sorted) `suspect_pairs` to measure against healthy
    partners: every end, but the other ends of a suspect node that has no
    healthy partner outside its suspect pairs (a slow node in a full
    sweep): its confirmation is those pairs measured again, nothing can
    clear it into links, so its partners' own confirmations would only
    lengthen the pass."""
    nodes = bad_nodes(suspect_pairs, hosts, rule) if nodes is None else nodes
    partners = {}
    for a, b in suspect_pairs:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    fixed = {x for x in nodes if not set(healthy) - partners[x] - {x}}
    return {h for a, b in suspect_pairs for h in (a, b)
            if h in nodes or not partners[h] <= fixed}


def round_of(a, b, n):
    """The tournament round (results.sweep.round_robin, netbench.c's) in
    which ranks a and b of n meet: the circle method's x + y = 2r, and the
    fixed rank m-1 meets rank r in round r."""
    m = n + 1 if n % 2 else n
    a, b = sorted((a, b))
    if b == m - 1:
        return a
    return (a + b) * (m // 2) % (m - 1)


def confirmation_pairs(undecided, hosts, rule, k, rank_of, leaf_of=None):
    """[(a, b)] sorted, each pair once: for every end of an `undecided`
    (src, dst) pair that hosts_to_confirm keeps, `k` partners the sweep found healthy (fewer when
    fewer are), chosen as the module says.  `rank_of`: {host: rank};
    `leaf_of`: {host: leaf switch}, or None without a topology."""
    if k <= 0 or not undecided:
        return []
    suspect_pairs = {tuple(sorted(p)) for p in undecided}
    # the rule a node is named by, once: the healthy hosts and the hosts to
    # confirm both ask it
    nodes = bad_nodes(suspect_pairs, hosts, rule)
    healthy = healthy_hosts(suspect_pairs, hosts, rule, nodes)
    n = len(rank_of)
    rounds = {round_of(rank_of[a], rank_of[b], n) for a, b in suspect_pairs}
    load = dict.fromkeys(healthy, 0)
    leaf = leaf_of or {}
    chosen = set()
    ends = {h for pair in suspect_pairs for h in pair}
    for host in sorted(hosts_to_confirm(suspect_pairs, hosts, healthy, rule, nodes)):
        def preference(partner):
            pair = tuple(sorted((host, partner)))
            return (leaf_of is not None and leaf.get(partner) == leaf.get(host),
                    partner in ends, pair in suspect_pairs, pair not in chosen,
                    round_of(rank_of[host], rank_of[partner], n) not in rounds,
                    load[partner], partner)
        for partner in sorted((p for p in healthy if p != host), key=preference)[:k]:
            chosen.add(tuple(sorted((host, partner))))
            rounds.add(round_of(rank_of[host], rank_of[partner], n))
            load[partner] += 1
    return sorted(chosen)


# -- the judgement's side -----------------------------------------------------

def partner_figures(host, partners, metric, direction, figures, bound):
    """Evidence of `host` against each partner in `metric` (figures.Figures),
    in the directions the suspect was named in (a node's egress: what it
    sends; ingress: what it receives; latency and both: either)."""
    index = {h: i for i, h in enumerate(figures.hosts)}
    if host not in index:
        return []
    them = np.array([index[p] for p in partners if p in index], dtype=np.int64)
    me = index[host]
    wanted = np.zeros(len(figures.values), dtype=bool)
    if direction != "ingress":
        wanted |= (figures.src == me) & np.isin(figures.dst, them)
    if direction != "egress":
        wanted |= (figures.dst == me) & np.isin(figures.src, them)
    return [Evidence(*figures.pair(i), metric, float(figures.values[i]), bound)
            for i in np.flatnonzero(wanted)]


@dataclasses.dataclass(frozen=True)
class Healthy:
    """Who a suspect is confirmed against: `healthy`, the hosts no bad pair
    points at (a slow node's partners too); `remeasured`, the sorted pairs
    measured again; `confirming`, the confirmation pairs fleet.remeasure
    added to them (its --confirming file)."""
    healthy: frozenset
    remeasured: frozenset
    confirming: frozenset

    def partners(self, host):
        """The healthy hosts measured again with `host`: those it met to
        confirm it when it met any (fresh evidence: a pair of a slow node
        that was lucky in one pass is no confirmation), else those of its
        pairs outside the band (a slow node in a full sweep)."""
        def met(pairs):
            return sorted(p for p in self.healthy if p != host
                          and tuple(sorted((host, p))) in pairs)
        return met(self.confirming) or met(self.remeasured)

    def without(self, suspects):
        """Itself without the hosts a node or pair suspect names (a node
        cleared by its healthy partners leaves its bad pairs' other ends
        suspects)."""
        named = {h for s in suspects if s.kind in ("node", "pair") for h in s.names}
        return dataclasses.replace(self, healthy=self.healthy - named)


def healthy_of(bad, hosts, rule, remeasured, confirming):
    """The Healthy of a judged sweep (`bad`: its bad pairs' Evidence)."""
    return Healthy(frozenset(healthy_hosts([(e.src, e.dst) for e in bad], hosts, rule)),
                   frozenset(tuple(sorted(p)) for p in remeasured),
                   frozenset(tuple(sorted(p)) for p in confirming or ()))


def host_status(host, partners, family_of_suspect, bad, family, rule):
    """"slow" when `host` has bad pairs (of the suspect's metric family)
    with more than node_majority of its healthy partners (the rule a node
    is named by), "fine" otherwise, None without a partner."""
    if not partners:
        return None
    slow_with = {e.dst if e.src == host else e.src for e in bad
                 if family(e.metric) == family_of_suspect and host in (e.src, e.dst)}
    slow = len(set(partners) & slow_with)
    return "slow" if slow and slow > rule.node_majority * len(partners) else "fine"


def cleared_nodes(suspects, bad, healthy, family, rule):
    """The node suspects fine with their healthy partners measured again
    (`healthy`: Healthy): no node fault, whatever their other pairs say."""
    return {s.names[0] for s in suspects
            if s.kind == "node" and s.direction != UNREACHABLE
            and host_status(s.names[0], healthy.partners(s.names[0]), family(s.metric), bad,
                            family, rule) == "fine"}


def code_of(kind, statuses):
    """The confirmation code of a suspect from its hosts' statuses."""
    if kind == "node":
        return SLOW_WITH_HEALTHY if statuses == ["slow"] else NO_HEALTHY_PARTNER
    if statuses and all(s == "fine" for s in statuses):
        return ENDS_FINE
    if "slow" in statuses:
        return END_SLOW
    return NO_HEALTHY_PARTNER


def confirmed(suspect, bad, healthy, by_metric, bound_of, family, rule):
    """`suspect` with its confirmation: its hosts' figures against their
    healthy partners measured again, and the code.  Switch links, switches
    and unreachable nodes are no host's figure: unchanged."""
    if suspect.direction == UNREACHABLE or suspect.kind not in ("node", "pair"):
        return suspect
    metric = suspect.metric
    evidence, statuses = [], []
    for host in suspect.names:
        partners = healthy.partners(host)
        statuses.append(host_status(host, partners, family(metric), bad, family, rule))
        direction = suspect.direction if suspect.kind == "node" else "both"
        evidence += partner_figures(host, partners, metric, direction, by_metric[metric],
                                    bound_of(metric))
    return dataclasses.replace(suspect, confirmation=tuple(evidence),
                               confirmed=code_of(suspect.kind, statuses))

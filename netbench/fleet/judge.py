"""Which node or link of a fleet is slow, from a sweep of every pair.

Input (`judge`): directed measurements per pair of hosts,
``{(src, dst): {"latency_us": float, "bw_Mbps": {bytes: float}}}``.
Latency is a property of the unordered pair: either direction may carry it,
and where both do the better (lower) figure is the pair's, as NetPIPE keeps
its best repetition.  Bandwidth is judged per direction and message size.

The rule (parameters and their reasons: thresholds.yaml `sweep:`):

- Each metric (``latency_us``; ``bw_Mbps@<bytes>`` per size) has a fleet
  median and MAD (scaled to a normal sigma).  The median the pairs are held
  to is taken without the pairs of one node, the node whose leaving out
  moves it most towards healthy: one bad node must not drag the baseline,
  and with 3 nodes its 2 bad pairs of 3 would be the median itself.  Its
  MAD is that of the pairs inside the relative band below, the noise of
  healthy pairs, which gross faults cannot inflate.
- A direction is bad when its bandwidth is below both ``bandwidth_fraction``
  x median and median - ``mad_multiple`` x MAD; a pair is bad when its
  latency is above both ``latency_factor`` x median and median +
  ``mad_multiple`` x MAD.  (NVIDIA ClusterKit's 0.93 of the best bandwidth
  and 2.1x the best latency are the documented starting point; the median
  replaces the best because the best of many noisy pairs is the luckiest
  one.)
- A direction beyond the relative band but within the widening the
  fleet's own noise gave it (``mad_multiple`` x MAD) is neither bad nor
  healthy: the sweep is too noisy to tell.  It is measured again like a
  bad one; attributed as a bad one would be, what it still points at is
  `within_noise`: named, not drained, and the sweep inconclusive.  (A
  saturated host's sweep once spread its healthy pairs so far that a node
  at a third of the rate fell inside the widened band, and the sweep
  passed.)
- Attribution, per metric family (latency; bandwidth at any size): a node
  whose pairs are bad with more than ``node_majority`` of its partners, in
  at least ``node_min_bad_pairs`` pairs, is a suspect of kind ``node``;
  bad pairs no suspect node explains are suspects of kind ``pair``.
- The fleet's median against a reference of what the sweep itself
  measures: a figure given for it (``reference_bw_mbps``), else the line
  rate x ``line_rate_fraction`` (calibrated on healthy sweeps; never a
  ping-pong's figure), bad below ``fleet_fraction`` of it; latency against
  the documented latency by ``latency_factor``.  A uniformly slow fleet
  has no outlier, so this is a fleet-level finding.

Repeat before alarm, by the verdict model's knobs (netbench.judgement.knobs,
judging.yaml): `pairs_still_undecided` gives the bad directions while fewer
than `min_launches_to_fail` passes were made; the check measures them again
(up to `launches` passes) and `merge_passes` keeps the best figure of each,
so a pair stays bad only if it was bad in every pass.

``suspects.json``, the judgement's output, and its vocabulary (kinds,
directions, metrics) are netbench/results/suspects.py's.

A node that stopped answering mid-sweep (its rank killed, its sshd gone:
`lost`, found by netbench.results.sweep.lost_hosts) is the first suspect:
kind ``node``, direction ``unreachable``, metric ``answered_pairs``, its
value the pairs measured with it before it went silent, fleet_median the
other nodes' median count, and as evidence the figures those pairs had.

Every value is finite: suspects.json is strict JSON (no NaN, no Infinity).
"""

import dataclasses
import math
import operator
import statistics

import numpy as np

from .. import references
from . import confirm
from ..judgement import conditions
from ..results.suspects import (ANSWERED, BANDWIDTH, LATENCY, UNREACHABLE, Evidence, Finding,
                                FleetStat, Suspect, suspects_json)
from ..textsafe import printable

#: MAD times this estimates a normal distribution's standard deviation
MAD_TO_SIGMA = 1.4826


@dataclasses.dataclass
class FleetVerdict:
    suspects: list
    bad_pairs: list
    stats: dict               # metric -> FleetStat
    findings: list
    measurements: dict        # the input, for re-measurement
    # beyond the relative band, within the fleet's noise: too noisy to tell
    noisy_pairs: list = dataclasses.field(default_factory=list)
    within_noise: list = dataclasses.field(default_factory=list)   # their suspects

    def to_json(self):
        """The content of suspects.json (results/suspects.py)."""
        return suspects_json(self.suspects, self.bad_pairs, self.stats, self.findings)


# -- the measurements as figures per metric ---------------------------------

def bandwidth_metric(size):
    return f"{BANDWIDTH}@{int(size)}"


def metric_size(metric):
    return int(metric.split("@", 1)[1]) if "@" in metric else None


def checked_figure(pair, metric, value):
    """`value` as a float; ValueError naming the pair for anything that is
    not a finite figure of 0 or more (a NaN would judge nothing and break
    suspects.json; a pair that moved no data is 0, and bad)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0
    if not ok:
        raise ValueError(f"{pair[0]}->{pair[1]}: {metric}: expected a finite figure "
                         f">= 0, got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Figures:
    """One metric's figures in columns, one entry per pair, in the pairs'
    order: entry i is hosts[src[i]] -> hosts[dst[i]] (latency: the sorted
    pair).  Columns, not a dict per pair: a full sweep of 1024 nodes has a
    million pairs per metric."""
    hosts: list
    src: np.ndarray
    dst: np.ndarray
    values: np.ndarray

    def pair(self, i):
        return self.hosts[self.src[i]], self.hosts[self.dst[i]]


def figures_by_metric(measurements, hosts=None, codes=None):
    """{metric: Figures}; latency keyed by the sorted pair, its better
    direction where both were measured.  `hosts`: hosts_of(measurements);
    `codes`: pair_codes(measurements, hosts).  map() over the pairs, once
    per metric, with no Python code per pair: at a million pairs a loop's
    per-pair work would be most of the judging time."""
    hosts = hosts_of(measurements) if hosts is None else hosts
    codes = pair_codes(measurements, hosts) if codes is None else codes
    figures = list(measurements.values())
    columns = {}
    latency = list(map(operator.methodcaller("get", LATENCY), figures))
    present = present_entries(latency, None)
    if len(present):
        columns[LATENCY] = (codes[present], [latency[i] for i in present])
    bandwidths = [bw or {} for bw in map(operator.methodcaller("get", BANDWIDTH), figures)]
    for size in set().union(*bandwidths):
        values = list(map(operator.methodcaller("get", size, _MISSING), bandwidths))
        present = present_entries(values, _MISSING)
        metric = bandwidth_metric(size)
        earlier = columns.get(metric, (codes[:0], []))
        columns[metric] = (np.concatenate((earlier[0], codes[present])),
                           earlier[1] + [values[i] for i in present])
    return {metric: one_per_pair(metric, hosts, pairs, checked_figures(metric, hosts, pairs,
                                                                       values))
            for metric, (pairs, values) in columns.items()}


_MISSING = object()


def present_entries(values, missing):
    """The indices of `values` that are not `missing` (all of them, fast,
    in a full sweep)."""
    if missing not in values:
        return np.arange(len(values))
    return np.array([i for i, value in enumerate(values) if value is not missing],
                    dtype=np.int64)


def pair_codes(measurements, hosts):
    """Each measured (src, dst) as src's index x len(hosts) + dst's, in the
    measurements' order."""
    index = {host: i for i, host in enumerate(hosts)}
    keys = list(measurements)
    src = np.fromiter(map(index.__getitem__, map(operator.itemgetter(0), keys)),
                      dtype=np.int64, count=len(keys))
    dst = np.fromiter(map(index.__getitem__, map(operator.itemgetter(1), keys)),
                      dtype=np.int64, count=len(keys))
    return src * len(hosts) + dst


def checked_figures(metric, hosts, codes, values):
    """`values` as floats, checked as checked_figure does, at numpy's pace
    when they are plain numbers."""
    if set(map(type, values)) <= {int, float}:
        figures = np.array(values, dtype=float)
        wrong = ~np.isfinite(figures) | (figures < 0)
        if not wrong.any():
            return figures
        first = int(np.argmax(wrong))
        codes, values = codes[first:first + 1], values[first:first + 1]
    n = len(hosts)
    return np.array([checked_figure((hosts[code // n], hosts[code % n]), metric, value)
                     for code, value in zip(codes, values)], dtype=float)


def one_per_pair(metric, hosts, codes, values):
    """Figures sorted by pair, one per pair: latency's lower where both
    directions were measured, else the last given (a dict's rule)."""
    n = len(hosts)
    if metric == LATENCY:                                 # the sorted pair's
        codes = undirected(codes, n)
    if not is_increasing(codes):
        if metric == LATENCY:
            order = np.lexsort((values, codes))           # by pair, the lowest first
            codes, values = codes[order], values[order]
            keep = np.r_[True, codes[1:] != codes[:-1]]
        else:
            order = np.argsort(codes, kind="stable")
            codes, values = codes[order], values[order]
            keep = np.r_[codes[1:] != codes[:-1], True]
        codes, values = codes[keep], values[keep]
    return Figures(hosts, codes // n, codes % n, values)


def undirected(codes, n):
    """Pair codes (pair_codes) of the sorted pairs."""
    src, dst = codes // n, codes % n
    return np.minimum(src, dst) * n + np.maximum(src, dst)


def is_increasing(codes):
    """Sorted, each once: a sweep's pairs usually come so, and need no sort."""
    return bool(np.all(codes[1:] > codes[:-1]))


def distinct(codes):
    """The distinct codes, sorted (np.unique's hash table is slower at a
    million)."""
    codes = np.sort(codes)
    return codes[np.r_[True, codes[1:] != codes[:-1]]] if len(codes) else codes


def hosts_of(measurements):
    return sorted(set(map(operator.itemgetter(0), measurements))
                  | set(map(operator.itemgetter(1), measurements)))


# -- robust statistics -------------------------------------------------------

def median_of_sorted(ordered):
    """statistics.median of an already sorted sequence (the same float)."""
    n = len(ordered)
    middle = n // 2
    if n % 2:
        return float(ordered[middle])
    return float((ordered[middle - 1] + ordered[middle]) / 2)


def median_and_mad(values):
    """Median and MAD scaled to sigma; one wild figure moves neither much."""
    values = np.sort(np.asarray(values, dtype=float))
    median = median_of_sorted(values)
    mad = median_of_sorted(np.sort(np.abs(values - median))) * MAD_TO_SIGMA
    return median, mad


def higher_is_better(metric):
    return metric != LATENCY


def fleet_stat(metric, figures, rule):
    """Median and MAD over every pair (`figures`: Figures), and the median
    pairs are held to: without the pairs of the one node whose absence
    moves it most towards healthy (with 3 nodes, one bad node's pairs are
    2 of 3).  The first such node in host order wins a tie."""
    values = figures.values
    median, mad = median_and_mad(values)
    left_out, best = None, median
    for i, rest_median in leave_one_out_medians(figures):
        if is_healthier(metric, rest_median, best):
            left_out, best = i, rest_median
    kept = values if left_out is None else \
        values[(figures.src != left_out) & (figures.dst != left_out)]
    return FleetStat(metric, len(values), median, mad, best,
                     noise_of(metric, kept, best, rule),
                     None if left_out is None else figures.hosts[left_out])


def leave_one_out_medians(figures):
    """(host index, the median of the figures without that host's pairs)
    for each host with pairs left over, in host order.

    One sort serves every host: once a host's sorted ranks r are taken out,
    the k-th smallest of what is left sits at rank k + t, where t counts
    the ranks with r[i] - i <= k (r[i] - i is how many kept figures lie
    below r[i]).  O(m log m) for m pairs, plus O(p log p) per host of p
    pairs, where a median of the rest per host costs O(n^3) for a full
    sweep of n nodes."""
    values = figures.values
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values))
    # every host's ranks, sorted, one slice per host: one sort of host x m + rank
    keyed = np.sort(np.concatenate((figures.src * len(values) + rank,
                                    figures.dst * len(values) + rank)))
    owner, ranks = keyed // len(values), keyed % len(values)
    starts = np.searchsorted(owner, np.arange(len(figures.hosts) + 1))
    for i in range(len(figures.hosts)):
        taken = ranks[starts[i]:starts[i + 1]]
        left = len(values) - len(taken)
        if left == 0:
            continue
        below = taken - np.arange(len(taken))

        def kth(k):
            return ordered[k + int(np.searchsorted(below, k, side="right"))]
        middle = left // 2
        yield i, (float(kth(middle)) if left % 2
                  else float((kth(middle - 1) + kth(middle)) / 2))


def is_healthier(metric, candidate, current):
    return candidate > current if higher_is_better(metric) else candidate < current


def noise_of(metric, values, centre, rule):
    """The scaled MAD of the figures inside the relative band around
    `centre`: the noise of healthy pairs.  Gross faults are left out, or a
    second bad node (2 of 6, say) would widen the band that judges it until
    it passed."""
    values = np.asarray(values, dtype=float)
    bound = relative_bound(metric, centre, rule)
    inside = values[values >= bound] if higher_is_better(metric) else values[values <= bound]
    return median_and_mad(inside)[1] if len(inside) else 0.0


# -- the rule ----------------------------------------------------------------

def relative_bound(metric, centre, rule):
    """ClusterKit's style of bound, around the fleet median."""
    if higher_is_better(metric):
        return rule.bandwidth_fraction * centre
    return rule.latency_factor * centre


def pair_bound(stat, rule):
    """The figure beyond which a pair is bad: it must be outside both the
    relative band and the fleet's own noise (a noisier fleet than the
    fraction allows for widens the band instead of being named)."""
    spread = rule.mad_multiple * stat.fleet_mad
    relative = relative_bound(stat.metric, stat.fleet_median, rule)
    if higher_is_better(stat.metric):
        return min(relative, stat.fleet_median - spread)
    return max(relative, stat.fleet_median + spread)


def noisy_pairs_of(metric, figures, stat, rule):
    """Evidence of every pair of `figures` beyond the relative band but not
    beyond its bound (pair_bound): a band the fleet's noise widened holds
    it, so the sweep cannot tell it from that noise.  Its bound is the
    relative one it missed."""
    relative = relative_bound(stat.metric, stat.fleet_median, rule)
    bound = pair_bound(stat, rule)
    values = figures.values
    if higher_is_better(metric):
        between = (values < relative) & (values >= bound)
    else:
        between = (values > relative) & (values <= bound)
    return [Evidence(*figures.pair(i), metric, float(values[i]), relative)
            for i in np.flatnonzero(between)]


def is_beyond(metric, value, bound):
    return value < bound if higher_is_better(metric) else value > bound


def bad_pairs_of(metric, figures, stat, rule):
    """Evidence of every pair of `figures` (Figures) beyond its bound, in
    the pairs' order."""
    bound = pair_bound(stat, rule)
    values = figures.values
    beyond = values < bound if higher_is_better(metric) else values > bound
    return [Evidence(*figures.pair(i), metric, float(values[i]), bound)
            for i in np.flatnonzero(beyond)]


def family(metric):
    return metric.split("@", 1)[0]


# -- attribution -------------------------------------------------------------

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


# -- the fleet against the partition's documented figures -------------------

def fleet_references(stats, reference_latency_us, reference_bw_mbps, line_rate_mbps, rule):
    """{metric: reference}: latency, and bandwidth at the largest size (a
    figure of the sweep's own, else the line rate times the sweep's
    calibrated line_rate_fraction)."""
    out = {}
    reference_latency_us, reference_bw_mbps, line_rate_mbps = (
        figure if is_positive_figure(figure) else None
        for figure in (reference_latency_us, reference_bw_mbps, line_rate_mbps))
    if reference_latency_us and LATENCY in stats:
        out[LATENCY] = float(reference_latency_us)
    sizes = [m for m in stats if metric_size(m) is not None]
    bandwidth = reference_bw_mbps or (line_rate_mbps and line_rate_mbps
                                      * rule.line_rate_fraction)
    if bandwidth and sizes:
        out[max(sizes, key=metric_size)] = float(bandwidth)
    return out


def is_positive_figure(value):
    """A reference worth holding a fleet to: a finite number above 0 (a
    NaN from a partition's extras would judge nothing)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value > 0


def fleet_findings(stats, refs, rule):
    findings = []
    for metric, reference in refs.items():
        median = stats[metric].fleet_median
        if higher_is_better(metric):
            bound = rule.fleet_fraction * reference
            text = f"the whole fleet's {metric} is {median:g}, below {bound:g} " \
                   f"({rule.fleet_fraction:g} x the reference {reference:g})"
        else:
            bound = rule.latency_factor * reference
            text = f"the whole fleet's {metric} is {median:g}, above {bound:g} " \
                   f"({rule.latency_factor:g} x the reference {reference:g})"
        if is_beyond(metric, median, bound):
            findings.append(Finding(metric, median, reference, bound, text))
    return findings


# -- nodes that stopped answering ---------------------------------------------

def answered_metric(by_metric):
    """The figure a lost node's evidence shows: bandwidth at the largest
    size, else latency."""
    sizes = [m for m in by_metric if metric_size(m) is not None]
    return max(sizes, key=metric_size) if sizes else (LATENCY if by_metric else None)


def lost_suspect(host, lost, hosts, partners, by_metric, stats, rule, reason=None):
    """The suspect of a node that went silent mid-sweep (or was never
    reached: `reason`, the launch's words): how many pairs answered with
    it against the others' median (`partners`: measured_partners), and
    their figures."""
    others = [partners.get(h, 0) for h in hosts if h not in lost]
    metric = answered_metric(by_metric)
    evidence = ()
    if metric and host in by_metric[metric].hosts and metric in stats:
        figures = by_metric[metric]
        i = figures.hosts.index(host)
        bound = pair_bound(stats[metric], rule)
        evidence = tuple(Evidence(*figures.pair(k), metric, float(figures.values[k]), bound)
                         for k in np.flatnonzero((figures.src == i) | (figures.dst == i)))
    return Suspect("node", (host,), ANSWERED, float(partners.get(host, 0)),
                   float(statistics.median(others)) if others else 0.0, None, UNREACHABLE,
                   evidence, host, reason)


# -- the entry points ----------------------------------------------------------

def refuse_shared_hosts(measurements):
    """ValueError, one line naming the host, when a pair's two ends are one
    host: its ranks shared it, so what they measured is no link between
    nodes (and the fleet's statistics, which hold each host to its
    partners, would crash or misjudge; fleet.remeasure refuses the same
    output by its ranks)."""
    shared = sorted({src for src, dst in measurements if src == dst})
    if shared:
        raise ValueError(printable(f"ranks ran on one host ({', '.join(shared)}): a sweep "
                                   f"measures the links between nodes, one rank each"))


def judge(measurements, reference_latency_us=None, reference_bw_mbps=None,
          line_rate_mbps=None, rule=None, lost=(), topology=None, remeasured=None,
          confirming=None):
    """The FleetVerdict of one sweep; `rule`: references.SweepThresholds
    (default: thresholds.yaml's); `lost`: hosts that stopped answering
    mid-sweep, the first suspects, whatever their pairs measured; a
    mapping {host: why} names why each could not be reached; `topology`
    (netbench.fleet.topology): the fabric's switches, whose nodes, switch
    links and switches netbench.fleet.components names; `remeasured`:
    the unordered host pairs measured again after the first pass, which
    confirm or clear each suspect against healthy partners
    (netbench.fleet.confirm); None: a sweep of one pass, nothing
    confirmed; `confirming`: those of them the re-measure step added to
    confirm a suspect against a healthy partner (fleet.remeasure
    --confirming; confirm.Healthy)."""
    refuse_shared_hosts(measurements)
    rule = rule or references.sweep_thresholds()
    hosts = hosts_of(measurements)
    codes = pair_codes(measurements, hosts)
    by_metric = figures_by_metric(measurements, hosts, codes)
    stats = {m: fleet_stat(m, figs, rule) for m, figs in sorted(by_metric.items())}
    bad = [e for m, figs in sorted(by_metric.items())
           for e in bad_pairs_of(m, figs, stats[m], rule)]
    refs = fleet_references(stats, reference_latency_us, reference_bw_mbps,
                            line_rate_mbps, rule)
    partners = measured_partners(codes, hosts)
    every_host = sorted(set(hosts) | set(lost))
    why = lost if isinstance(lost, dict) else {}
    suspects = [lost_suspect(host, set(lost), every_host, partners, by_metric, stats, rule,
                             why.get(host))
                for host in sorted(set(lost))]
    if topology is None:
        def named(pairs, cleared=()):
            return attribute(pairs, hosts, stats, rule, refs.get, partners, cleared)
    else:
        from . import components

        def named(pairs, cleared=()):
            return components.attribute(pairs, by_metric, stats, rule, refs.get, topology,
                                        cleared)
    suspects += confirmed_against_healthy(named, bad, hosts, by_metric, stats, rule,
                                          remeasured, confirming)
    noisy = [e for m, figs in sorted(by_metric.items())
             for e in noisy_pairs_of(m, figs, stats[m], rule)]
    return FleetVerdict(suspects, bad, stats, fleet_findings(stats, refs, rule),
                        measurements, noisy, not_named(named(noisy), suspects))


def confirmed_against_healthy(named, bad, hosts, by_metric, stats, rule, remeasured,
                              confirming):
    """The suspects `named` (attribute's) gives for `bad`, confirmed
    against the healthy partners measured again (fleet.confirm): a node
    fine with them is no node fault, and its bad pairs are named again
    without it."""
    suspects = named(bad)
    if remeasured is None:
        return suspects
    healthy = confirm.healthy_of(bad, hosts, rule, remeasured, confirming)
    cleared = confirm.cleared_nodes(suspects, bad, healthy, family, rule)
    if cleared:
        suspects = named(bad, cleared)
    healthy = healthy.without(suspects)
    return [confirm.confirmed(s, bad, healthy, by_metric,
                              lambda m: pair_bound(stats[m], rule), family, rule)
            for s in suspects]


def not_named(candidates, suspects):
    """The candidates no suspect already names (a node bad with some
    partners and too noisy to tell with others is a suspect)."""
    named = {(s.kind, s.names) for s in suspects}
    return [s for s in candidates if (s.kind, s.names) not in named]


def pairs_to_remeasure(result):
    """The measured directions (src, dst) behind every bad pair, and every
    pair too noisy to tell, to measure again before anything is named."""
    wanted = set()
    for e in result.bad_pairs + result.noisy_pairs:
        if e.metric == LATENCY:
            wanted |= {p for p in ((e.src, e.dst), (e.dst, e.src))
                       if (result.measurements.get(p) or {}).get(LATENCY) is not None}
        else:
            wanted.add((e.src, e.dst))
    return sorted(wanted)


def better(metric_family, first, again):
    if first is None or again is None:
        return again if first is None else first
    return min(first, again) if metric_family == LATENCY else max(first, again)


def merge_passes(passes):
    """The measurements of every pass of a sweep (the first, then the
    re-measurements of the pairs outside the band), each figure the best
    of its passes: the judging rule's pick (netbench.judgement.model: a
    busy host only makes a pass worse).  Judged again, a pair is bad only
    if it was bad in every pass."""
    first, *later = passes
    merged = {pair: {LATENCY: figs.get(LATENCY), BANDWIDTH: dict(figs.get(BANDWIDTH) or {})}
              for pair, figs in first.items()}
    for again in later:
        for pair, figs in again.items():
            target = merged.setdefault(pair, {LATENCY: None, BANDWIDTH: {}})
            target[LATENCY] = better(LATENCY, target[LATENCY], figs.get(LATENCY))
            for size, value in (figs.get(BANDWIDTH) or {}).items():
                target[BANDWIDTH][size] = better(BANDWIDTH, target[BANDWIDTH].get(size), value)
    return merged


def pairs_still_undecided(passes, knobs, rule=None):
    """The directions a sweep measures in its next pass, by the judging
    knobs (judgement.knobs) and the sweep's `rule` (the check's own:
    references.SweepThresholds of its references and profile): a pair
    outside the band in every pass so far is named only after
    `min_to_fail` passes, so until then it is measured again; a pair
    within the band in any pass is decided (a sweep's figures are points,
    never straddling a bound)."""
    if len(passes) >= knobs.min_to_fail:
        return []
    return pairs_to_remeasure(judge(merge_passes(passes), rule=rule))


def unconfirmed(verdict, host_conditions, knobs, cpu_bound):
    """(the verdict without the suspects the host's conditions explain,
    those suspects).  A suspect has been outside the band in every pass;
    when the figure it was named on is the CPUs' (`cpu_bound(metric)`:
    across links that emulate only their rate every figure is) and the
    sweep ran under conditions that differ from a quiet host's
    (judgement.conditions: the fleet's own pairs are measured at once, but
    a busy node slows only the pairs it is in), a miss of the fleet median
    within what they explain is named as unconfirmed, not drained.  A node
    that stopped answering is no figure: it stays."""
    found = conditions.differences(host_conditions, None, knobs.conditions)
    if not found:
        return verdict, []
    limit = conditions.explained_factor(found)

    def explained(s):
        if s.direction == UNREACHABLE or not cpu_bound(s.metric):
            return False
        if not s.value or not s.fleet_median:
            return False
        miss = (s.fleet_median / s.value if higher_is_better(s.metric)
                else s.value / s.fleet_median)
        return miss <= limit

    left = [s for s in verdict.suspects if not explained(s)]
    return dataclasses.replace(verdict, suspects=left), \
        [s for s in verdict.suspects if explained(s)]

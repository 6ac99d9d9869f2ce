"""A sweep's figures per metric and the fleet statistics each pair is held
to: the measurements as arrays (one figure per directed pair and metric),
the fleet's robust median and MAD, and each pair's bound (netbench.fleet.judge
states the rule; thresholds.yaml `sweep:` holds its parameters)."""

import dataclasses
import math
import operator

import numpy as np

from ..results.suspects import BANDWIDTH, LATENCY, Evidence, FleetStat

#: MAD times this estimates a normal distribution's standard deviation
MAD_TO_SIGMA = 1.4826


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


def fleet_stat(metric, figures, rule, shared=()):
    """Median and MAD over every pair (`figures`: Figures), and the median
    pairs are held to: without the pairs of the one node whose absence
    moves it most towards healthy (with 3 nodes, one bad node's pairs are
    2 of 3).  The first such node in host order wins a tie.

    `shared`: [(component, mask of the figures' entries that run through
    it)], the switch links and switches of a topology
    (components.shared_paths): with two leaves every pair across them
    runs through one uplink, the majority of the pairs, so a slow uplink
    would be the fleet's median.  A component's pairs are left out instead
    when the median of the others (at least the rule's `min_other_pairs`)
    holds the whole fleet's median outside its relative band: the fleet's
    median is then the component's figure, not the fleet's.  Of those,
    the one that leaves the most pairs to compare with (the smallest),
    the healthier on a tie.  A gate, not the healthiest of every subset:
    the best of many small subsets' medians is a lucky one, and would
    hold a healthy fleet to it."""
    values = figures.values
    median, mad = median_and_mad(values)
    left_out, best, kept = None, median, values
    for i, rest_median in leave_one_out_medians(figures):
        if is_healthier(metric, rest_median, best):
            left_out, best = figures.hosts[i], rest_median
            kept = values[(figures.src != i) & (figures.dst != i)]
    majority = majority_component(metric, values, median, shared, rule)
    if majority is not None:
        left_out, best, kept = majority
    return FleetStat(metric, len(values), median, mad, best,
                     noise_of(metric, kept, best, rule), left_out)


def majority_component(metric, values, median, shared, rule):
    """(component, the others' median, the others' figures) of the shared
    component (fleet_stat) whose pairs the whole fleet's `median` is, or
    None."""
    found = None
    for component, through in shared:
        others = values[~through]
        if len(others) < rule.min_other_pairs:
            continue
        rest_median = median_of_sorted(np.sort(others))
        if not is_beyond(metric, median, relative_bound(metric, rest_median, rule)):
            continue
        key = (len(others), rest_median if higher_is_better(metric) else -rest_median)
        if found is None or key > found[0]:
            found = (key, (component, rest_median, others))
    return None if found is None else found[1]


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

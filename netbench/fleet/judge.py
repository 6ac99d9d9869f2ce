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
  healthy pairs, which gross faults cannot inflate.  With a topology, a
  switch link or switch that most pairs run through (two leaves: every
  pair across them) would be the median itself: when the median of the
  pairs that do not run through it (at least ``min_other_pairs``) holds
  the whole fleet's outside its band, its pairs are left out instead
  (figures.fleet_stat), and the pairs through it are held to the other
  paths; with too few other pairs, the fleet's finding says which
  components it cannot separate (`unseparated`).
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
so a pair stays bad only if it was bad in every pass.  A sweep cut short
makes no later pass, and a later pass cut short did not measure again
every pair it was to: `whole_passes` counts neither, and `not_retested`
leaves what the figures alone named undecided.

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
import statistics

import numpy as np

from .. import references
from . import components, confirm
from .attribution import attribute, measured_partners
from .figures import (bad_pairs_of, family, figures_by_metric, fleet_stat, higher_is_better,
                      hosts_of, is_beyond, metric_size, noisy_pairs_of, pair_bound, pair_codes)
from ..judgement import conditions
from ..results.suspects import (ANSWERED, BANDWIDTH, LATENCY, UNREACHABLE, Evidence, Finding,
                                Suspect, suspects_json)
from ..textsafe import printable


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


def fleet_findings(stats, refs, rule, shared=None):
    """The metrics whose fleet median misses its reference; `shared`:
    {metric: components.shared_paths}, whose components too few other
    pairs could be held against are named in the finding."""
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
            text += unseparated((shared or {}).get(metric, ()), rule)
            findings.append(Finding(metric, median, reference, bound, text))
    return findings


def unseparated(shared, rule):
    """Why a slow fleet may be one switch link or switch the sweep cannot
    separate from it: the components (components.shared_paths) that all
    but fewer than `min_other_pairs` of the measured pairs run through
    (two leaves with no pair measured under either), in words; "" when
    there is none."""
    alone = [(component, int((~through).sum())) for component, through in shared
             if (~through).sum() < rule.min_other_pairs]
    if not alone:
        return ""
    named = ", ".join(f"{component} ({others} other)" for component, others in alone)
    return (f"; not named as a component: all but fewer than {rule.min_other_pairs} of "
            f"the measured pairs run through {named}, so no other path was measured to "
            f"hold them to (thresholds.yaml sweep: min_other_pairs)")


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
    shared = {m: components.shared_paths(topology, figs) if topology is not None else []
              for m, figs in by_metric.items()}
    stats = {m: fleet_stat(m, figs, rule, shared[m]) for m, figs in sorted(by_metric.items())}
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
        def named(pairs, cleared=()):
            return components.attribute(pairs, by_metric, stats, rule, refs.get, topology,
                                        cleared)
    suspects += confirmed_against_healthy(named, bad, hosts, by_metric, stats, rule,
                                          remeasured, confirming)
    noisy = [e for m, figs in sorted(by_metric.items())
             for e in noisy_pairs_of(m, figs, stats[m], rule)]
    return FleetVerdict(suspects, bad, stats, fleet_findings(stats, refs, rule, shared),
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


def pairs_still_undecided(passes, knobs, rule=None, topology=None):
    """The directions a sweep measures in its next pass, by the judging
    knobs (judgement.knobs) and the sweep's `rule` (the check's own:
    references.SweepThresholds of its references and profile): a pair
    outside the band in every pass so far is named only after
    `min_to_fail` passes, so until then it is measured again; a pair
    within the band in any pass is decided (a sweep's figures are points,
    never straddling a bound).  `topology`: the partition's, as the check
    judges with it: a fault the majority of pairs share is outside the
    band only against the other paths (fleet_stat)."""
    if len(passes) >= knobs.min_to_fail:
        return []
    return pairs_to_remeasure(judge(merge_passes(passes), rule=rule, topology=topology))


def whole_passes(first, again):
    """The passes a pair's `min_to_fail` counts (results.sweep results):
    the first, whole or cut short, and each later pass that finished.  A
    later pass cut short measured again only some of the pairs it was to,
    and a pair it missed was outside the band in one pass alone."""
    return 1 + sum(1 for later in again if later.finished)


def not_retested(verdict, passes, knobs):
    """(the verdict without the suspects its figures named, those suspects)
    when the sweep made fewer than the knobs' `min_to_fail` passes: a
    pair is named only when it was outside the band in that many, and a
    sweep cut short (a node lost mid-pass) is never measured again
    (fleet.remeasure), so what its last pairs measured while the job
    went down is undecided, not blamed.  A node that stopped answering
    is no figure: it stays."""
    if passes >= knobs.min_to_fail:
        return verdict, []
    figures_only = [s for s in verdict.suspects if s.direction != UNREACHABLE]
    return dataclasses.replace(verdict, suspects=[s for s in verdict.suspects
                                                  if s.direction == UNREACHABLE]), figures_only


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
    limit = conditions.explained_factor(found, _busiest_pair(found))

    def explained(s):
        if s.direction == UNREACHABLE or not cpu_bound(s.metric):
            return False
        if not s.value or not s.fleet_median:
            return False
        return miss_of_median(s.metric, s.value, s.fleet_median) <= limit

    left = [s for s in verdict.suspects if not explained(s)]
    return dataclasses.replace(verdict, suspects=left), \
        [s for s in verdict.suspects if explained(s)]


def miss_of_median(metric, value, fleet_median):
    """How many times a figure misses the fleet's median: a bandwidth below
    it, a latency above it."""
    return fleet_median / value if higher_is_better(metric) else value / fleet_median


def _busiest_pair(found):
    """{node: 1} of the two nodes whose pressures explain the most: a
    sweep's figure is between one rank on each of two nodes, and a suspect
    may have had either as its partner."""
    pressed = sorted((d for d in found if d["code"] == "cpu_pressure"),
                     key=lambda d: conditions.explained_factor([d]), reverse=True)
    return {d["node"]: 1 for d in pressed[:2]}

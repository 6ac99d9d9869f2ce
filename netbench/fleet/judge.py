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

Repeat before alarm: `pairs_to_remeasure` gives the bad directions; the
check measures them again and `merge_remeasurement` keeps the better figure
of each, so a pair stays bad only if it was bad both times.

``suspects.json`` (`FleetVerdict.to_json`, schema SUSPECTS_SCHEMA,
read back with `read_suspects`)::

    {"version": 1,
     "suspects": [{"kind": "node" | "pair", "names": [host, ...],
                   "direction": "both" | "egress" | "ingress" | "a->b",
                   "metric": "latency_us" | "bw_Mbps@<bytes>",
                   "value": the suspect's median figure,
                   "fleet_median": the median it was held to,
                   "reference": documented figure or null,
                   "evidence": [{"src", "dst", "metric", "value", "bound"}]}],
     "bad_pairs": [the same as evidence, every bad pair],
     "fleet": {metric: {"n", "median", "mad", "fleet_median", "fleet_mad",
                        "left_out": host or null}},
     "findings": [{"metric", "fleet_median", "reference", "bound", "text"}]}

A node's direction: ``egress`` when only the directions from it are bad,
``ingress`` only those to it; a pair's ``a->b`` when only that direction is.

A node that stopped answering mid-sweep (its rank killed, its sshd gone:
`lost`, found by netbench.results.sweep.lost_hosts) is the first suspect:
kind ``node``, direction ``unreachable``, metric ``answered_pairs``, its
value the pairs measured with it before it went silent, fleet_median the
other nodes' median count, and as evidence the figures those pairs had.

Every value is finite: suspects.json is strict JSON (no NaN, no Infinity).
"""

import dataclasses
import json
import math
import re
import statistics

from .. import references
from ..datafiles import load_json, validate

LATENCY = "latency_us"
BANDWIDTH = "bw_Mbps"
#: a lost node's metric and direction (the module docstring)
ANSWERED = "answered_pairs"
UNREACHABLE = "unreachable"
#: the closed vocabularies of a suspect (SUSPECTS_SCHEMA; drain.sh writes
#: nothing else): kinds, a node's directions, metrics
KINDS = ("node", "pair")
NODE_DIRECTIONS = ("both", "egress", "ingress", UNREACHABLE)
METRIC = re.compile(rf"(?:{LATENCY}|{BANDWIDTH}@[0-9]{{1,15}}|{ANSWERED})\Z")
#: MAD times this estimates a normal distribution's standard deviation
MAD_TO_SIGMA = 1.4826
SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Evidence:
    src: str
    dst: str
    metric: str
    value: float
    bound: float      # the figure it was held to (bad beyond it)


@dataclasses.dataclass(frozen=True)
class Suspect:
    kind: str                 # "node" or "pair"
    names: tuple
    metric: str
    value: float
    fleet_median: float
    reference: float = None
    direction: str = "both"
    evidence: tuple = ()


@dataclasses.dataclass(frozen=True)
class FleetStat:
    metric: str
    n: int
    median: float             # over every pair
    mad: float                # scaled to sigma
    fleet_median: float       # over the pairs without `left_out`'s: what pairs are held to
    fleet_mad: float
    left_out: str = None


@dataclasses.dataclass(frozen=True)
class Finding:
    metric: str
    fleet_median: float
    reference: float
    bound: float
    text: str


@dataclasses.dataclass
class FleetVerdict:
    suspects: list
    bad_pairs: list
    stats: dict               # metric -> FleetStat
    findings: list
    measurements: dict        # the input, for re-measurement

    def to_json(self):
        """The content of suspects.json (schema: the module docstring):
        strict JSON, a figure that is not finite is null."""
        return strict_json({
            "version": SCHEMA_VERSION,
            "suspects": [_suspect_json(s) for s in self.suspects],
            "bad_pairs": [dataclasses.asdict(e) for e in self.bad_pairs],
            "fleet": {m: _stat_json(s) for m, s in self.stats.items()},
            "findings": [dataclasses.asdict(f) for f in self.findings],
        })


def finite_or_null(data):
    """`data` with every NaN or infinity replaced by None (JSON's null)."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: finite_or_null(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite_or_null(v) for v in data]
    return data


def strict_json(data):
    """JSON text that every JSON parser reads: NaN and Infinity, which
    Python's json writes by default, become null."""
    return json.dumps(finite_or_null(data), indent=2, allow_nan=False) + "\n"


def _suspect_json(suspect):
    out = dataclasses.asdict(suspect)
    out["names"] = list(suspect.names)
    out["evidence"] = [dataclasses.asdict(e) for e in suspect.evidence]
    return out


def _stat_json(stat):
    out = dataclasses.asdict(stat)
    del out["metric"]
    return out


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


def figures_by_metric(measurements):
    """{metric: {(src, dst): value}}; latency keyed by the sorted pair, its
    better direction where both were measured."""
    out = {}
    for (src, dst), figures in measurements.items():
        if figures.get(LATENCY) is not None:
            value = checked_figure((src, dst), LATENCY, figures[LATENCY])
            key = tuple(sorted((src, dst)))
            latency = out.setdefault(LATENCY, {})
            latency[key] = min(value, latency.get(key, float("inf")))
        for size, value in (figures.get(BANDWIDTH) or {}).items():
            metric = bandwidth_metric(size)
            out.setdefault(metric, {})[(src, dst)] = checked_figure((src, dst), metric, value)
    return out


def hosts_of(measurements):
    return sorted({host for pair in measurements for host in pair})


# -- robust statistics -------------------------------------------------------

def median_and_mad(values):
    """Median and MAD scaled to sigma; one wild figure moves neither much."""
    values = list(values)
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values) * MAD_TO_SIGMA
    return median, mad


def higher_is_better(metric):
    return metric != LATENCY


def fleet_stat(metric, figures, hosts, rule):
    """Median and MAD over every pair, and the median pairs are held to:
    without the pairs of the one node whose absence moves it most towards
    healthy (with 3 nodes, one bad node's pairs are 2 of 3)."""
    median, mad = median_and_mad(figures.values())
    left_out, kept = None, list(figures.values())
    for host in hosts:
        rest = [v for pair, v in figures.items() if host not in pair]
        if rest and is_healthier(metric, statistics.median(rest), statistics.median(kept)):
            left_out, kept = host, rest
    fleet_median = statistics.median(kept)
    return FleetStat(metric, len(figures), median, mad, fleet_median,
                     noise_of(metric, kept, fleet_median, rule), left_out)


def is_healthier(metric, candidate, current):
    return candidate > current if higher_is_better(metric) else candidate < current


def noise_of(metric, values, centre, rule):
    """The scaled MAD of the figures inside the relative band around
    `centre`: the noise of healthy pairs.  Gross faults are left out, or a
    second bad node (2 of 6, say) would widen the band that judges it until
    it passed."""
    inside = [v for v in values if not is_beyond(metric, v, relative_bound(metric, centre,
                                                                          rule))]
    return median_and_mad(inside)[1] if inside else 0.0


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


def is_beyond(metric, value, bound):
    return value < bound if higher_is_better(metric) else value > bound


def bad_pairs_of(metric, figures, stat, rule):
    bound = pair_bound(stat, rule)
    return [Evidence(src, dst, metric, value, bound)
            for (src, dst), value in sorted(figures.items())
            if is_beyond(metric, value, bound)]


def family(metric):
    return metric.split("@", 1)[0]


# -- attribution -------------------------------------------------------------

def partners_with_bad_pairs(host, bad):
    return {e.dst if e.src == host else e.src for e in bad if host in (e.src, e.dst)}


def measured_partners(measurements):
    """{host: the hosts it was measured with}: every other host in a full
    sweep, its K partners in a partial one (`partner_pairs`)."""
    partners = {}
    for src, dst in measurements:
        partners.setdefault(src, set()).add(dst)
        partners.setdefault(dst, set()).add(src)
    return partners


def suspect_nodes(bad, hosts, rule, partners=None):
    """Nodes whose pairs are bad with a majority of their (measured)
    partners, in at least node_min_bad_pairs pairs.  A bad cable touches
    one partner of each of its ends; a bad node touches all of its
    partners, and with 3 nodes that is 2 of 2 for it against 1 of 2 for
    the others."""
    out = []
    for host in hosts:
        count = len(partners_with_bad_pairs(host, bad))
        measured = len(partners[host]) if partners and host in partners else len(hosts) - 1
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


def make_suspect(kind, names, direction, evidence, stats, reference_of):
    metric = headline_metric(evidence)
    value = statistics.median(e.value for e in evidence if e.metric == metric)
    return Suspect(kind, tuple(names), metric, value, stats[metric].fleet_median,
                   reference_of(metric), direction, tuple(evidence))


def attribute(bad, hosts, stats, rule, reference_of, partners=None):
    """Suspects per metric family: nodes first, then the bad pairs no
    suspect node explains."""
    suspects = []
    for fam in sorted({family(e.metric) for e in bad}):
        in_family = [e for e in bad if family(e.metric) == fam]
        nodes = suspect_nodes(in_family, hosts, rule, partners)
        for host in nodes:
            evidence = [e for e in in_family if host in (e.src, e.dst)]
            suspects.append(make_suspect("node", [host], node_direction(host, evidence),
                                         evidence, stats, reference_of))
        unexplained = [e for e in in_family if not {e.src, e.dst} & set(nodes)]
        for a, b in sorted({tuple(sorted((e.src, e.dst))) for e in unexplained}):
            evidence = [e for e in unexplained if {e.src, e.dst} == {a, b}]
            suspects.append(make_suspect("pair", [a, b], pair_direction(a, b, evidence),
                                         evidence, stats, reference_of))
    return suspects


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


def lost_suspect(host, lost, hosts, measurements, by_metric, stats, rule):
    """The suspect of a node that went silent mid-sweep: how many pairs
    answered with it against the others' median, and their figures."""
    partners = measured_partners(measurements)
    others = [len(partners.get(h, ())) for h in hosts if h not in lost]
    metric = answered_metric(by_metric)
    evidence = tuple(Evidence(src, dst, metric, value, pair_bound(stats[metric], rule))
                     for (src, dst), value in sorted((by_metric.get(metric) or {}).items())
                     if host in (src, dst)) if metric else ()
    return Suspect("node", (host,), ANSWERED, float(len(partners.get(host, ()))),
                   float(statistics.median(others)) if others else 0.0, None, UNREACHABLE,
                   evidence)


# -- the entry points ----------------------------------------------------------

def judge(measurements, reference_latency_us=None, reference_bw_mbps=None,
          line_rate_mbps=None, rule=None, lost=()):
    """The FleetVerdict of one sweep; `rule`: references.SweepThresholds
    (default: thresholds.yaml's); `lost`: hosts that stopped answering
    mid-sweep, the first suspects, whatever their pairs measured."""
    rule = rule or references.sweep_thresholds()
    hosts = hosts_of(measurements)
    by_metric = figures_by_metric(measurements)
    stats = {m: fleet_stat(m, figs, hosts, rule) for m, figs in sorted(by_metric.items())}
    bad = [e for m, figs in sorted(by_metric.items())
           for e in bad_pairs_of(m, figs, stats[m], rule)]
    refs = fleet_references(stats, reference_latency_us, reference_bw_mbps,
                            line_rate_mbps, rule)
    every_host = sorted(set(hosts) | set(lost))
    suspects = [lost_suspect(host, set(lost), every_host, measurements, by_metric, stats, rule)
                for host in sorted(set(lost))]
    suspects += attribute(bad, hosts, stats, rule, refs.get, measured_partners(measurements))
    return FleetVerdict(suspects, bad, stats, fleet_findings(stats, refs, rule),
                        measurements)


def pairs_to_remeasure(result):
    """The measured directions (src, dst) behind every bad pair, to measure
    again before anything is named."""
    wanted = set()
    for e in result.bad_pairs:
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


def merge_remeasurement(first, again):
    """The measurements with each re-measured figure replaced by the better
    of the two (NetPIPE keeps its best repetition): judged again, a pair is
    bad only if it was bad both times."""
    merged = {pair: {LATENCY: figs.get(LATENCY), BANDWIDTH: dict(figs.get(BANDWIDTH) or {})}
              for pair, figs in first.items()}
    for pair, figs in again.items():
        target = merged.setdefault(pair, {LATENCY: None, BANDWIDTH: {}})
        target[LATENCY] = better(LATENCY, target[LATENCY], figs.get(LATENCY))
        for size, value in (figs.get(BANDWIDTH) or {}).items():
            target[BANDWIDTH][size] = better(BANDWIDTH, target[BANDWIDTH].get(size), value)
    return merged


# -- reading suspects.json back ---------------------------------------------------

_NUMBER = {"type": "number"}
_OPTIONAL_NUMBER = {"type": ["number", "null"]}
_METRIC = {"type": "string", "pattern": "^" + METRIC.pattern.replace("\\Z", "$"),
           "description": f"expected {LATENCY}, {BANDWIDTH}@<bytes> or {ANSWERED}"}
_DIRECTION = {"type": "string",
              "pattern": f"^(?:{'|'.join(NODE_DIRECTIONS)}|[^\\s]+->[^\\s]+)$",
              "description": f"expected one of {', '.join(NODE_DIRECTIONS)} or <host>-><host>"}
_EVIDENCE = {
    "type": "object", "additionalProperties": False,
    "required": ["src", "dst", "metric", "value", "bound"],
    "properties": {"src": {"type": "string"}, "dst": {"type": "string"},
                   "metric": _METRIC, "value": _NUMBER, "bound": _NUMBER},
}
#: one suspect, as suspects.json and a LinkSweep record (results.record)
#: hold it: evidence is required, but a node that went silent before any of
#: its pairs was measured has none
SUSPECT_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["kind", "names", "metric", "value", "fleet_median", "reference",
                 "direction", "evidence"],
    "properties": {
        "kind": {"enum": list(KINDS)},
        "names": {"type": "array", "items": {"type": "string"},
                  "minItems": 1, "maxItems": 2},
        "metric": _METRIC, "value": _NUMBER, "fleet_median": _NUMBER,
        "reference": _OPTIONAL_NUMBER, "direction": _DIRECTION,
        "evidence": {"type": "array", "items": _EVIDENCE},
    },
    "if": {"properties": {"direction": {"const": UNREACHABLE}}},
    "else": {"properties": {"evidence": {"minItems": 1}}},
}
SUSPECTS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["version", "suspects", "bad_pairs", "fleet", "findings"],
    "properties": {
        "version": {"const": SCHEMA_VERSION},
        "suspects": {"type": "array", "items": SUSPECT_SCHEMA},
        "bad_pairs": {"type": "array", "items": _EVIDENCE},
        "fleet": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "required": ["n", "median", "mad", "fleet_median", "fleet_mad", "left_out"],
            "properties": {"n": {"type": "integer"}, "median": _NUMBER, "mad": _NUMBER,
                           "fleet_median": _NUMBER, "fleet_mad": _NUMBER,
                           "left_out": {"type": ["string", "null"]}}}},
        "findings": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["metric", "fleet_median", "reference", "bound", "text"],
            "properties": {"metric": {"type": "string"}, "fleet_median": _NUMBER,
                           "reference": _NUMBER, "bound": _NUMBER,
                           "text": {"type": "string"}}}},
    },
}


def read_suspects(path):
    """suspects.json as Suspects, checked against SUSPECTS_SCHEMA (DataError
    naming the file and key otherwise); and the whole validated document."""
    data = validate(load_json(path), SUSPECTS_SCHEMA, path)
    return [suspect_from_json(s) for s in data["suspects"]], data


def suspect_from_json(s):
    """A Suspect from its suspects.json form (a run report's record keeps
    that form: publish makes drain.sh from it)."""
    return Suspect(s["kind"], tuple(s["names"]), s["metric"], s["value"], s["fleet_median"],
                   s["reference"], s["direction"], tuple(Evidence(**e) for e in s["evidence"]))

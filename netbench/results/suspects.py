"""``suspects.json``, the fleet judgement's output (fleet/judge.py), and
a LinkSweep record's suspects (results/record.py): one format, its
vocabulary, its schema, and how it is written and read back.

``suspects.json`` (`suspects_json`, schema SUSPECTS_SCHEMA, read back
with `read_suspects`)::

    {"version": 1,
     "suspects": [{"kind": "node" | "pair" | "switch-link" | "switch",
                   "names": [host or switch, ...],
                   "component": the host, "switch<->parent", the switch, "a<->b",
                   "direction": "both" | "egress" | "ingress" | "a->b",
                   "metric": "latency_us" | "bw_Mbps@<bytes>",
                   "value": the suspect's median figure,
                   "fleet_median": the median it was held to,
                   "reference": documented figure or null,
                   "evidence": [{"src", "dst", "metric", "value", "bound"}],
                   "confirmation": {"code": CONFIRMATION_CODES,
                                    "evidence": [the same as evidence]}}],
     "bad_pairs": [the same as evidence, every bad pair],
     "fleet": {metric: {"n", "median", "mad", "fleet_median", "fleet_mad",
                        "left_out": host, switch link, switch or null}},
     "findings": [{"metric", "fleet_median", "reference", "bound", "text"}]}

A switch link's names are the switch and its parent, its direction
``egress`` when only what leaves the switch's subtree is slow, ``ingress``
only what enters it (netbench.fleet.components).  Switch links the pairs
cannot tell apart (two leaves' uplinks under one spine) are one suspect of
kind ``switch-link``: names the two switches at the path's ends, component
the path (``leaf1<->spine<->leaf2``), direction ``both`` or
``leaf2->leaf1``, and ``reason`` saying which links it cannot separate.  A node's direction: ``egress`` when only the directions from it are bad,
``ingress`` only those to it; a pair's ``a->b`` when only that direction is.

A lost node (the rank or sshd of a node that went silent mid-sweep, or a
node the launch could not reach at all) is a suspect of kind ``node``,
direction ``unreachable``, metric ``answered_pairs``; with ``reason``, why
it could not be reached (ssh's words, e.g. "No route to host"), where the
launch said.

A suspect measured again against healthy partners in the same job
(netbench.fleet.confirm) has ``confirmation``: its hosts' figures against
them, and the code of what they say; none without a second pass.

Every value is finite: suspects.json is strict JSON (no NaN, no Infinity).
"""

import dataclasses
import json
import math
import re

from ..datafiles import load_json, validate

LATENCY = "latency_us"
BANDWIDTH = "bw_Mbps"
#: a lost node's metric and direction (the module docstring)
ANSWERED = "answered_pairs"
UNREACHABLE = "unreachable"
#: the closed vocabularies of a suspect (SUSPECTS_SCHEMA; drain.sh writes
#: nothing else): kinds, a node's directions, metrics
KINDS = ("node", "pair", "switch-link", "switch")
NODE_DIRECTIONS = ("both", "egress", "ingress", UNREACHABLE)
METRIC = re.compile(rf"(?:{LATENCY}|{BANDWIDTH}@[0-9]{{1,15}}|{ANSWERED})\Z")
SCHEMA_VERSION = 1
#: a suspect's confirmation against healthy partners (netbench.fleet.confirm):
#: a node bad with (a majority of) the healthy partners measured again; a
#: pair whose ends are each fine with theirs (the link, not a node); a pair
#: with an end bad with its; no healthy partner measured again
SLOW_WITH_HEALTHY = "slow_with_healthy_partners"
ENDS_FINE = "ends_fine_with_healthy_partners"
END_SLOW = "end_slow_with_healthy_partners"
NO_HEALTHY_PARTNER = "no_healthy_partner_measured"
CONFIRMATION_CODES = (SLOW_WITH_HEALTHY, ENDS_FINE, END_SLOW, NO_HEALTHY_PARTNER)


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
    #: what to replace: the host, `switch<->parent`, the switch, `a<->b`
    #: (default_component when the judgement had no topology)
    component: str = None
    reason: str = None        # an unreachable node's: why (the launch's words)
    #: its hosts' figures against healthy partners measured again in the
    #: same job, and what they say (CONFIRMATION_CODES); None: not confirmed
    confirmation: tuple = ()
    confirmed: str = None


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


def default_component(suspect):
    """A node's component is the node; a pair's, the link between its two."""
    return "<->".join(suspect.names)


def _suspect_json(suspect):
    out = dataclasses.asdict(suspect)
    out["names"] = list(suspect.names)
    out["component"] = suspect.component or default_component(suspect)
    out["evidence"] = [dataclasses.asdict(e) for e in suspect.evidence]
    if suspect.reason is None:
        del out["reason"]
    del out["confirmed"]
    if suspect.confirmed is None:
        del out["confirmation"]
    else:
        out["confirmation"] = {"code": suspect.confirmed,
                               "evidence": [dataclasses.asdict(e)
                                            for e in suspect.confirmation]}
    return out


def _stat_json(stat):
    out = dataclasses.asdict(stat)
    del out["metric"]
    return out


def suspects_json(suspects, bad_pairs, stats, findings):
    """The text of suspects.json: strict JSON, a figure that is not finite
    is null.  `stats` is {metric: FleetStat}."""
    return strict_json({
        "version": SCHEMA_VERSION,
        "suspects": [_suspect_json(s) for s in suspects],
        "bad_pairs": [dataclasses.asdict(e) for e in bad_pairs],
        "fleet": {m: _stat_json(s) for m, s in stats.items()},
        "findings": [dataclasses.asdict(f) for f in findings],
    })


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
        # absent in the records of a netbench before issue 36
        "component": {"type": "string"},
        "reason": {"type": "string"},
        # absent before issue 36's confirmation against healthy partners
        "confirmation": {"type": "object", "additionalProperties": False,
                         "required": ["code", "evidence"],
                         "properties": {"code": {"enum": list(CONFIRMATION_CODES)},
                                        "evidence": {"type": "array", "items": _EVIDENCE}}},
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
    data = validate(load_json(path, kind="suspects"), SUSPECTS_SCHEMA, path)
    return [suspect_from_json(s) for s in data["suspects"]], data


def suspect_from_json(s):
    """A Suspect from its suspects.json form (a run report's record keeps
    that form: publish makes drain.sh from it)."""
    confirmation = s.get("confirmation") or {}
    return Suspect(s["kind"], tuple(s["names"]), s["metric"], s["value"], s["fleet_median"],
                   s["reference"], s["direction"], tuple(Evidence(**e) for e in s["evidence"]),
                   s.get("component"), s.get("reason"),
                   tuple(Evidence(**e) for e in confirmation.get("evidence", ())),
                   confirmation.get("code"))

"""Documented reference figures and the thresholds checks are held to.

`reframe_checks/references/seed*.yaml` hold the source documents' figures,
each with its citation, and `modern*.yaml` the published figures of
today's fabrics, each table citing its document's title and address
(`url`); `thresholds.yaml` says which figure each
performance variable is compared with per interconnect class.  Every
malformed entry raises DataError naming the file and the key: types are
checked by the JSON Schemas below where the files are read, and the bounds
by the rules ReFrame applies much later (a lower bound is a fraction from
-1 to 0 of a positive figure, an upper bound at least 0).
"""

import copy
import dataclasses
import functools
from pathlib import Path

from . import paths
from .judgement import knobs as judging_knobs
from .datafiles import DataError, load_yaml, require, validate as validate_schema

THRESHOLDS_FILE = "thresholds.yaml"
#: the files of documented figures: the seeds' 2004 tables, and today's
#: fabrics' published figures
FIGURE_FILES = ("seed*.yaml", "modern*.yaml")
#: the interconnect class a partition declares to have it chosen from its
#: discovered link (thresholds.yaml's `match` of each class)
AUTO_CLASS = "auto"
#: link layers netbench.probe.linerate tells apart
LINK_LAYERS = ("ethernet", "infiniband", "omnipath", "slingshot")
#: the kinds of RDMA device netbench.probe.fabric tells apart (an RDMA
#: class's `device_match`)
DEVICE_KINDS = ("infiniband", "roce", "omnipath", "efa", "slingshot")
#: the virtual cluster's link classes: every class it can give a partition
#: must have thresholds
LINKS_FILE = paths.DATA / "links.yaml"
NUMBER = (int, float)

_STRING = {"type": "string"}
_NUMBER = {"type": "number"}

#: a seed*.yaml file (the figures of each table row are checked against the
#: table's `fields` below)
SEED_SCHEMA = {
    "type": "object",
    "required": ["source"],
    "additionalProperties": False,
    "properties": {
        "source": {"type": "object", "required": ["file"], "properties": {"file": _STRING}},
        "tables": {"type": ["object", "null"], "additionalProperties": {
            "type": "object",
            "required": ["citation", "fields", "rows"],
            "properties": {
                "citation": _STRING,
                "fields": {"type": "object", "additionalProperties": {
                    "type": "object", "required": ["unit"], "properties": {"unit": _STRING}}},
                "rows": {"type": "array", "items": {
                    "type": "object", "required": ["id", "row"],
                    "properties": {"id": _STRING, "row": _STRING}}},
                # the cited document's address (modern*.yaml)
                "url": _STRING,
            }}},
        "facts": {"type": ["array", "null"], "items": {
            "type": "object",
            "required": ["id", "value", "unit", "citation"],
            "properties": {
                "id": _STRING, "unit": _STRING, "citation": _STRING, "url": _STRING,
                # one figure, or the list of values a document tested
                "value": {"type": ["number", "array"], "items": _NUMBER},
            }}},
    },
}

#: one performance variable's rule in thresholds.yaml
RULE_SCHEMA = {
    "type": "object",
    "required": ["ref", "lower", "upper", "unit"],
    "additionalProperties": False,
    "properties": {
        "ref": _STRING,
        "lower": {"type": ["number", "null"]},
        "upper": {"type": ["number", "null"]},
        "unit": _STRING,
        "scale": _NUMBER,
        "per_line_rate_mbps": _NUMBER,
    },
}

#: the `sweep:` section: the rule that names a slow node or link
#: (netbench/fleet/judge.py); the ranges are what the rule means, e.g. a
#: bandwidth fraction of 1 or more would name half of every fleet
SWEEP_SCHEMA = {
    "type": "object",
    "required": ["latency_factor", "mad_multiple", "node_majority",
                 "node_min_bad_pairs", "line_rate_fraction", "fleet_fraction",
                 "confirm_partners", "min_other_pairs"],
    "additionalProperties": False,
    "properties": {
        "latency_factor": {"type": "number", "exclusiveMinimum": 1},
        "mad_multiple": {"type": "number", "minimum": 0},
        "node_majority": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        "node_min_bad_pairs": {"type": "integer", "minimum": 1},
        "line_rate_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "fleet_fraction": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "confirm_partners": {"type": "integer", "minimum": 0},
        "min_other_pairs": {"type": "integer", "minimum": 1},
    },
}

#: the transport group an RDMA class judges (thresholds.yaml `judges:`)
RDMA_GROUP = "rdma"
#: {check kind: {transport group: {variable: rule}}}
_KINDS = {"type": "object", "additionalProperties": {
    "type": "object", "additionalProperties": RULE_SCHEMA}}
#: what an RDMA class adds: the group it judges, and the class that judges
#: its partition's TCP cases
_RDMA_PROPERTIES = {"judges": {"enum": [RDMA_GROUP]}, "tcp_class": _STRING}
#: the RDMA devices an RDMA class is for, when a partition declares
#: `interconnect: auto` (netbench/probe/fabric.py choose_rdma_class)
_DEVICE_MATCH = {"type": "object", "required": ["device", "mbps"],
                 "additionalProperties": False, "properties": {
                     "device": {"type": "array", "minItems": 1,
                                "items": {"enum": list(DEVICE_KINDS)}},
                     "mbps": {"type": "array", "minItems": 1,
                              "items": {"type": "number", "exclusiveMinimum": 0}},
                 }}

THRESHOLDS_SCHEMA = {
    "type": "object",
    "required": ["transport_groups", "classes"],
    "additionalProperties": False,
    "properties": {
        "sweep": SWEEP_SCHEMA,
        "transport_groups": {"type": "object", "additionalProperties": _STRING},
        "classes": {"type": "object", "additionalProperties": {
            # description, then {check kind: {transport group: {variable: rule}}}
            "type": "object",
            "properties": {
                "description": _STRING,
                # the discovered links this class is for, when a partition
                # declares `interconnect: auto` (netbench/probe/linerate.py)
                "match": {"type": "object", "required": ["link_layer", "mbps"],
                          "additionalProperties": False, "properties": {
                              "link_layer": {"type": "array", "minItems": 1,
                                             "items": {"enum": list(LINK_LAYERS)}},
                              "mbps": {"type": "array", "minItems": 1,
                                       "items": {"type": "number", "exclusiveMinimum": 0}},
                          }},
                "device_match": _DEVICE_MATCH,
                **_RDMA_PROPERTIES,
            },
            "additionalProperties": _KINDS,
        }},
        # one definition expanded to a class per line rate (expand_rate_classes)
        "rate_classes": {"type": "object", "additionalProperties": {
            "type": "object",
            "required": ["description", "rates"],
            "properties": {
                "description": _STRING,
                "link_layer": {"enum": list(LINK_LAYERS)},
                # an RDMA family's device kind: its `device_match` per rate
                "device": {"enum": list(DEVICE_KINDS)},
                "rates": {"type": "object", "minProperties": 1, "additionalProperties": {
                    "type": "number", "exclusiveMinimum": 0}},
                **_RDMA_PROPERTIES,
            },
            "additionalProperties": _KINDS,
        }},
    },
}

#: the keys of a class that are no check kind
CLASS_KEYS = ("description", "match", "device_match", "judges", "tcp_class")

#: the classes links.yaml gives a virtual cluster's partition besides its
#: `classes`: an unshaped link, and a shaped rate no class has
LINKS_SCHEMA = {
    "type": "object",
    "required": ["unshaped_interconnect", "other_rates_interconnect", "classes"],
    "properties": {
        "unshaped_interconnect": _STRING,
        "other_rates_interconnect": _STRING,
        "classes": {"type": "object"},
    },
}


@dataclasses.dataclass(frozen=True)
class Figure:
    key: str          # seed000_e325_netpipe#table1/intranode.myrinet.mpi/latency_us
    value: object
    unit: str
    citation: str     # seed file, table or section, row

    def __str__(self):
        return f"{self.value} {self.unit} ({self.citation})"


@dataclasses.dataclass(frozen=True)
class Threshold:
    variable: str
    figure: Figure
    lower: object     # fraction of the figure, or None
    upper: object
    unit: str
    scale: float = 1.0
    #: the line rate the figure was measured on: the reference is then the
    #: figure times (partition's line rate / this); None: an absolute figure
    per_line_rate_mbps: float = None

    @property
    def reference(self):
        """ReFrame's (value, lower, upper, unit) tuple."""
        return (self.figure.value * self.scale, self.lower, self.upper, self.unit)


def _seed_figures(path):
    data = validate_schema(load_yaml(path), SEED_SCHEMA, path)
    stem = Path(path).stem
    seed_file = data["source"]["file"]
    figures = {}
    for tname, table in (data.get("tables") or {}).items():
        where = f"tables.{tname}"
        citation, fields = cited(seed_file, table), table["fields"]
        seen = set()
        for i, row in enumerate(table["rows"]):
            rwhere = f"{where}.rows[{i}]"
            rid, label = row["id"], row["row"]
            if rid in seen:
                raise DataError(path, f"{rwhere}.id", f"duplicate row id {rid!r}")
            seen.add(rid)
            for fname, spec in fields.items():
                value = require(row, fname, NUMBER, path, rwhere)
                key = f"{stem}#{tname}/{rid}/{fname}"
                figures[key] = Figure(key, value, spec["unit"], f"{citation}, row {label}")
    for i, fact in enumerate(data.get("facts") or []):
        key = f"{stem}#facts/{fact['id']}"
        figures[key] = Figure(key, fact["value"], fact["unit"], cited(seed_file, fact))
    return figures


def cited(seed_file, entry):
    """A table's or fact's citation: a seed's text file first; a published
    document by its title and address (`url`)."""
    if entry.get("url"):
        return f"{entry['citation']}, {entry['url']}"
    return f"{seed_file}, {entry['citation']}"


@functools.lru_cache(maxsize=None)
def load_figures(folder=paths.REFERENCES):
    """Every documented figure, keyed `<seed yaml stem>#<table>/<row>/<field>`
    or `<stem>#facts/<id>`."""
    figures = {}
    for pattern in FIGURE_FILES:
        for path in sorted(Path(folder).glob(pattern)):
            figures.update(_seed_figures(path))
    return figures


def _threshold(path, where, variable, rule, figures):
    ref = rule["ref"]
    if ref not in figures:
        raise DataError(path, f"{where}.ref", f"no documented figure {ref!r}")
    figure = figures[ref]
    if isinstance(figure.value, list):
        raise DataError(path, f"{where}.ref", f"{ref!r} is a list of values, not one figure")
    scale = rule.get("scale", 1.0)
    for key in ("scale", "per_line_rate_mbps"):
        if key in rule and rule[key] <= 0:
            raise DataError(path, f"{where}.{key}", f"expected a positive number, got "
                                                    f"{rule[key]!r}")
    # ReFrame's rules (reference_bounds): bounds are fractions of the
    # reference; below a positive reference lower is -1..0, upper >= 0
    # (a negative reference: lower <= 0, upper 0..1)
    positive = figure.value * scale >= 0
    lower, upper = rule["lower"], rule["upper"]
    if lower is not None and not (-1 <= lower <= 0 if positive else lower <= 0):
        raise DataError(path, f"{where}.lower", f"{lower!r}: expected a fraction "
                        f"{'from -1 ' if positive else ''}to 0 below the figure, or null "
                        f"(ReFrame refuses it)")
    if upper is not None and not (upper >= 0 if positive else 0 <= upper <= 1):
        raise DataError(path, f"{where}.upper", f"{upper!r}: expected a fraction from 0 "
                        f"{'' if positive else 'to 1 '}above the figure, or null "
                        f"(ReFrame refuses it)")
    return Threshold(variable, figure, lower, upper, rule["unit"], float(scale),
                     rule.get("per_line_rate_mbps"))


def _format_rate(text, mbps):
    """A rate class's text for one rate: `{gbps}` is the rate in Gbit/s."""
    return text.replace("{gbps}", f"{mbps / 1000:g}")


def expand_rate_classes(data, path):
    """{class: its definition} of thresholds.yaml: `classes` as written,
    and each `rate_classes` entry expanded to one class per rate (its
    `match` from `link_layer`, where given), with the place each came from;
    a name defined twice is refused."""
    classes = {name: (spec, f"classes.{name}") for name, spec in data["classes"].items()}
    for family, spec in (data.get("rate_classes") or {}).items():
        for name, mbps in spec["rates"].items():
            where = f"rate_classes.{family}.rates.{name}"
            if name in classes:
                raise DataError(path, where, f"class {name!r} is also defined at "
                                             f"{classes[name][1]}")
            expanded = {k: v for k, v in spec.items()
                        if k not in ("rates", "link_layer", "device")}
            expanded["description"] = _format_rate(spec["description"], mbps)
            if "tcp_class" in spec:
                expanded["tcp_class"] = _format_rate(spec["tcp_class"], mbps)
            if "link_layer" in spec:
                expanded["match"] = {"link_layer": [spec["link_layer"]], "mbps": [mbps]}
            if "device" in spec:
                expanded["device_match"] = {"device": [spec["device"]], "mbps": [mbps]}
            classes[name] = (expanded, where)
    return classes


def _check_rdma_class(path, where, cname, spec, classes):
    """An RDMA class judges the `rdma` group only, and names an existing
    class that is no RDMA class for its partition's TCP cases."""
    groups = {g for kind, by_group in spec.items() if kind not in CLASS_KEYS
              for g in by_group}
    if groups - {RDMA_GROUP}:
        raise DataError(path, where, f"RDMA class {cname!r} documents transport groups "
                                     f"{sorted(groups - {RDMA_GROUP})}: it judges only "
                                     f"{RDMA_GROUP!r}; TCP cases go to its tcp_class")
    tcp_class = spec.get("tcp_class")
    if tcp_class is not None and (tcp_class not in classes
                                  or classes[tcp_class][0].get("judges")):
        raise DataError(path, f"{where}.tcp_class", f"{tcp_class!r} is no TCP class of "
                                                    f"{path}")


@functools.lru_cache(maxsize=None)
def _load_thresholds(folder):
    path = Path(folder) / THRESHOLDS_FILE
    figures = load_figures(folder)
    data = validate_schema(load_yaml(path), THRESHOLDS_SCHEMA, path)
    table = {}
    classes = expand_rate_classes(data, path)
    if AUTO_CLASS in classes:
        raise DataError(path, classes[AUTO_CLASS][1], "reserved: a partition declaring it "
                                                      "has its class chosen by `match`")
    for cname, (checks, cwhere) in classes.items():
        if checks.get("judges"):
            _check_rdma_class(path, cwhere, cname, checks, classes)
        elif "device_match" in checks:
            raise DataError(path, f"{cwhere}.device_match", "only an RDMA class (judges: "
                                                            "rdma) is chosen by its devices")
        for kind, by_group in checks.items():
            if kind in CLASS_KEYS:
                continue
            for group, variables in by_group.items():
                where = f"{cwhere}.{kind}.{group}"
                table[(cname, kind, group)] = {
                    var: _threshold(path, f"{where}.{var}", var, rule, figures)
                    for var, rule in variables.items()}
    specs = {cname: spec for cname, (spec, _) in classes.items()}
    wheres = {cname: where for cname, (_, where) in classes.items()}
    return table, dict(data["transport_groups"]), tuple(classes), specs, wheres


def load_thresholds(folder=paths.REFERENCES):
    """{(class, check kind, transport group): {variable: Threshold}} and the
    transport -> group map."""
    table, groups, *_ = _load_thresholds(folder)
    return table, groups


def interconnect_classes(folder=paths.REFERENCES):
    """Every class of thresholds.yaml."""
    return sorted(_load_thresholds(folder)[2])


@functools.lru_cache(maxsize=None)
def class_matches(folder=paths.REFERENCES):
    """{class: its `match`} of the classes a discovered link can select
    (`interconnect: auto`), in the file's order."""
    _, _, _, specs, wheres = _load_thresholds(folder)          # validated there
    path = Path(folder) / THRESHOLDS_FILE
    matches, seen = {}, {}
    for cname, spec in specs.items():
        if "match" not in spec:
            continue
        for link in ((layer, float(mbps)) for layer in spec["match"]["link_layer"]
                     for mbps in spec["match"]["mbps"]):
            if link in seen:
                where = wheres[cname]
                raise DataError(path, f"{where}.match" if where.startswith("classes.") else where,
                                f"the same links as class {seen[link]!r}")
            seen[link] = cname
        matches[cname] = spec["match"]
    return matches


@functools.lru_cache(maxsize=None)
def rdma_class_matches(folder=paths.REFERENCES):
    """{RDMA class: its `device_match`} of the classes `interconnect: auto`
    can choose for the RDMA transports' cases, in the file's order; two
    classes matching the same device kind and rate are refused."""
    _, _, _, specs, wheres = _load_thresholds(folder)          # validated there
    path = Path(folder) / THRESHOLDS_FILE
    matches, seen = {}, {}
    for cname, spec in specs.items():
        if "device_match" not in spec:
            continue
        for device in ((kind, float(mbps)) for kind in spec["device_match"]["device"]
                       for mbps in spec["device_match"]["mbps"]):
            if device in seen:
                where = wheres[cname]
                raise DataError(path, f"{where}.device_match" if where.startswith("classes.")
                                else where, f"the same devices as class {seen[device]!r}")
            seen[device] = cname
        matches[cname] = spec["device_match"]
    return matches


def is_rdma_transport(transport, folder=paths.REFERENCES):
    return transport_group(transport, folder) == RDMA_GROUP


def transport_group(transport, folder=paths.REFERENCES):
    """`shm`, `network`, or the transport itself when unmapped (e.g. `raw`)."""
    _, groups = load_thresholds(folder)
    return groups.get(transport, transport)


def class_definition(cname, folder=paths.REFERENCES):
    """The definition of class `cname` as thresholds.yaml gives it, a rate
    class expanded (expand_rate_classes: its `match` from its link layer
    and rate), validated; None for a name the file does not define (a
    partition that declares no class)."""
    spec = _load_thresholds(folder)[3].get(cname)
    return copy.deepcopy(spec) if spec is not None else None


def rdma_classes(folder=paths.REFERENCES):
    """The RDMA classes (`judges: rdma`): a partition declaring one runs
    its jobs over the fabric's own data path."""
    return sorted(c for c, spec in _load_thresholds(folder)[3].items() if spec.get("judges"))


def judging_class(interconnect, transport, folder=paths.REFERENCES):
    """The class whose figures judge `transport`'s case on a partition of
    class `interconnect`: the class itself, except that an RDMA class hands
    its partition's TCP cases to its `tcp_class` (none: no class judges
    them), so that an RDMA figure never judges a TCP case."""
    spec = _load_thresholds(folder)[3].get(interconnect) or {}
    if not spec.get("judges") or transport_group(transport, folder) == spec["judges"]:
        return interconnect
    return spec.get("tcp_class", "")


def thresholds_for(interconnect, kind, transport, folder=paths.REFERENCES,
                   line_rate_mbps=None):
    """{variable: Threshold} for a check of `kind` using `transport` on a
    partition of class `interconnect`; empty where nothing is documented.
    A rule whose figure was measured on a line rate (`per_line_rate_mbps`)
    is scaled to the partition's `line_rate_mbps`, and left out without one."""
    table, _ = load_thresholds(folder)
    interconnect = judging_class(interconnect, transport, folder)
    out = {}
    for var, th in table.get((interconnect, kind, transport_group(transport, folder)),
                             {}).items():
        if th.per_line_rate_mbps is not None:
            if not line_rate_mbps:
                continue
            th = dataclasses.replace(
                th, scale=th.scale * float(line_rate_mbps) / th.per_line_rate_mbps)
        out[var] = th
    return out


def missing_thresholds(interconnect, kind, transport, folder=paths.REFERENCES):
    """None when a check of `kind` using `transport` on a partition of class
    `interconnect` can be judged, or is informational by design (no class
    documents that kind and transport group); else one line saying why it
    cannot be judged."""
    table, _, classes, *_ = _load_thresholds(folder)
    path = Path(folder) / THRESHOLDS_FILE
    if not interconnect:
        return (f"the partition declares no interconnect class (extras.interconnect; "
                f"classes of {path}: {', '.join(sorted(classes))})")
    if interconnect not in classes:
        return (f"interconnect class {interconnect!r} is not in {path} "
                f"(classes: {', '.join(sorted(classes))})")
    judging = judging_class(interconnect, transport, folder)
    if not judging:
        return (f"RDMA class {interconnect!r} names no tcp_class in {path} for the TCP "
                f"transport {transport}")
    interconnect = judging
    group = transport_group(transport, folder)
    if (interconnect, kind, group) in table:
        return None
    others = sorted(c for c, k, g in table if (k, g) == (kind, group))
    if not others:
        return None
    if group == RDMA_GROUP:
        return undeclared_rdma_class(f"interconnect class {interconnect!r} judges no RDMA "
                                     f"transport", folder)
    via = f"transport group {group}" if group != transport else f"transport {transport}"
    return (f"interconnect class {interconnect!r} has no {kind} thresholds for {via} in "
            f"{path} (documented for {', '.join(others)})")


def undeclared_rdma_class(why, folder=paths.REFERENCES):
    """Why an RDMA transport's case is not judged, and the fix: the site
    file's partition declares its RDMA class (whose tcp_class then judges
    its TCP cases)."""
    return (f"{why}; declare the partition's RDMA class in the site file "
            f"(extras.interconnect: one of {', '.join(rdma_classes(folder))})")


#: the field of a table row that gives the message size its figures were
#: seen at (seed 000's Table 1 prints NetPIPE's sizes in bytes under a
#: "bits" header; kept as printed)
MESSAGE_SIZE_FIELD = "message_size_bits"


def figure_message_size(figure, folder=paths.REFERENCES):
    """The message size in bytes that the source gives beside `figure` (the
    same table row's MESSAGE_SIZE_FIELD), None where it gives none."""
    table_row = figure.key.rsplit("/", 1)[0]
    size = load_figures(folder).get(f"{table_row}/{MESSAGE_SIZE_FIELD}")
    return float(size.value) if size and not isinstance(size.value, list) else None


def link_classes(path=LINKS_FILE):
    """{dotted key in links.yaml: class} of every interconnect class the
    virtual cluster can give its partition."""
    data = validate_schema(load_yaml(path), LINKS_SCHEMA, path)
    out = {key: data[key] for key in ("unshaped_interconnect", "other_rates_interconnect")}
    out.update({f"classes.{name}": name for name in data["classes"]})
    return out


@dataclasses.dataclass(frozen=True)
class SweepThresholds:
    """The parameters of the sweep's rule (thresholds.yaml `sweep:`, whose
    comments give each one's reason), and the pair floor: 1 less the
    verdict model's smallest change that counts against the fleet
    (judging.yaml min_change.fleet, or a profile's)."""
    bandwidth_fraction: float
    latency_factor: float
    mad_multiple: float
    node_majority: float
    node_min_bad_pairs: int
    line_rate_fraction: float
    fleet_fraction: float
    confirm_partners: int
    min_other_pairs: int


@functools.lru_cache(maxsize=None)
def sweep_thresholds(folder=paths.REFERENCES, profile=None):
    """thresholds.yaml's `sweep:` section, checked by SWEEP_SCHEMA, with the
    pair floor of the knobs of `folder` and `profile`; DataError naming
    the file and key otherwise."""
    path = Path(folder) / THRESHOLDS_FILE
    data = validate_schema(load_yaml(path), THRESHOLDS_SCHEMA, path)
    if "sweep" not in data:
        raise DataError(path, "sweep", "missing")
    fleet_change = judging_knobs.load(folder, profile).min_change["fleet"]
    return SweepThresholds(bandwidth_fraction=1 - fleet_change, **data["sweep"])


def validate(folder=paths.REFERENCES, links=LINKS_FILE):
    """Load everything, raising DataError on the first problem; every class
    links.yaml can produce must have thresholds."""
    load_figures.cache_clear()
    _load_thresholds.cache_clear()
    sweep_thresholds.cache_clear()
    class_matches.cache_clear()
    rdma_class_matches.cache_clear()
    figures = load_figures(folder)
    table, _ = load_thresholds(folder)
    sweep_thresholds(folder)
    # the verdict model's knobs, and every profile beside them
    judging_knobs.load(folder)
    for profile in sorted((Path(folder) / judging_knobs.PROFILES.name).glob("*.yaml")):
        judging_knobs.load(folder, str(profile))
    class_matches(folder)
    rdma_class_matches(folder)
    classes = interconnect_classes(folder)
    for key, cname in link_classes(links).items():
        if cname not in classes:
            raise DataError(links, key, f"class {cname!r} has no thresholds in "
                                        f"{Path(folder) / THRESHOLDS_FILE}")
    return figures, table

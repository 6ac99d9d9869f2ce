"""Documented reference figures and the thresholds checks are held to.

`reframe_checks/references/seed*.yaml` hold the source documents' figures,
each with its citation; `thresholds.yaml` says which figure each
performance variable is compared with per interconnect class.  Every
malformed entry raises DataError naming the file and the key.
"""

import dataclasses
import functools
from pathlib import Path

from . import paths
from .datafiles import DataError, load_yaml, require

THRESHOLDS_FILE = "thresholds.yaml"
NUMBER = (int, float)


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

    @property
    def reference(self):
        """ReFrame's (value, lower, upper, unit) tuple."""
        return (self.figure.value * self.scale, self.lower, self.upper, self.unit)


def _seed_figures(path):
    data = load_yaml(path)
    stem = Path(path).stem
    source = require(data, "source", dict, path, "")
    seed_file = require(source, "file", str, path, "source")
    figures = {}
    for tname, table in (data.get("tables") or {}).items():
        where = f"tables.{tname}"
        citation = require(table, "citation", str, path, where)
        fields = require(table, "fields", dict, path, where)
        for fname, spec in fields.items():
            require(spec, "unit", str, path, f"{where}.fields.{fname}")
        rows = require(table, "rows", list, path, where)
        seen = set()
        for i, row in enumerate(rows):
            rwhere = f"{where}.rows[{i}]"
            rid = require(row, "id", str, path, rwhere)
            label = require(row, "row", str, path, rwhere)
            if rid in seen:
                raise DataError(path, f"{rwhere}.id", f"duplicate row id {rid!r}")
            seen.add(rid)
            for fname, spec in fields.items():
                value = require(row, fname, NUMBER, path, rwhere)
                key = f"{stem}#{tname}/{rid}/{fname}"
                figures[key] = Figure(key, value, spec["unit"],
                                      f"{seed_file}, {citation}, row {label}")
    for i, fact in enumerate(data.get("facts") or []):
        where = f"facts[{i}]"
        fid = require(fact, "id", str, path, where)
        if "value" not in fact:
            raise DataError(path, f"{where}.value", "missing")
        unit = require(fact, "unit", str, path, where)
        citation = require(fact, "citation", str, path, where)
        key = f"{stem}#facts/{fid}"
        figures[key] = Figure(key, fact["value"], unit, f"{seed_file}, {citation}")
    return figures


@functools.lru_cache(maxsize=None)
def load_figures(folder=paths.REFERENCES):
    """Every documented figure, keyed `<seed yaml stem>#<table>/<row>/<field>`
    or `<stem>#facts/<id>`."""
    figures = {}
    for path in sorted(Path(folder).glob("seed*.yaml")):
        figures.update(_seed_figures(path))
    return figures


def _threshold(path, where, variable, rule, figures):
    ref = require(rule, "ref", str, path, where)
    if ref not in figures:
        raise DataError(path, f"{where}.ref", f"no documented figure {ref!r}")
    bounds = {}
    for side in ("lower", "upper"):
        if side not in rule:
            raise DataError(path, f"{where}.{side}", "missing (use null for unbounded)")
        value = rule[side]
        if value is not None and (not isinstance(value, NUMBER) or isinstance(value, bool)):
            raise DataError(path, f"{where}.{side}", f"expected a number or null, got {value!r}")
        bounds[side] = value
    unit = require(rule, "unit", str, path, where)
    scale = float(rule.get("scale", 1.0))
    return Threshold(variable, figures[ref], bounds["lower"], bounds["upper"], unit, scale)


@functools.lru_cache(maxsize=None)
def load_thresholds(folder=paths.REFERENCES):
    """{(class, check kind, transport group): {variable: Threshold}} and the
    transport -> group map."""
    path = Path(folder) / THRESHOLDS_FILE
    figures = load_figures(folder)
    data = load_yaml(path)
    groups = require(data, "transport_groups", dict, path, "")
    classes = require(data, "classes", dict, path, "")
    table = {}
    for cname, checks in classes.items():
        require(classes, cname, dict, path, "classes")
        for kind, by_group in checks.items():
            if kind == "description":
                continue
            for group, variables in require(checks, kind, dict, path,
                                            f"classes.{cname}").items():
                where = f"classes.{cname}.{kind}.{group}"
                require(checks[kind], group, dict, path, f"classes.{cname}.{kind}")
                table[(cname, kind, group)] = {
                    var: _threshold(path, f"{where}.{var}", var, rule, figures)
                    for var, rule in variables.items()}
    return table, dict(groups)


def interconnect_classes(folder=paths.REFERENCES):
    table, _ = load_thresholds(folder)
    return sorted({cls for cls, _, _ in table})


def transport_group(transport, folder=paths.REFERENCES):
    """`shm`, `network`, or the transport itself when unmapped (e.g. `raw`)."""
    _, groups = load_thresholds(folder)
    return groups.get(transport, transport)


def thresholds_for(interconnect, kind, transport, folder=paths.REFERENCES):
    """{variable: Threshold} for a check of `kind` using `transport` on a
    partition of class `interconnect`; empty where nothing is documented."""
    table, _ = load_thresholds(folder)
    return table.get((interconnect, kind, transport_group(transport, folder)), {})


def validate(folder=paths.REFERENCES):
    """Load everything, raising DataError on the first problem."""
    load_figures.cache_clear()
    load_thresholds.cache_clear()
    figures = load_figures(folder)
    table, _ = load_thresholds(folder)
    return figures, table

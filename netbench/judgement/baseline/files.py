"""A baseline's file: its schema, its name from the partition's, and how
it is written (atomically, checked first), read and shown."""

import math
import re
from pathlib import Path

import yaml

from ... import datafiles, paths, safefile
from ...datafiles import DataError
from ...probe.discovery import ENVIRONMENT_NAME
from ..model import Bound


BASELINES = paths.BASELINES
VERSION = 1


#: the column a baseline holds: time per message (usec), and its unit
COLUMN, UNIT = "usec", "us"


#: what ReFrame allows a system's or a partition's name to be (its
#: configuration schema's alphanum_ext_string, as for an environment's): a
#: baseline's file name is built from them, so nothing else is accepted
NAME = re.compile(ENVIRONMENT_NAME)
_NAME = {"type": "string", "pattern": f"^{NAME.pattern}$",
         "description": "expected a ReFrame system or partition name (letters, digits, _ and -)"}
_NUMBER = {"type": "number", "exclusiveMinimum": 0}
SIZE_SCHEMA = {
    "type": "object", "required": ["bytes", "centre", "low", "high", "upper"],
    "additionalProperties": False,
    "properties": {"bytes": {"type": "number", "minimum": 0}, "centre": _NUMBER,
                   "low": _NUMBER, "high": _NUMBER, "upper": _NUMBER}}
SCHEMA = {
    "type": "object", "required": ["version", "system", "partition", "accepted", "cases"],
    "additionalProperties": False,
    "properties": {
        "version": {"type": "integer", "minimum": 1, "maximum": VERSION,
                    "description": f"expected a baseline version up to {VERSION}"},
        "system": _NAME, "partition": _NAME,
        "accepted": {"type": "string"},
        "min_band": {"type": "number", "minimum": 0, "maximum": 1},
        "sessions": {"type": "array", "items": {"type": "object"}},
        "cases": {"type": "array", "items": {
            "type": "object", "required": ["case", "environ", "column", "unit", "runs",
                                           "sizes"],
            "additionalProperties": False,
            "properties": {
                "case": {"type": "string"}, "environ": {"type": "string"},
                "column": {"enum": [COLUMN]}, "unit": {"enum": [UNIT]},
                "runs": {"type": "integer", "minimum": 1},
                "cpu_pressure": {"type": "number", "minimum": 0, "maximum": 100},
                "core_round_trip_ns": {"type": "number", "exclusiveMinimum": 0},
                "mpi": {"type": "string"}, "transport": {"type": "string"},
                "sizes": {"type": "array", "minItems": 1, "items": SIZE_SCHEMA}}}},
    },
}


def case_name(tc):
    """A case as a baseline names it: its display name without ReFrame's
    hash (`PingPong %variant=blocking %transport=shm %placement=intranode`)."""
    return re.sub(r"\s*/[0-9a-f]{8}$", "", tc.get("display_name") or tc.get("name", ""))


def partition_of(tc):
    return f"{tc.get('system')}:{tc.get('partition')}"


def check_partition_name(partition):
    """`partition` (`system:partition`) as two ReFrame names; ValueError
    saying what is wrong otherwise."""
    system, _, part = str(partition).partition(":")
    for what, name in (("system", system), ("partition", part)):
        if not NAME.fullmatch(name):
            raise ValueError(f"{what} {name!r} of {partition!r} is not a ReFrame {what} name "
                             f"(letters, digits, _ and -, not starting with a digit or -)")
    return system, part


def file_for(partition, folder=BASELINES):
    """The baseline file of `partition` inside `folder`: `<system>-<partition>
    .yaml`, or `<system>+<partition>.yaml` when the system's name holds a
    `-`, so that no two partitions share a file (`a-b:c` and `a:b-c` would
    both be `a-b-c`; ReFrame's names never hold a `+`).  ValueError for a
    name ReFrame would not allow (a path, `..`, a control character)."""
    system, part = check_partition_name(partition)
    joint = "+" if "-" in system else "-"
    return safefile.child(folder, f"{system}{joint}{part}.yaml")


class Unfit(DataError):
    """A baseline built that could not judge (check): not written."""


#: the YAML dumper: libyaml's where PyYAML has it, the same output either way
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
HEADER = ("# netbench baseline (netbench baseline accept): what this partition's own\n"
          "# accepted runs measured; a site commits it.  netbench/judgement/baseline/\n")


#: a case's empty sizes as dumped (dumped), and where its sizes go instead
_EMPTY_SIZES = re.compile(r"^( *)sizes: \[\]$", re.MULTILINE)


def yaml_number(value):
    """A checked (finite) number as PyYAML's SafeRepresenter writes it: a
    float keeps a `.` before its exponent (YAML 1.1 reads `1e-05` as text)."""
    if type(value) is int:
        return str(value)
    text = repr(value).lower()
    return text.replace("e", ".0e", 1) if "." not in text and "e" in text else text


def dumped(baseline):
    """The YAML of a checked baseline.  PyYAML represents 240,000 sizes in
    pure Python (18 s for a 10,000-case session): the cases are dumped by
    PyYAML without their sizes, and each size, numbers only, is written as
    the flow mapping PyYAML would write.  A case whose text made the dump
    ambiguous (a line that reads like an empty `sizes`) is dumped whole by
    PyYAML."""
    def dump(data):
        return yaml.dump(data, Dumper=DUMPER, sort_keys=False, default_flow_style=None,
                         width=100)
    cases = baseline["cases"]
    text = dump({**baseline, "cases": [{**case, "sizes": []} for case in cases]})
    found = list(_EMPTY_SIZES.finditer(text))
    if len(found) != len(cases):
        return HEADER + dump(baseline)
    out, last = [HEADER], 0
    for match, case in zip(found, cases):
        indent = match.group(1)
        out += [text[last:match.start()], f"{indent}sizes:\n"]
        out += [f"{indent}- {{" + ", ".join(f"{key}: {yaml_number(value)}"
                                            for key, value in size.items()) + "}\n"
                for size in case["sizes"]]
        last = match.end() + 1
    out.append(text[last:])
    return "".join(out)


def write(baseline, folder=BASELINES):
    """Write the baseline file, checked first as `load` checks one (check):
    a baseline that could not judge is refused (DataError naming the key)
    and the file there is left as it was.  Written by safefile.atomic_write
    (a file created exclusively beside it, renamed: never through a link
    planted there).  `folder` is made if its parent exists; a folder that
    cannot be made or written is a DataError naming it.  Its path."""
    try:
        path = file_for(f"{baseline['system']}:{baseline['partition']}", folder)
    except ValueError as err:
        raise DataError(folder, None, str(err)) from err
    try:
        check(baseline, path)
    except DataError as err:
        raise Unfit(err.path, err.key, err.problem) from err
    text = dumped(baseline)
    try:
        Path(folder).mkdir(exist_ok=True)        # no tree from a typo: its parent must exist
        safefile.atomic_write(path, text)
    except OSError as err:
        raise DataError(err.filename or folder, None,
                        f"cannot write the baseline: {err.strerror}") from err
    return path


def load(path):
    """A baseline file, checked (check): DataError naming the file and key."""
    return check(datafiles.load_yaml(path), Path(path))


#: SCHEMA less its sizes, which check_sizes checks (a 10,000-case baseline
#: holds 240,000 of them: jsonschema would take most of a minute)
_CASES_SCHEMA = {**SCHEMA, "properties": {**SCHEMA["properties"], "cases": {
    **SCHEMA["properties"]["cases"], "items": {
        **SCHEMA["properties"]["cases"]["items"], "properties": {
            **SCHEMA["properties"]["cases"]["items"]["properties"],
            "sizes": {"type": "array", "minItems": 1}}}}}}
_SIZE_KEYS = frozenset(SIZE_SCHEMA["properties"])


def check(data, path):
    """A baseline (read from, or to be written to, `path`) as one that can
    judge: SCHEMA, every figure finite, a band's low <= centre <= high <=
    upper, and the system and partition it names those of its file's name
    (file_for): a baseline renamed or copied to another partition's name
    judges nothing.  DataError naming the file and key; `data` otherwise."""
    datafiles.validate(data, _CASES_SCHEMA, path)
    for i, case in enumerate(data["cases"]):
        check_sizes(case["sizes"], path, ("cases", i, "sizes"))
    named = f"{data['system']}:{data['partition']}"
    if file_for(named, path.parent).name != path.name:
        raise DataError(path, "system", f"holds the baseline of {named}, whose file is "
                                        f"{file_for(named, path.parent).name}: a baseline "
                                        f"judges only the partition it names")
    return data


def plain_size(size):
    """True only for a size SIZE_SCHEMA accepts whose figures are finite."""
    return type(size) is dict and size.keys() == _SIZE_KEYS \
        and all(type(v) in (int, float) and math.isfinite(v) and v > 0
                for k, v in size.items() if k != "bytes") \
        and type(size["bytes"]) in (int, float) and 0 <= size["bytes"] < math.inf


def check_sizes(sizes, path, where):
    for j, size in enumerate(sizes):
        key = (*where, j)
        if not plain_size(size):
            datafiles.validate(size, SIZE_SCHEMA, path, key)
            bad = next((k for k, v in size.items() if not math.isfinite(v)), None)
            raise DataError(path, datafiles.dotted((*key, bad) if bad else key),
                            f"not a finite number: {size[bad]}" if bad else
                            "expected finite numbers")
        if not size["low"] <= size["centre"] <= size["high"] <= size["upper"]:
            raise DataError(path, datafiles.dotted(key),
                            "a band needs low <= centre <= high <= upper")


def for_partition(partition, folder=BASELINES):
    """The loaded baseline of `partition`, or None when it has none."""
    try:
        path = file_for(partition, folder)
    except ValueError:
        return None     # no baseline is ever written for a name ReFrame would not allow
    return load(path) if path.exists() else None


def case_of(baseline, name, environ):
    """The baseline's entry of case `name` on `environ`, or None."""
    for case in (baseline or {}).get("cases", []):
        if case["case"] == name and case["environ"] == environ:
            return case
    return None


def case_bounds(case):
    """{bytes: Bound} a case's entry (case_of) holds it to; {} for None."""
    return {s["bytes"]: Bound("upper", s["upper"]) for s in (case or {}).get("sizes", [])}


def show(baseline):
    """Lines for `netbench baseline show`."""
    lines = [f"{baseline['system']}:{baseline['partition']}: accepted {baseline['accepted']} "
             f"from {len(baseline.get('sessions', []))} sessions "
             f"({', '.join(s.get('name', '') for s in baseline.get('sessions', []))})"]
    for case in baseline["cases"]:
        pressure = (f"; CPU pressure {case['cpu_pressure']:g} %"
                    if case.get("cpu_pressure") is not None else "")
        trip = (f"; core round trip up to {case['core_round_trip_ns']:g} ns"
                if case.get("core_round_trip_ns") is not None else "")
        lines.append(f"  {case['case']} @ {case['environ']} ({case.get('mpi', '')}; "
                     f"{case['runs']} runs{pressure}{trip})")
        for s in case["sizes"]:
            lines.append(f"    {int(s['bytes']):>9} B  {s['centre']:.4g} {case['unit']}  "
                         f"band {s['low']:.4g}-{s['high']:.4g}, fails above {s['upper']:.4g}")
    return lines

"""The verdict model's knobs: reframe_checks/references/judging.yaml, and
the profiles that override some of them (a site's, the virtual cluster's).

The data file is the only default: the code has none of its own.  A file
with an unknown key, a wrong type or a value out of range is refused with
one line naming the file and the key (datafiles.DataError)."""

import dataclasses
import functools
from pathlib import Path

from .. import paths
from ..datafiles import DataError, checked_unquoted, load_yaml, validate

KNOBS_FILE = paths.REFERENCES / "judging.yaml"
PROFILES = paths.REFERENCES / "profiles"
REFERENCE_KINDS = ("threshold", "baseline", "paired", "session", "fleet")

_FRACTION = {"type": "number", "minimum": 0, "maximum": 1}
_PERCENT = {"type": "number", "minimum": 0, "maximum": 100}


def _section(properties):
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": sorted(properties)}


SCHEMA = _section({
    "replicates": _section({
        "launches": {"type": "integer", "minimum": 1, "maximum": 20},
        "min_to_fail": {"type": "integer", "minimum": 1, "maximum": 20},
        "time_share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "restarts": {"type": "integer", "minimum": 0, "maximum": 5},
    }),
    "min_change": _section({kind: _FRACTION for kind in REFERENCE_KINDS}),
    "min_span": {"type": "integer", "minimum": 1, "maximum": 10},
    "conditions": _section({
        "cpu_pressure_points": _PERCENT,
        "cores_short_pressure": _PERCENT,
        "core_round_trip_factor": {"type": "number", "minimum": 1},
        "time_slice_ns": {"type": "number", "exclusiveMinimum": 0},
    }),
    "baseline": _section({"min_runs": {"type": "integer", "minimum": 2, "maximum": 100}}),
})


def _partial(schema):
    """The schema of a profile: the same keys, none of them required."""
    if schema.get("type") != "object":
        return schema
    return {**{k: v for k, v in schema.items() if k != "required"},
            "properties": {k: _partial(v) for k, v in schema["properties"].items()}}


PROFILE_SCHEMA = _partial(SCHEMA)


@dataclasses.dataclass(frozen=True)
class Conditions:
    cpu_pressure_points: float
    cores_short_pressure: float
    core_round_trip_factor: float
    time_slice_ns: float


@dataclasses.dataclass(frozen=True)
class Knobs:
    launches: int
    min_to_fail: int
    time_share: float
    restarts: int
    #: {reference kind: the smallest change that counts, as a fraction}
    min_change: dict
    min_span: int
    conditions: Conditions
    baseline_min_runs: int
    #: the files the knobs were read from, base first
    sources: tuple = ()

    @classmethod
    def from_data(cls, data, sources=()):
        r = data["replicates"]
        return cls(r["launches"], r["min_to_fail"], r["time_share"], r["restarts"],
                   dict(data["min_change"]), data["min_span"],
                   Conditions(**data["conditions"]), data["baseline"]["min_runs"],
                   tuple(str(s) for s in sources))

    def to_json(self):
        """The knobs a job's re-measurement needs (remeasure.py), as data."""
        return {"replicates": {"launches": self.launches, "min_to_fail": self.min_to_fail,
                               "time_share": self.time_share, "restarts": self.restarts},
                "min_change": dict(self.min_change), "min_span": self.min_span,
                "conditions": dataclasses.asdict(self.conditions),
                "baseline": {"min_runs": self.baseline_min_runs}}


def merged(base, override):
    """`base` with `override`'s keys put over it, section by section."""
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(base.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def _stamp(path):
    """What changes when a file is rewritten: the cache asks it each time."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


@functools.lru_cache(maxsize=64)
def _load(path, profile, stamps, named_by_path=False):
    data = validate(load_yaml(path), SCHEMA, path)
    sources = [path]
    if profile is not None:
        # a path is a user's (a site's profile, --profile): root may read a
        # file that is no profile, and its errors must not show its lines
        override = checked_unquoted(profile, PROFILE_SCHEMA) if named_by_path else \
            validate(load_yaml(profile), PROFILE_SCHEMA, profile)
        data = merged(data, override)
        sources.append(profile)
        data = validate(data, SCHEMA, profile)
    if data["replicates"]["min_to_fail"] > data["replicates"]["launches"]:
        raise DataError(sources[-1], "replicates.min_to_fail",
                        f"{data['replicates']['min_to_fail']} is more than "
                        f"replicates.launches ({data['replicates']['launches']}): "
                        f"nothing could ever fail")
    return Knobs.from_data(data, sources)


def profile_path(name, folder=None):
    """The file of profile `name`: a path as given, or `<name>.yaml` in the
    references' profiles/ folder.  DataError when it does not exist."""
    candidates = [Path(name)] if "/" in str(name) else \
        [Path(folder or paths.REFERENCES) / "profiles" / f"{name}.yaml"]
    for path in candidates:
        if path.is_file():
            return path
    raise DataError(candidates[0], None, f"judging profile {name!r} not found")


def load(folder=None, profile=None):
    """The knobs of a references folder (its judging.yaml, else netbench's),
    with a profile's (a name or a file) put over them.  A profile named by
    its path is checked without quoting it (datafiles.checked_unquoted)."""
    path = Path(folder) / KNOBS_FILE.name if folder else KNOBS_FILE
    if not path.exists():
        path = KNOBS_FILE
    chosen = profile_path(profile, folder) if profile else None
    return _load(Path(path), chosen, (_stamp(path), chosen and _stamp(chosen)),
                 "/" in str(profile or ""))


def from_json(data, where="judging.json"):
    """Knobs sent to a job as data (Knobs.to_json), checked again."""
    return Knobs.from_data(validate(data, SCHEMA, where), (where,))

"""A fabric sweep's time limit, from its pairs (or rounds), the link rate
and the sizes it sends; the formula's parts are netbench/data/sweep_time.yaml's
(its comments give each one's reason).  Pure: reframe_checks/link_sweep.py
sets its job's time limit from `time_limit`, and the job's later passes
start only while `pass_seconds` of their pairs fits in what is left."""

import dataclasses
import functools
import math

from .. import paths
from ..datafiles import load_yaml, validate

SWEEP_TIME_FILE = paths.DATA / "sweep_time.yaml"

_POSITIVE = {"type": "number", "exclusiveMinimum": 0}
_SECONDS = {"type": "number", "minimum": 0}
SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["link_fraction", "calibration_batches", "pair_overhead_seconds",
                 "startup_seconds", "reserve_seconds", "min_seconds", "stream_window",
                 "stream_window_bytes"],
    "properties": {
        "link_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "calibration_batches": {"type": "integer", "minimum": 0},
        "pair_overhead_seconds": _SECONDS,
        "startup_seconds": _SECONDS,
        "reserve_seconds": _SECONDS,
        "min_seconds": _POSITIVE,
        "stream_window": {"type": "integer", "minimum": 1},
        "stream_window_bytes": {"type": "integer", "minimum": 1},
    },
}


@dataclasses.dataclass(frozen=True)
class SweepTime:
    link_fraction: float
    calibration_batches: int
    pair_overhead_seconds: float
    startup_seconds: float
    reserve_seconds: float
    min_seconds: float
    stream_window: int
    stream_window_bytes: int


@functools.lru_cache(maxsize=None)
def load(path=SWEEP_TIME_FILE):
    """sweep_time.yaml, checked (DataError naming the file and key)."""
    return SweepTime(**validate(load_yaml(path), SCHEMA, path))


def window_bytes(size, parts):
    """The bytes of one stream window of `size`-byte messages, as the
    benchmark's window_for: up to stream_window messages, no more than
    stream_window_bytes, at least one."""
    messages = parts.stream_window_bytes // size if size else parts.stream_window
    return size * min(parts.stream_window, max(1, messages))


def direction_seconds(size, rate_mbps, min_samples, budget, parts):
    """One direction of one size: the timed batches of one window each at
    link_fraction of the line rate, or the budget when the link is fast."""
    batches = min_samples + parts.calibration_batches
    window = window_bytes(size, parts) * 8 / (rate_mbps * 1e6 * parts.link_fraction)
    return max(budget, batches * window)


def pair_seconds(sizes, rate_mbps, min_samples, budget, parts):
    """One pair: both directions of every size, and its overhead."""
    return parts.pair_overhead_seconds + sum(
        2 * direction_seconds(size, rate_mbps, min_samples, budget, parts) for size in sizes)


def pass_seconds(units, sizes, rate_mbps, min_samples, budget, parts):
    """A pass of `units` pairs one at a time (or rounds of pairs at once)."""
    return units * pair_seconds(sizes, rate_mbps, min_samples, budget, parts)


def time_limit(units, passes, sizes, rate_mbps, min_samples, budget, parts=None):
    """The job's time limit in whole seconds: `passes` passes of `units`
    pairs (or rounds) between its start-up and its reserve, never under
    min_seconds; min_seconds alone without a line rate (nothing to
    derive it from)."""
    parts = parts or load()
    if not rate_mbps or rate_mbps <= 0:
        return int(parts.min_seconds)
    seconds = (parts.startup_seconds + parts.reserve_seconds
               + passes * pass_seconds(units, sizes, rate_mbps, min_samples, budget, parts))
    return int(max(parts.min_seconds, math.ceil(seconds)))

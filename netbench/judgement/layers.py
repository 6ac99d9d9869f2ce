"""Where the loss is when the layers below the MPI run well and the MPI
does not (issue #34, "the layers side by side").  Pure: each layer's
figures in, reason codes with their numbers out.

A layer is its bandwidth per message size (Mbit/s), or only a peak (a
published figure).  A lower layer (LOWER_LAYERS: `verbs`, `tcp`) runs
well when its peak reaches `runs_well_of_line_rate` of the line rate, or,
with no line rate known, it is the best the path gave.  The MPI is then
compared with it over the sizes both measured from `at_bytes` / `window`
to `at_bytes` x `window`, size by size: the MPI loses what the layer
delivers when at every one of those sizes it is `loss_at_least` below the
layer at that size, beyond the spread of the launches where they give
intervals.  Compared at one size, both layers move the same bytes through
the same caches: over loopback raw TCP peaks at a size that fits in
cache, where an MPI's rendezvous still costs it a round trip, and a best
against a best blamed a healthy MPI for that.  The loss quoted is at the
size where the MPI came closest.  One launch's dip of the MPI at one size
is no loss; one of the lower layer excuses the MPI at that size (a loss missed,
never an MPI blamed for the noise beneath it).
The thresholds: the rule `mpi_below_lower_layer` of
netbench/data/diagnosis.yaml, whose diagnosis names the MPI's transport
settings:

    mpi_below_verbs   verbs at 0.97 of line rate; MPI 38 % below verbs at
                      256 KiB to 4 MiB (closest at 1 MiB: 118000 against
                      190000 Mbit/s)
    mpi_below_tcp     raw TCP at 62000 Mbit/s (no line rate known); MPI 41 % ...

A lower layer that does not run well is named too (`layer_short_of_line_rate`):
the loss is then beneath the MPI, and the MPI is not blamed for it.
"""

import dataclasses
import functools

from .. import paths
from ..datafiles import DataError, load_yaml, validate
from .figures import row_estimate

RULES_FILE = paths.DATA / "diagnosis.yaml"
RULE = "mpi_below_lower_layer"
_SHARE = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
THRESHOLD_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["at_bytes", "window", "runs_well_of_line_rate", "loss_at_least"],
    "properties": {"at_bytes": {"type": "integer", "minimum": 1},
                   "window": {"type": "number", "minimum": 1},
                   "runs_well_of_line_rate": _SHARE, "loss_at_least": _SHARE},
}
#: the layers below the MPI, lowest first (report/reasons.py names them)
LOWER_LAYERS = ("verbs", "tcp")
MPI = "mpi"


@functools.cache
def load(path=RULES_FILE):
    """The attribution's thresholds: the rule's `threshold`."""
    rules = load_yaml(path).get("rules") or []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, dict) and rule.get("id") == RULE:
            return validate(rule.get("threshold"), THRESHOLD_SCHEMA, path,
                            where=("rules", i, "threshold"))
    raise DataError(path, "rules", f"no rule {RULE!r}: the layers' attribution needs its "
                                   f"thresholds")


@dataclasses.dataclass(frozen=True)
class Layer:
    """One layer's figures: Mbit/s per message size, or only a peak; and
    where its launch gave them, each rate's interval {bytes: (lo, hi)}."""
    name: str
    rates: dict = dataclasses.field(default_factory=dict)
    peak: float | None = None
    bounds: dict = dataclasses.field(default_factory=dict)

    def low(self, nbytes):
        return self.bounds.get(nbytes, (self.rates[nbytes],) * 2)[0]

    def high(self, nbytes):
        return self.bounds.get(nbytes, (self.rates[nbytes],) * 2)[1]

    @property
    def peak_mbps(self):
        if self.peak is not None:
            return self.peak
        return max(self.rates.values(), default=0.0)


@dataclasses.dataclass(frozen=True)
class Attribution:
    """A reason code and the numbers behind it."""
    code: str                 # mpi_below_<layer> | layer_short_of_line_rate
    layer: str                # the lower layer compared with
    from_bytes: int | None    # the sizes compared over; None: at the peaks
    to_bytes: int | None
    mpi_mbps: float | None    # both layers at the size where the MPI came closest
    layer_mbps: float
    loss: float | None        # the MPI's share below the layer there
    layer_of_line_rate: float | None
    line_rate_mbps: float | None
    closest_bytes: int | None = None
    layer_peak_mbps: float | None = None   # the best the lower layer gave

    def as_dict(self):
        return dataclasses.asdict(self)


def compared_sizes(mpi, lower, t):
    """The common sizes from at_bytes / window to at_bytes x window, else
    the largest common size; [] when the layers share none."""
    common = sorted(set(mpi.rates) & set(lower.rates))
    low, high = t["at_bytes"] / t["window"], t["at_bytes"] * t["window"]
    return [b for b in common if low <= b <= high] or common[-1:]


def closest_size(mpi, lower, sizes):
    """The compared size where the MPI came closest to the lower layer."""
    return max((b for b in sizes if lower.rates[b] > 0),
               key=lambda b: mpi.rates[b] / lower.rates[b], default=None)


def below_at_every_size(mpi, lower, sizes, loss_at_least):
    """The MPI below the lower layer by the share at each size, beyond the
    launches' spread: its upper bound under the layer's lower bound."""
    return all(mpi.high(b) < (1 - loss_at_least) * lower.low(b) for b in sizes)


def mpi_loss(name, mpi, lower, t, share, line_rate_mbps):
    """The Attribution of the MPI's loss below one lower layer that runs
    well, or None when the MPI keeps up with it."""
    sizes = compared_sizes(mpi, lower, t)
    if sizes:
        at = closest_size(mpi, lower, sizes)
        if at is None:
            return None
        mpi_rate, lower_rate = mpi.rates[at], lower.rates[at]
        apart = below_at_every_size(mpi, lower, sizes, t["loss_at_least"])
    else:
        at, mpi_rate, lower_rate = None, mpi.peak_mbps, lower.peak_mbps
        apart = mpi_rate < (1 - t["loss_at_least"]) * lower_rate
    if not apart:
        return None
    return Attribution(f"mpi_below_{name}", name, sizes[0] if sizes else None,
                       sizes[-1] if sizes else None, mpi_rate, lower_rate,
                       1.0 - mpi_rate / lower_rate, share, line_rate_mbps, at,
                       lower.peak_mbps)


def attribute(layers, line_rate_mbps=None, threshold=None):
    """[Attribution] of the lower layers that run well beneath an MPI that
    does not, and of those that do not run well; [] when the MPI keeps up
    with every layer below it.  `layers`: {name: Layer}, the MPI's under
    `mpi`, the lower ones under LOWER_LAYERS' names."""
    t = threshold or load()
    mpi = layers.get(MPI)
    found = []
    for name in LOWER_LAYERS:
        lower = layers.get(name)
        if lower is None or mpi is None or lower.peak_mbps <= 0:
            continue
        share = lower.peak_mbps / line_rate_mbps if line_rate_mbps else None
        if share is not None and share < t["runs_well_of_line_rate"]:
            found.append(Attribution("layer_short_of_line_rate", name, None, None, None,
                                     lower.peak_mbps, None, share, line_rate_mbps))
            continue
        loss = mpi_loss(name, mpi, lower, t, share, line_rate_mbps)
        if loss is not None:
            found.append(loss)
    return found


def rates_of(rows, column="Mbps"):
    """{bytes: rate} of curve rows (results.record series rows)."""
    return {int(r["bytes"]): float(r[column]) for r in rows if "bytes" in r and column in r}


def layer_of_rows(name, rows, column="Mbps"):
    """A Layer of a launch's rows, with each rate's interval where the rows
    give one (netbench's benchmark: from its timed batches)."""
    bounds = {}
    for r in rows:
        if "bytes" in r and column in r:
            e = row_estimate(r, column)
            bounds[int(r["bytes"])] = (e.lo, e.hi)
    return Layer(name, rates_of(rows, column), bounds=bounds)

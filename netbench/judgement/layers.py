"""Where the loss is when the layers below the MPI run well and the MPI
does not (issue #34, "the layers side by side").  Pure: each layer's
figures in, reason codes with their numbers out.

A layer is its bandwidth per message size (Mbit/s), or only a peak (a
published figure).  A lower layer (data/layers.yaml: `verbs`, `tcp`) runs
well when its peak reaches `runs_well_of_line_rate` of the line rate, or,
with no line rate known, it is the best the path gave.  The MPI is then
compared with it at the largest size both measured up to `at_bytes`; at
`loss_at_least` below it, the loss is the MPI's:

    mpi_below_verbs   verbs at 0.97 of line rate; MPI 38 % below verbs at 1 MiB
    mpi_below_tcp     raw TCP (no line rate known); MPI 41 % below raw TCP at 1 MiB

A lower layer that does not run well is named too (`layer_short_of_line_rate`):
the loss is then beneath the MPI, and the MPI is not blamed for it.
"""

import dataclasses
import functools

from .. import paths
from ..datafiles import load_yaml, validate

LAYERS_FILE = paths.DATA / "layers.yaml"
_SHARE = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
SCHEMA = {
    "type": "object", "required": ["layers", "attribution"], "additionalProperties": False,
    "properties": {
        "layers": {"type": "object", "minProperties": 1, "additionalProperties": {
            "type": "object", "required": ["name"], "additionalProperties": False,
            "properties": {"name": {"type": "string"}}}},
        "attribution": {
            "type": "object", "additionalProperties": False,
            "required": ["at_bytes", "runs_well_of_line_rate", "loss_at_least"],
            "properties": {"at_bytes": {"type": "integer", "minimum": 1},
                           "runs_well_of_line_rate": _SHARE, "loss_at_least": _SHARE}},
    },
}
MPI = "mpi"


@functools.cache
def load(path=LAYERS_FILE):
    return validate(load_yaml(path), SCHEMA, path)


@dataclasses.dataclass(frozen=True)
class Layer:
    """One layer's figures: Mbit/s per message size, or only a peak."""
    name: str
    rates: dict = dataclasses.field(default_factory=dict)
    peak: float | None = None

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
    at_bytes: int | None      # the size compared at; None: at the peaks
    mpi_mbps: float | None
    layer_mbps: float
    loss: float | None        # the MPI's share below the layer
    layer_of_line_rate: float | None
    line_rate_mbps: float | None
    text: str

    def as_dict(self):
        return dataclasses.asdict(self)


def size_text(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def compared_size(mpi, lower, at_bytes):
    """The largest size both layers measured up to `at_bytes` (else the
    smallest common one above it), None when they share none."""
    common = sorted(set(mpi.rates) & set(lower.rates))
    if not common:
        return None
    below = [b for b in common if b <= at_bytes]
    return below[-1] if below else common[0]


def layer_state(lower, line_rate, names):
    """(share of the line rate or None, words saying how the layer ran)."""
    label = names[lower.name]
    if not line_rate:
        return None, f"{label} at {lower.peak_mbps:.0f} Mbit/s (no line rate known)"
    share = lower.peak_mbps / line_rate
    return share, f"{label} at {share:.2f} of line rate"


def attribute(layers, line_rate_mbps=None, settings=None):
    """[Attribution] of the lower layers that run well beneath an MPI that
    does not, and of those that do not run well; [] when the MPI keeps up
    with every layer below it.  `layers`: {name: Layer}, the MPI's under
    `mpi`, the lower ones under data/layers.yaml's names."""
    settings = settings or load()
    t = settings["attribution"]
    names = {n: spec["name"] for n, spec in settings["layers"].items()}
    mpi = layers.get(MPI)
    found = []
    for name in names:
        lower = layers.get(name)
        if lower is None or mpi is None or lower.peak_mbps <= 0:
            continue
        share, state = layer_state(lower, line_rate_mbps, names)
        if share is not None and share < t["runs_well_of_line_rate"]:
            found.append(Attribution("layer_short_of_line_rate", name, None, None,
                                     lower.peak_mbps, None, share, line_rate_mbps,
                                     f"{state}: the loss is beneath the MPI"))
            continue
        size = compared_size(mpi, lower, t["at_bytes"])
        if size is None:
            mpi_rate, lower_rate, where = mpi.peak_mbps, lower.peak_mbps, "at their peaks"
        else:
            mpi_rate, lower_rate = mpi.rates[size], lower.rates[size]
            where = f"at {size_text(size)}"
        if lower_rate <= 0 or mpi_rate is None:
            continue
        loss = 1.0 - mpi_rate / lower_rate
        if loss >= t["loss_at_least"]:
            found.append(Attribution(
                f"mpi_below_{name}", name, size, mpi_rate, lower_rate, loss, share,
                line_rate_mbps,
                f"{state}; MPI {100 * loss:.0f} % below {names[name]} {where} "
                f"({mpi_rate:.0f} against {lower_rate:.0f} Mbit/s)"))
    return found


def rates_of(rows, column="Mbps"):
    """{bytes: rate} of curve rows (results.record series rows)."""
    return {int(r["bytes"]): float(r[column]) for r in rows if "bytes" in r and column in r}

"""What the report says about a curve: the Hockney model fit, the message
size where the protocol switches, and dips.

Hockney's model: t(n) = t0 + n / r_inf, with t0 the start-up time, r_inf
the asymptotic bandwidth and n_half = t0 * r_inf the message size that
reaches half of it.
"""

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class HockneyFit:
    t0_us: float          # start-up time
    rinf_MBps: float      # asymptotic bandwidth, 10^6 bytes/s
    nhalf_bytes: float    # t0 * r_inf
    residual: float       # RMS of the relative residuals

    def predict_us(self, nbytes):
        return self.t0_us + np.asarray(nbytes, dtype=float) / self.rinf_MBps


def _weighted_fit(n, t):
    """Least squares of t = a + b n, minimising relative (not absolute)
    errors so that small messages count as much as large ones."""
    w = 1.0 / t
    design = np.column_stack([w, n * w])
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    rel = (a + b * n - t) / t
    return a, b, float(np.sqrt(np.mean(rel ** 2)))


def hockney_fit(sizes, times_us):
    """The fit of (bytes, microseconds) points, or None with fewer than 3
    usable points or a non-positive slope."""
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    keep = (t > 0) & np.isfinite(t)
    n, t = n[keep], t[keep]
    if len(n) < 3:
        return None
    a, b, residual = _weighted_fit(n, t)
    if b <= 0:
        return None
    rinf = 1.0 / b          # bytes per microsecond == 10^6 bytes/s
    return HockneyFit(t0_us=float(a), rinf_MBps=float(rinf), nhalf_bytes=float(a * rinf),
                      residual=residual)


@dataclasses.dataclass(frozen=True)
class ProtocolSwitch:
    bytes: int            # first message size of the upper regime
    below: HockneyFit
    above: HockneyFit
    step: float           # t(bytes) over the lower regime's prediction


def protocol_switch(sizes, times_us, min_points=3, min_gain=0.5, min_step=1.1):
    """Where the curve changes regime (eager to rendezvous, typically): the
    split into two Hockney fits that lowers the squared relative residual
    most.  None unless the split removes at least `min_gain` of the single
    fit's error and the time steps up by `min_step` at the switch."""
    n = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    if len(n) < 2 * min_points:
        return None
    single = _weighted_fit(n, t)[2] ** 2 * len(n)
    best = None
    for k in range(min_points, len(n) - min_points + 1):
        lo, hi = _weighted_fit(n[:k], t[:k]), _weighted_fit(n[k:], t[k:])
        cost = lo[2] ** 2 * k + hi[2] ** 2 * (len(n) - k)
        if best is None or cost < best[0]:
            best = (cost, k, lo, hi)
    cost, k, lo, hi = best
    predicted = lo[0] + lo[1] * n[k]
    step = float(t[k] / predicted) if predicted > 0 else float("inf")
    if single <= 0 or cost > (1 - min_gain) * single or step < min_step:
        return None
    below, above = hockney_fit(n[:k], t[:k]), hockney_fit(n[k:], t[k:])
    if below is None or above is None:
        return None
    return ProtocolSwitch(bytes=int(n[k]), below=below, above=above, step=step)


def dips(sizes, bandwidths, drop=0.2, recover=0.9):
    """Message sizes whose bandwidth falls more than `drop` below the
    previous size's and recovers to `recover` of it at the next size: the
    irregular curves seed 000 saw on untuned GigE."""
    found = []
    for i in range(1, len(bandwidths) - 1):
        before, here, after = bandwidths[i - 1], bandwidths[i], bandwidths[i + 1]
        if before > 0 and here < (1 - drop) * before and after >= recover * before:
            found.append(int(sizes[i]))
    return found

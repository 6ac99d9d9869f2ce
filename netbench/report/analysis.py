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


def _split_costs(n, t, splits):
    """The squared relative residual of the two fits _weighted_fit makes of
    n[:k], t[:k] and n[k:], t[k:], for every k of `splits`: the normal
    equations of every window from running sums, in one pass, where a
    least-squares solve per window and split cost a report of 10,000 curves
    most of its time.  At the optimum the residual is 1'1 - beta'X'1, and it
    is flat there, so the solve's rounding hardly moves it."""
    w = 1.0 / t
    x1, x2 = w, n * w / n.max()              # the slope's column scaled to O(1)
    columns = np.stack([x1 * x1, x1 * x2, x2 * x2, x1, x2, np.ones_like(x1)])
    running = np.concatenate([np.zeros((6, 1)), np.cumsum(columns, axis=1)], axis=1)

    def residual(sums):
        s11, s12, s22, b1, b2, count = sums
        det = s11 * s22 - s12 * s12
        with np.errstate(divide="ignore", invalid="ignore"):
            a = (b1 * s22 - b2 * s12) / det
            b = (b2 * s11 - b1 * s12) / det
            rss = np.maximum(count - a * b1 - b * b2, 0.0)
        return np.where(np.isfinite(rss), rss, np.inf)
    below = residual(running[:, splits])
    above = residual(running[:, -1:] - running[:, splits])
    return below + above


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
    splits = np.arange(min_points, len(n) - min_points + 1)
    costs = _split_costs(n, t, splits)
    k = int(splits[np.argmin(costs)])
    lo, hi = _weighted_fit(n[:k], t[:k]), _weighted_fit(n[k:], t[k:])
    cost = lo[2] ** 2 * k + hi[2] ** 2 * (len(n) - k)
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

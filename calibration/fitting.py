"""Robust affine fits t(S) = fixed + S * per_byte of collective times, with regime detection.

Why these choices:
- Residuals are relative (log of model / measurement): the noise of a timing is multiplicative and the
  sizes span five orders of magnitude; absolute residuals would let the 64 MB point decide everything.
- soft_l1 loss (scipy.optimize.least_squares's objective, minimized by calibration/soft_l1.py without
  scipy.optimize's half second of import) with a scale taken from the data's own robust scatter: one
  preempted sample should not move the fit.
- Uncertainties from the Jacobian covariance, inflated when the per-size medians scatter more than the
  sample noise allows (samples taken back-to-back at one size are correlated; independent-sample
  covariance would then overstate the precision).
- A real stack often switches protocol (eager / rendezvous, NCCL LL / Simple): one affine line then
  misfits. When it does, a two-segment fit with a breakpoint between sizes is tried and kept only if
  it cuts the residuals substantially.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.soft_l1 import soft_l1_minimum

_MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class AffineFit:
    """One fitted line and how well it describes the data it was fitted to."""

    fixed_s: float
    per_byte_s: float
    fixed_sd_s: float
    per_byte_sd_s: float
    r2: float  # on the per-size medians (linear scale)
    worst_rel_residual: float  # max |model / median - 1| over sizes
    worst_at_bytes: int
    rms_rel_residual: float  # RMS over sizes of log(model / median)
    noise_rel: float  # robust scatter of the individual samples around the fit (relative)
    n_sizes: int
    n_samples: int
    min_bytes: int
    max_bytes: int
    unresolved: tuple[str, ...]  # parameters not distinguishable from 0 (value < 2 sd)

    @property
    def per_byte_rel_sd(self) -> float:
        return self.per_byte_sd_s / self.per_byte_s if self.per_byte_s > 0 else float("inf")

    def time_s(self, nbytes):
        return self.fixed_s + np.asarray(nbytes, dtype=float) * self.per_byte_s


@dataclass(frozen=True)
class RegimeFit:
    """The line the model should use, plus the small-message line when the data show two regimes."""

    large: AffineFit  # the fit for the largest messages (the whole range when there is one regime)
    small: AffineFit | None = None
    breakpoint_bytes: int | None = None  # first size of the large-message regime
    single: AffineFit | None = None  # the one-line fit over everything, kept for reporting


def fit_affine(nbytes, times_s) -> AffineFit:
    """Robust relative-error fit of t = fixed + S * per_byte over all samples (needs >= 2 sizes)."""
    S = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    sizes, inverse = np.unique(S, return_inverse=True)
    if sizes.size < 2:
        raise ValueError("an affine fit needs at least two message sizes")
    s_ref, t_ref = float(sizes[-1]), float(np.median(t))
    s, tau = S / s_ref, t / t_ref

    # Start: linear least squares on relative errors (rows divided by t), a closed form.
    design = np.column_stack([np.ones_like(s), s]) / tau[:, None]
    x0, *_ = np.linalg.lstsq(design, np.ones_like(tau), rcond=None)
    floor = 1e-6 * float(np.min(tau))
    x0 = np.maximum(x0, floor)

    def residuals(x):
        return np.log(np.maximum(x[0] + x[1] * s, 1e-300)) - np.log(tau)

    def jacobian(x):
        model = np.maximum(x[0] + x[1] * s, 1e-300)
        return np.column_stack([1.0 / model, s / model])

    scale = max(_robust_sd(residuals(x0)), 5e-3)
    x = soft_l1_minimum(residuals, jacobian, x0, scale)
    r = residuals(x)
    n = r.size
    sigma = _robust_sd(r) * np.sqrt(n / max(n - 2, 1)) if n > 2 else 0.0
    jac = jacobian(x)
    cov = sigma**2 * np.linalg.pinv(jac.T @ jac)

    # Per-size medians: the model-quality numbers, and the check for correlated samples.
    counts = np.bincount(inverse)
    med_t = np.array([np.median(t[inverse == i]) for i in range(sizes.size)])
    model_med = x[0] * t_ref + x[1] * t_ref / s_ref * sizes
    rel = model_med / med_t - 1.0
    log_rel = np.log(np.maximum(model_med, 1e-300) / med_t)
    mean_r = np.bincount(inverse, weights=r) / counts
    if sizes.size > 2 and sigma > 0:
        between = float(np.sum(mean_r**2) / (sizes.size - 2))
        cov *= max(1.0, between / (sigma**2 / float(np.mean(counts))))

    ss_tot = float(np.sum((med_t - med_t.mean()) ** 2))
    r2 = 1.0 - float(np.sum((med_t - model_med) ** 2)) / ss_tot if ss_tot > 0 else float("nan")
    worst = int(np.argmax(np.abs(rel)))
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return AffineFit(
        fixed_s=float(x[0] * t_ref),
        per_byte_s=float(x[1] * t_ref / s_ref),
        fixed_sd_s=float(sd[0] * t_ref),
        per_byte_sd_s=float(sd[1] * t_ref / s_ref),
        r2=r2,
        worst_rel_residual=float(abs(rel[worst])),
        worst_at_bytes=int(sizes[worst]),
        rms_rel_residual=float(np.sqrt(np.mean(log_rel**2))),
        noise_rel=float(_robust_sd(r)),
        n_sizes=int(sizes.size),
        n_samples=int(n),
        min_bytes=int(sizes[0]),
        max_bytes=int(sizes[-1]),
        unresolved=tuple(
            name for name, v, e in zip(("fixed_s", "per_byte_s"), x, sd, strict=True) if v < 2 * e
        ),
    )


def fit_regimes(
    nbytes, times_s, min_sizes_per_regime: int = 3, misfit_threshold: float = 0.08, improvement: float = 2.0
) -> RegimeFit:
    """One line, or two when one line misfits (> misfit_threshold somewhere) and a breakpoint between two
    sizes reduces the RMS relative residual at least `improvement`-fold."""
    S = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    single = fit_affine(S, t)
    sizes = np.unique(S)
    if single.worst_rel_residual <= misfit_threshold or sizes.size < 2 * min_sizes_per_regime:
        return RegimeFit(large=single, single=single)

    def split_at(j: int) -> tuple[AffineFit, AffineFit, float]:
        below = S < sizes[j]
        lo, hi = fit_affine(S[below], t[below]), fit_affine(S[~below], t[~below])
        rms = np.sqrt(
            (lo.rms_rel_residual**2 * lo.n_sizes + hi.rms_rel_residual**2 * hi.n_sizes) / sizes.size
        )
        return lo, hi, float(rms)

    candidates = range(min_sizes_per_regime, sizes.size - min_sizes_per_regime + 1)
    splits = {j: split_at(j) for j in candidates}
    best = min(splits, key=lambda j: splits[j][2])
    lo, hi, rms = splits[best]
    if rms * improvement > single.rms_rel_residual:
        return RegimeFit(large=single, single=single)
    return RegimeFit(large=hi, small=lo, breakpoint_bytes=int(sizes[best]), single=single)


def _robust_sd(r: np.ndarray) -> float:
    """Scatter that ignores a few wild samples: 1.4826 * median absolute deviation."""
    return float(_MAD_TO_SD * np.median(np.abs(r - np.median(r)))) if r.size else 0.0

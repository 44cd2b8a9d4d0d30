"""The minimum of a soft-L1 (pseudo-Huber) robust least-squares problem on x >= 0, in numpy.

Why not scipy.optimize.least_squares: it minimizes this very objective (loss="soft_l1", f_scale, bounds
(0, inf)), but importing scipy.optimize costs half a second of CPU, a third of `rtmodel advise --profile`
(issue 51), for fits of two parameters to a few dozen points. The objective is the one scipy documents,

    cost(x) = sum_i f^2 (sqrt(1 + (r_i(x) / f)^2) - 1),

and its minimum is found by iteratively reweighted Gauss-Newton (weights 1 / sqrt(1 + (r_i / f)^2), the
loss's own derivative), with a backtracking step that never raises the cost and coordinates held at 0
while the gradient pushes them below it (the bound's KKT condition). It stops when a step moves no
coordinate by more than STEP_RTOL of the largest: tighter than scipy's default tolerances (1e-8 on
the cost), so the two agree to those tolerances (tests/test_soft_l1.py compares them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

STEP_RTOL = 1e-12
MAX_STEPS = 200
MAX_HALVINGS = 60


def soft_l1_cost(r: np.ndarray, f_scale: float) -> float:
    """The soft-L1 cost of residuals r at scale f_scale (scipy's 0.5 * sum f^2 rho(r^2 / f^2))."""
    return float(np.sum(f_scale**2 * (np.sqrt(1.0 + (r / f_scale) ** 2) - 1.0)))


def soft_l1_minimum(
    residuals: Callable[[np.ndarray], np.ndarray],
    jacobian: Callable[[np.ndarray], np.ndarray],
    x_start: np.ndarray,
    f_scale: float,
) -> np.ndarray:
    """argmin over x >= 0 of soft_l1_cost(residuals(x), f_scale), from x_start (x_start >= 0)."""
    x = np.maximum(np.asarray(x_start, dtype=float), 0.0)
    r = residuals(x)
    cost = soft_l1_cost(r, f_scale)
    for _ in range(MAX_STEPS):
        step = _step(r, jacobian(x), x, f_scale)
        if step is None:
            return x
        moved = _backtrack(residuals, x, step, cost, f_scale)
        if moved is None:
            return x
        x_new, r, cost = moved
        done = np.max(np.abs(x_new - x)) <= STEP_RTOL * max(float(np.max(np.abs(x_new))), 1e-300)
        x = x_new
        if done:
            return x
    return x


def _step(r: np.ndarray, jac: np.ndarray, x: np.ndarray, f_scale: float) -> np.ndarray | None:
    """The reweighted Gauss-Newton step over the coordinates free to move (None: nothing to move)."""
    w = 1.0 / np.sqrt(1.0 + (r / f_scale) ** 2)
    grad = jac.T @ (w * r)
    free = (x > 0) | (grad < 0)  # at the bound a coordinate moves only inward
    if not free.any():
        return None
    jf = jac[:, free]
    delta, *_ = np.linalg.lstsq(jf.T @ (w[:, None] * jf), -grad[free], rcond=None)
    step = np.zeros_like(x)
    step[free] = delta
    return step


def _backtrack(residuals, x: np.ndarray, step: np.ndarray, cost: float, f_scale: float):
    """(x, residuals, cost) after the longest halving of `step` (kept at x >= 0) that lowers the cost;
    None when none does (x is the minimum to rounding)."""
    t = 1.0
    for _ in range(MAX_HALVINGS):
        x_new = np.maximum(x + t * step, 0.0)
        r_new = residuals(x_new)
        cost_new = soft_l1_cost(r_new, f_scale)
        if np.isfinite(cost_new) and cost_new < cost:
            return x_new, r_new, cost_new
        t *= 0.5
    return None

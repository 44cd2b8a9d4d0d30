"""calibration.soft_l1 minimizes the objective scipy.optimize.least_squares(loss="soft_l1", bounds
(0, inf)) does: never at a higher cost, and at the same point to scipy's own tolerances."""

import numpy as np
import pytest

from calibration.soft_l1 import soft_l1_cost, soft_l1_minimum

least_squares = pytest.importorskip("scipy.optimize").least_squares


def _line_problem(S, t):
    """The relative-error line fit of calibration.fitting.fit_affine: residuals, Jacobian, start, scale."""
    s, tau = S / S.max(), t / np.median(t)
    design = np.column_stack([np.ones_like(s), s]) / tau[:, None]
    x0 = np.maximum(np.linalg.lstsq(design, np.ones_like(tau), rcond=None)[0], 1e-6 * tau.min())

    def residuals(x):
        return np.log(np.maximum(x[0] + x[1] * s, 1e-300)) - np.log(tau)

    def jacobian(x):
        model = np.maximum(x[0] + x[1] * s, 1e-300)
        return np.column_stack([1.0 / model, s / model])

    return residuals, jacobian, x0, max(1.4826 * np.median(np.abs(residuals(x0))), 5e-3)


def _lines(count: int, seed: int):
    """Timings of lines with and without a fixed part, multiplicative noise from 0.1 % to 30 %, and
    now and then one wild sample (a preempted rank)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        sizes = np.geomspace(2.0 ** rng.integers(2, 12), 2.0 ** rng.integers(20, 28), rng.integers(3, 12))
        fixed = 10 ** rng.uniform(-6, -3) * (rng.random() > 0.15)
        per_byte = 10 ** rng.uniform(-11, -8)
        S = np.repeat(sizes, rng.integers(1, 8))
        t = (fixed + per_byte * S) * np.exp(rng.normal(0.0, 10 ** rng.uniform(-3, -0.5), S.size))
        if rng.random() < 0.2:
            t[rng.integers(S.size)] *= 5.0
        yield S, t


def test_it_reaches_scipys_minimum_of_the_same_objective():
    worst = []
    for S, t in _lines(150, seed=11):
        residuals, jacobian, x0, scale = _line_problem(S, t)
        ours = soft_l1_minimum(residuals, jacobian, x0, scale)
        theirs = least_squares(
            residuals, x0, jac=jacobian, bounds=([0, 0], [np.inf, np.inf]), loss="soft_l1", f_scale=scale
        ).x
        ours_cost, theirs_cost = soft_l1_cost(residuals(ours), scale), soft_l1_cost(residuals(theirs), scale)
        assert np.all(ours >= 0)
        assert ours_cost <= theirs_cost * (1 + 1e-12) + 1e-300
        worst.append(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
    assert np.median(worst) < 1e-7  # scipy stops at its tolerances (1e-8 on the cost)
    assert max(worst) < 1e-4


def test_a_line_through_the_origin_keeps_its_fixed_part_at_the_bound():
    """Noise-free t = b S: the fixed part's optimum is the bound 0, which the fit must not undercut."""
    S = np.repeat(np.geomspace(1e3, 1e8, 6), 3)
    residuals, jacobian, x0, scale = _line_problem(S, 2e-10 * S)
    x = soft_l1_minimum(residuals, jacobian, x0, scale)
    assert x[0] == pytest.approx(0.0, abs=1e-9)
    assert soft_l1_cost(residuals(x), scale) == pytest.approx(0.0, abs=1e-18)


def test_one_wild_sample_moves_the_line_less_than_least_squares_would():
    S = np.repeat(np.geomspace(1e3, 1e8, 8), 4)
    t = 1e-5 + 1e-10 * S
    t[5] *= 20.0
    residuals, jacobian, x0, scale = _line_problem(S, t)
    x = soft_l1_minimum(residuals, jacobian, x0, scale)
    plain = least_squares(residuals, x0, jac=jacobian, bounds=([0, 0], [np.inf, np.inf])).x
    truth = np.array([1e-5, 1e-10 * S.max()]) / np.median(t)
    assert np.abs(x / truth - 1).max() < np.abs(plain / truth - 1).max()

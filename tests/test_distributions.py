"""Order statistics of compute time, checked against closed forms and brute force."""

import math

import numpy as np
import pytest

from runtime_model.core.distributions import EmpiricalCompute, NormalCompute


def test_expected_max_of_two_normals_closed_form():
    d = NormalCompute(1.0, 0.1)
    assert d.expected_max(2) == pytest.approx(1.0 + 0.1 / math.sqrt(math.pi), rel=1e-9)
    assert d.expected_max(1) == pytest.approx(1.0)


def test_expected_max_matches_monte_carlo():
    d = NormalCompute(0.0, 1.0)
    rng = np.random.default_rng(0)
    mc = rng.standard_normal((20000, 64)).max(axis=1).mean()
    assert d.expected_max(64) == pytest.approx(mc, abs=0.01)
    assert d.expected_max(65536) > d.expected_max(64) > d.expected_max(2)


def test_quantile_of_max():
    d = NormalCompute(1.0, 0.1)
    # P(max of 4 <= x) = 0.5  => Phi(z) = 0.5 ** 0.25
    from scipy.stats import norm

    assert d.quantile_of_max(0.5, 4) == pytest.approx(1.0 + 0.1 * norm.ppf(0.5**0.25))


def test_empirical_expected_max_exact():
    d = EmpiricalCompute((1.0, 2.0))
    # max of two draws is 2 unless both are 1 (prob 1/4)
    assert d.expected_max(2) == pytest.approx(1.75)
    assert d.mean_s == pytest.approx(1.5)


def test_empirical_rejects_bad_samples():
    with pytest.raises(ValueError):
        EmpiricalCompute(())
    with pytest.raises(ValueError):
        EmpiricalCompute((1.0, float("nan")))


def test_zero_spread_is_deterministic():
    d = NormalCompute(0.5, 0.0)
    assert d.expected_max(1000) == 0.5
    assert d.quantile_of_max(0.99, 1000) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "dist", [NormalCompute(0.03, 0.004), EmpiricalCompute(tuple(np.linspace(0.02, 0.05, 997)))], ids=str
)
@pytest.mark.parametrize(
    "variation",
    [
        dict(),
        dict(straggler_factor=1.5, straggler_count=2),
        dict(rank_cv=0.1),
        dict(rank_factors=(1.0, 1.1, 0.9)),
    ],
    ids=["iid", "stragglers", "rank-spread", "measured-factors"],
)
@pytest.mark.parametrize("n", [3, 8])
def test_a_block_of_iterations_is_the_per_iteration_draws_bit_for_bit(dist, variation, n):
    """Compute.block_sampler (advise --profile's speed) must give exactly what one draw per iteration gives."""
    from runtime_model.core.scenario import Compute
    from runtime_model.core.variation import Variation

    if "rank_factors" in variation and n != 3:
        variation = dict(rank_factors=tuple(1.0 + 0.01 * i for i in range(n)))
    comp = Compute(0.01, 0.02, 0.005, distribution=dist, variation=Variation(**variation))
    draw, block = comp.sampler(n, 2), comp.block_sampler(n)
    one, other = np.random.default_rng(11), np.random.default_rng(11)
    rows = np.stack([draw(one) for _ in range(300)])
    assert np.array_equal(rows, np.concatenate([block(other, 100), block(other, 200)]))
    assert one.random() == other.random()  # and the stream is left where the loop leaves it


@pytest.mark.parametrize(
    "spread", [NormalCompute(0.004, 0.001), EmpiricalCompute(tuple(np.linspace(0.001, 0.009, 331)))], ids=str
)
@pytest.mark.parametrize("n", [3, 8])
def test_the_step_spread_drawn_in_blocks_is_the_per_iteration_draws_bit_for_bit(spread, n):
    """recurrence_draws.step_draws (the measured step's deviation, advise --profile's speed) gives exactly what one
    Compute.step_deviations draw per iteration on its stream gives, across the blocks' seams."""
    from runtime_model.core.scenario import Compute
    from runtime_model.prediction.recurrence_draws import STEP_STREAM, draw_block, step_draws

    comp = Compute(0.01, 0.02, 0.005, distribution=NormalCompute(0.03, 0.004), step_spread=spread)
    one, rows = np.random.default_rng((5, STEP_STREAM)), 2 * draw_block(n) + 7
    draw = comp.step_deviations(n)
    expected = np.stack([draw(one) for _ in range(rows)])
    blocks = step_draws(comp, n, 5)
    assert np.array_equal(expected, np.stack([next(blocks) for _ in range(rows)]))


def test_a_node_term_keeps_the_per_iteration_loop():
    from runtime_model.core.scenario import Compute
    from runtime_model.core.variation import Variation

    comp = Compute(
        0.01, 0.02, 0.005, distribution=NormalCompute(0.03, 0.004), variation=Variation(node_cv=0.05)
    )
    assert comp.block_sampler(8) is None

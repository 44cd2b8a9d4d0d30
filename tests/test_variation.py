"""Stragglers and the structure of compute variation; the factors as Shapley values.

Properties: a persistent slowdown never lets a connected gossip schedule run faster than the slowest
rank's pace; more i.i.d. variance never helps All-Reduce; gossip still escapes part of i.i.d. jitter;
the Shapley parts sum to the gap and do not depend on the order of evaluation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime_model.advice.advisor import advise
from runtime_model.core.attribution import shapley
from runtime_model.core.errors import InvalidValue
from runtime_model.core.variation import Variation, parse_straggler
from runtime_model.presets import to_model as presets


def _scenario(gpus=32, k=4, cv=0.0, **kw):
    return presets.scenario_from_choice(
        presets.resolve(presets.PresetRequest(gpus, gpus_per_node=k, network="ib-100", compute_cv=cv, **kw))
    )


def _slowest_pace_s(sc) -> float:
    """The slowest rank's own pace per iteration: s_max x C + optimizer (Decent-DP's compute)."""
    c = sc.decent_dp_compute
    return float(c.variation.factors(sc.shape.gpus).max()) * c.compute_s + c.optimizer_s


def test_factors_put_stragglers_first_and_draw_the_spread_once():
    v = Variation(straggler_factor=2.0, straggler_count=3)
    assert list(v.factors(6)) == [2.0, 2.0, 2.0, 1.0, 1.0, 1.0]
    spread = Variation(rank_cv=0.1)
    assert np.array_equal(spread.factors(64), spread.factors(64))  # the same every prediction
    assert Variation().is_iid and not v.is_iid and not spread.is_iid


def test_the_issues_example_every_option_at_least_the_stragglers_pace():
    """advise --gpus 32 --gpus-per-node 4 --network ib-100 --compute-cv 0 --straggler 2.0: All-Reduce and
    every runnable topology at >= the straggler's pace (about 2x the compute)."""
    sc = _scenario(straggler=(2.0, 1))
    adv = advise(sc)
    pace = _slowest_pace_s(sc)
    assert adv.allreduce.mean_s >= 2 * sc.compute.compute_s
    for row in adv.rows:
        if row.applicable and row.runnable:
            assert row.prediction.mean_s >= pace * (1 - 1e-9), row.topology


@settings(max_examples=20, deadline=None)
@given(
    factor=st.floats(1.0, 3.0),
    count=st.integers(1, 8),
    topology=st.sampled_from(["ring", "one-peer-exp", "alternating-exp-ring", "complete", "base-2"]),
)
@example(factor=1.001953125, count=1, topology="ring")  # its transient outlasts the window (~12,000 iterations)
def test_a_persistent_slowdown_is_never_escaped(factor, count, topology):
    sc = _scenario(straggler=(factor, count))
    adv = advise(sc, topologies=[topology])
    row = adv.rows[0]
    assert row.prediction.mean_s >= _slowest_pace_s(sc) * (1 - 1e-9)


@settings(max_examples=15, deadline=None)
@given(cv=st.floats(0.0, 0.4), more=st.floats(0.0, 0.4), gpus=st.sampled_from([8, 32, 128]))
def test_more_iid_variance_never_helps_allreduce(cv, more, gpus):
    lo, hi = _scenario(gpus, cv=cv), _scenario(gpus, cv=min(1.0, cv + more))
    assert advise(hi, topologies=[]).allreduce.mean_s >= advise(lo, topologies=[]).allreduce.mean_s - 1e-12


def test_gossip_escapes_part_of_iid_jitter_but_not_a_straggler():
    calm, jittery = _scenario(cv=0.0), _scenario(cv=0.3)
    gain = {}
    for name, sc in (("calm", calm), ("jittery", jittery)):
        adv = advise(sc, topologies=["alternating-exp-ring"])
        gain[name] = adv.allreduce.mean_s - adv.rows[0].prediction.mean_s
    assert gain["jittery"] > gain["calm"]  # All-Reduce pays the max of 32 draws, gossip less


def test_node_correlated_terms_are_shared_within_a_node():
    sc = _scenario(8, 4, cv=0.0, node_cv=0.2)
    draw = sc.compute.sampler(8, 4)
    c = draw(np.random.default_rng(1))
    assert np.allclose(c[:4], c[0]) and np.allclose(c[4:], c[4]) and not np.isclose(c[0], c[4])


@pytest.mark.parametrize(
    "kw",
    [
        {"straggler": (0.5, 1)},  # a "straggler" faster than the rest
        {"straggler": (2.0, 0)},
        {"straggler": (2.0, 33)},  # more stragglers than GPUs
        {"rank_cv": -0.1},
        {"node_cv": float("nan")},
        {"straggler": (float("nan"), 1)},
    ],
)
def test_bad_variation_inputs_are_refused(kw):
    with pytest.raises(InvalidValue):
        presets.resolve(presets.PresetRequest(32, **kw))


def test_parse_straggler():
    assert parse_straggler("1.5") == (1.5, 1) and parse_straggler("1.3:8") == (1.3, 8)
    with pytest.raises(ValueError):
        parse_straggler("fast")


# ------------------------------------------------------------------------------- Shapley attribution


def test_shapley_hand_computed_two_players():
    # v({}) = 0, v(a) = 1, v(b) = 3, v(ab) = 6: phi_a = (1 + (6 - 3)) / 2 = 2, phi_b = (3 + (6 - 1)) / 2 = 4
    table = {frozenset(): 0, frozenset("a"): 1, frozenset("b"): 3, frozenset("ab"): 6}
    assert shapley(["a", "b"], table.__getitem__) == pytest.approx({"a": 2.0, "b": 4.0})


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.floats(-10, 10), min_size=8, max_size=8))
def test_shapley_sums_to_the_whole_and_ignores_the_order(values):
    players = ("overlap", "links", "variance")
    subsets = [frozenset(c) for r in range(4) for c in itertools.combinations(players, r)]
    table = dict(zip(subsets, values, strict=True))
    phi = shapley(players, table.__getitem__)
    assert sum(phi.values()) == pytest.approx(table[frozenset(players)] - table[frozenset()], abs=1e-9)
    for order in itertools.permutations(players):
        assert shapley(order, table.__getitem__) == pytest.approx(phi)


@pytest.mark.parametrize("kw", [{}, {"straggler": (1.5, 4)}, {"node_cv": 0.1}])
def test_factor_parts_sum_to_the_gap(kw):
    sc = _scenario(64, 8, cv=0.1, **kw)
    adv = advise(sc)
    for row in adv.rows:
        if row.applicable:
            gap = adv.allreduce.mean_s - row.prediction.mean_s
            assert row.prediction.factors.total_s == pytest.approx(gap, abs=1e-9)


def test_the_anova_p_is_scipy_stats_f_oneway_without_importing_scipy_stats():
    """variation_fit draws its F test from scipy.special (scipy.stats costs a second of import)."""
    from scipy import stats

    from calibration.variation_fit import one_way_anova_p

    rng = np.random.default_rng(3)
    for shift in (0.0, 0.02, 0.2):
        rows = [rng.normal(1.0 + shift * i, 0.1, size=20 + i) for i in range(4)]
        assert one_way_anova_p(rows) == pytest.approx(stats.f_oneway(*rows).pvalue, rel=1e-9, abs=1e-300)

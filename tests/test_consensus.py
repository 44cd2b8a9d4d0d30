"""Consensus metrics: fast paths agree with dense SVD, known closed forms, edge cases, speed at n = 65,536;
the worst single round ||W_r - J||_2 and tau / p (Koloskova et al. 2020) against dense numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_model.convergence.consensus import (
    ConsensusError,
    consensus_metrics,
    dense_rounds,
    round_contraction,
    worst_round_contraction,
)
from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.registry import TOPOLOGIES, build_schedule, topology_names
from runtime_model.topology.schedule import Round, Schedule

SMALL_SHAPES = [(2, 1), (4, 2), (6, 3), (8, 1), (12, 4), (16, 4), (20, 2), (24, 8), (32, 4), (40, 8), (64, 8)]


def _cases():
    for n, k in SMALL_SHAPES:
        shape = ClusterShape(n, k)
        for name in topology_names():
            if TOPOLOGIES[name].applicability(shape) is None:
                yield name, shape


@pytest.mark.parametrize(("name", "shape"), list(_cases()), ids=lambda v: str(v))
def test_fast_path_equals_dense_svd(name, shape):
    s = build_schedule(name, shape)
    fast, dense = consensus_metrics(s), consensus_metrics(s, "dense-svd")
    assert dense.method == "dense-svd"
    assert fast.exact_rounds == dense.exact_rounds
    assert fast.rho == pytest.approx(dense.rho, abs=1e-10)
    assert fast.rho_per_round == pytest.approx(dense.rho_per_round, abs=1e-9)
    assert fast.worst_round_contraction == pytest.approx(dense.worst_round_contraction, abs=1e-10)
    assert fast.tau_over_p == pytest.approx(dense.tau_over_p, rel=1e-9)
    if dense.exact_rounds is not None:
        # the projection check must find the same round count as the dense products
        proj = consensus_metrics(s, "exact-projection-check")
        assert proj.method == "exact-projection-check" and proj.exact_rounds == dense.exact_rounds


@pytest.mark.parametrize(("name", "shape"), list(_cases()), ids=lambda v: str(v))
def test_period_product_by_operators_equals_dense_products(name, shape):
    """product-svd builds the period product from the rounds' O(n) operators, static graphs included."""
    s = build_schedule(name, shape)
    product, dense = consensus_metrics(s, "product-svd"), consensus_metrics(s, "dense-svd")
    assert product.method == "product-svd"
    assert product.exact_rounds == dense.exact_rounds
    assert product.rho == pytest.approx(dense.rho, abs=1e-10)
    assert product.worst_round_contraction == pytest.approx(dense.worst_round_contraction, abs=1e-10)


@pytest.mark.parametrize(("n", "k"), [(24, 6), (32, 4), (64, 8), (96, 3), (256, 8), (512, 4)])
def test_hadamard_blocks_equal_the_period_product_for_bluefogs_dynamic_graph(n, k):
    """Its rounds commute with flipping any bit of the node index: m blocks of k x k give the same rho."""
    s = build_schedule("bluefog-dynamic-exp", ClusterShape(n, k))
    blocks, product = consensus_metrics(s, gpus_per_node=k), consensus_metrics(s, "product-svd")
    assert blocks.method == "hadamard-blocks"
    assert blocks.rho == pytest.approx(product.rho, abs=1e-10)
    assert blocks.exact_rounds == product.exact_rounds
    assert blocks.worst_round_contraction == product.worst_round_contraction


def test_hadamard_blocks_refuse_rounds_that_do_not_commute_with_node_flips():
    s = build_schedule("ring", ClusterShape(12, 3))  # 4 nodes; ring pairs cross node 0-1 but not 1-2
    with pytest.raises(ConsensusError, match="node index"):
        consensus_metrics(s, "hadamard-blocks", gpus_per_node=3)


def test_a_graph_neither_circulant_nor_exact_takes_the_period_product_up_to_512_ranks():
    for n in (64, 512):
        s = build_schedule("bluefog-dynamic-exp", ClusterShape(n, 8))
        assert consensus_metrics(s).method == "product-svd"  # without the shape's GPUs per node
    assert (
        consensus_metrics(build_schedule("bluefog-dynamic-exp", ClusterShape(1024, 8))).method
        == "power-iteration"
    )


@pytest.mark.parametrize("n", [10, 12, 14, 64, 100])
def test_ring_uses_block_circulant_and_matches_dense(n):
    s = build_schedule("ring", ClusterShape(n, 2))
    fast, dense = consensus_metrics(s), consensus_metrics(s, "dense-svd")
    assert fast.method == "fft-block-circulant"
    assert fast.rho == pytest.approx(dense.rho, abs=1e-12)
    assert fast.exact_rounds is None


@pytest.mark.parametrize("n", [6, 8, 10, 16, 30, 64, 100, 65536])
def test_ring_rho_is_cos_2pi_over_n(n):
    # the two-round ring's period operator has singular values |cos(2 pi f / n)| on the mean-zero modes
    m = consensus_metrics(build_schedule("ring", ClusterShape(n, 1)))
    assert m.rho == pytest.approx(math.cos(2 * math.pi / n), abs=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4, 6, 8, 16])
def test_static_exp_spectral_gap_matches_ying_et_al(p):
    # Ying et al. 2021: for n = 2^p the static exponential graph has spectral gap 2 / (1 + p)
    m = consensus_metrics(build_schedule("static-exp", ClusterShape(2**p, 1)))
    assert m.method == "fft-circulant"
    assert m.spectral_gap == pytest.approx(2 / (1 + p), abs=1e-12)
    assert m.exact_rounds is None


@pytest.mark.parametrize("n", [5, 12, 20, 33])
def test_static_exp_any_n_matches_dense(n):
    s = build_schedule("static-exp", ClusterShape(n, 1))
    assert consensus_metrics(s).rho == pytest.approx(consensus_metrics(s, "dense-svd").rho, abs=1e-12)


def test_exact_topologies():
    assert consensus_metrics(build_schedule("complete", ClusterShape(64, 8))).exact_rounds == 1
    assert consensus_metrics(build_schedule("one-peer-exp", ClusterShape(1024, 8))).exact_rounds == 10
    aer = consensus_metrics(build_schedule("alternating-exp-ring", ClusterShape(1024, 8)))  # m = 128
    assert aer.exact_rounds == 14 and aer.rho == 0.0
    for m in (
        consensus_metrics(build_schedule("base-2", ClusterShape(1000, 8))),
        consensus_metrics(build_schedule("base-2", ClusterShape(999, 1))),
    ):
        assert m.exact_rounds is not None and m.rho == 0.0
        assert m.rho_per_round == 0.0 and m.spectral_gap == 1.0 and m.transient_proxy == 0.0


def test_large_n_base2_uses_projection_and_is_exact_within_one_period():
    s = build_schedule("base-2", ClusterShape(3000, 1))
    m = consensus_metrics(s)
    assert m.method == "exact-projection-check"
    assert m.exact_rounds == s.period


def test_transient_proxy_uses_per_round_rho():
    s = build_schedule("ring", ClusterShape(16, 1))
    m = consensus_metrics(s)
    r = m.rho ** (1 / s.period)
    assert m.rho_per_round == pytest.approx(r)
    assert m.spectral_gap == pytest.approx(1 - r)
    assert m.transient_proxy == pytest.approx(16**3 * r**4 / (1 - r) ** 4)


def test_disconnected_schedule_has_rho_one_and_infinite_proxy():
    n = 8
    halves = Round(np.repeat([0, 1], n // 2), np.array([0.25, 0.25]))  # two islands that never meet
    s = Schedule("islands", (halves,))
    for method in (None, "dense-svd", "power-iteration"):
        m = consensus_metrics(s, method)
        assert m.rho == pytest.approx(1.0) and m.exact_rounds is None
        assert m.transient_proxy == math.inf and m.spectral_gap == pytest.approx(0.0)


def test_single_rank_is_trivially_exact():
    for name in ("complete", "base-2", "static-exp"):
        m = consensus_metrics(build_schedule(name, ClusterShape(1, 1)))
        assert m.exact_rounds == 0 and m.rho == 0.0 and m.transient_proxy == 0.0


def test_power_iteration_agrees_with_dense_on_non_exact_schedules():
    for s in (
        build_schedule("ring", ClusterShape(24, 1)),
        build_schedule("static-exp", ClusterShape(20, 1)),
        _random_schedule(np.random.default_rng(0), 30, 3),
    ):
        assert consensus_metrics(s, "power-iteration").rho == pytest.approx(
            consensus_metrics(s, "dense-svd").rho, rel=1e-5
        )


def test_unknown_method_and_unusable_forced_method():
    s = build_schedule("ring", ClusterShape(12, 1))
    with pytest.raises(ConsensusError, match="unknown consensus method"):
        consensus_metrics(s, "magic")
    with pytest.raises(ConsensusError, match="not exact"):
        consensus_metrics(s, "exact-projection-check")
    with pytest.raises(ConsensusError, match="circulant"):
        consensus_metrics(build_schedule("one-peer-exp", ClusterShape(64, 1)), "fft-circulant")


def _random_schedule(rng, n, period):
    rounds = []
    for _ in range(period):
        labels = rng.integers(0, max(1, n // 3), size=n)
        _, labels = np.unique(labels, return_inverse=True)
        rounds.append(Round(labels.astype(np.int64), rng.uniform(0.1, 0.9, size=labels.max() + 1)))
    return Schedule("random", tuple(rounds))


@st.composite
def rotation_invariant_schedules(draw):
    """Rounds of consecutive g-rank windows (shifted), g dividing a block s: invariant under rotating by s."""
    s = draw(st.sampled_from([2, 3, 4, 6, 8]))
    blocks = draw(st.integers(2, 6))
    n = s * blocks
    rounds = []
    for _ in range(draw(st.integers(1, 3))):
        g = draw(st.sampled_from([d for d in range(1, s + 1) if s % d == 0]))
        shift = draw(st.integers(0, n - 1))
        w = draw(st.floats(0.0, 1.0))
        labels = ((np.arange(n) + shift) % n) // g
        rounds.append(Round(labels.astype(np.int64), np.full(n // g, w)))
    return Schedule("windows", tuple(rounds))


@settings(max_examples=60, deadline=None)
@given(rotation_invariant_schedules())
def test_block_circulant_path_matches_dense_for_random_invariant_schedules(s):
    fast, dense = consensus_metrics(s), consensus_metrics(s, "dense-svd")
    assert fast.method in ("fft-circulant", "fft-block-circulant")
    assert fast.exact_rounds == dense.exact_rounds
    # rho near 1 comes from near-defective mixing products, whose eigenvalues LAPACK builds agree on only to
    # about sqrt(machine epsilon): 1e-9 failed on numpy 2.5 (GPU host) by 2e-9
    assert fast.rho == pytest.approx(dense.rho, abs=1e-7)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 40), st.integers(1, 4), st.integers(0, 10**6))
def test_power_iteration_never_exceeds_dense_and_forced_paths_agree(n, period, seed):
    s = _random_schedule(np.random.default_rng(seed), n, period)
    dense = consensus_metrics(s, "dense-svd")
    assert consensus_metrics(s).rho == pytest.approx(dense.rho, abs=1e-9)
    assert consensus_metrics(s, "power-iteration").rho <= dense.rho + 1e-9


def test_dense_rounds_of_static_exp_is_the_circulant():
    s = build_schedule("static-exp", ClusterShape(8, 1))
    (w,) = dense_rounds(s)
    for i in range(8):
        assert set(np.flatnonzero(w[i]).tolist()) == {i, (i + 1) % 8, (i + 2) % 8, (i + 4) % 8}


def test_consensus_at_65536_takes_a_closed_form_path_for_decent_dp_topologies():
    """No power iteration at 65,536 ranks (its time is benchmarks/speed.py's: tests assert no timings)."""
    shape = ClusterShape(65536, 8)
    for name in ("complete", "ring", "one-peer-exp", "alternating-exp-ring", "base-2", "static-exp"):
        assert consensus_metrics(build_schedule(name, shape)).method != "power-iteration", name
    assert consensus_metrics(build_schedule("one-peer-exp", shape)).exact_rounds == 16


# ---------------------------------------------------------------- worst single round and tau / p


def _dense_worst_round(schedule) -> float:
    """max_r ||W_r - J||_2 straight from numpy, independent of runtime_model.convergence.consensus."""
    n = schedule.n
    j = np.full((n, n), 1.0 / n)
    return max(float(np.linalg.norm(w - j, 2)) for w in dense_rounds(schedule))


@pytest.mark.parametrize(("name", "shape"), list(_cases()), ids=lambda v: str(v))
def test_worst_round_matches_dense_numpy(name, shape):
    s = build_schedule(name, shape)
    assert s.n <= 64
    assert worst_round_contraction(s) == pytest.approx(_dense_worst_round(s), abs=1e-10)
    m = consensus_metrics(s)
    assert m.worst_round_contraction == pytest.approx(_dense_worst_round(s), abs=1e-10)
    assert m.tau_over_p == pytest.approx(s.period / (1 - m.rho**2))


def test_ring_8_exact_values():
    # each ring round is 4 disjoint pairs with weight 1/2: x = (1, 1, -1, -1, 0, ...) on two pairs is a
    # mean-zero fixed point, so ||W_r - J||_2 = 1 exactly; the period has rho = cos(2 pi / 8)
    s = build_schedule("ring", ClusterShape(8, 2))
    m = consensus_metrics(s)
    assert m.worst_round_contraction == 1.0
    assert m.rho == pytest.approx(math.cos(2 * math.pi / 8), abs=1e-12)
    assert m.tau_over_p == pytest.approx(2 / (1 - 0.5))  # rho^2 = 1/2
    for w in dense_rounds(s):
        assert np.linalg.norm(w - np.full((8, 8), 1 / 8), 2) == pytest.approx(1.0, abs=1e-12)


def test_one_peer_exp_is_exact_per_period_but_not_per_round():
    for n in (2, 8, 64):
        s = build_schedule("one-peer-exp", ClusterShape(n, 1))
        m = consensus_metrics(s)
        assert m.rho == 0.0 and m.transient_proxy == 0.0  # the per-period view: exact
        assert m.tau_over_p == s.period  # Koloskova et al.: p = 1 over tau = one period
        # the single-round view: a pair round leaves disagreement between pairs untouched (n = 2: one pair, exact)
        assert m.worst_round_contraction == (0.0 if n == 2 else 1.0)
        assert m.worst_round_contraction == pytest.approx(_dense_worst_round(s), abs=1e-12)


def test_exact_schedules_all_have_worst_round_one_and_complete_zero():
    shape = ClusterShape(64, 8)
    for name in ("ring", "one-peer-exp", "alternating-exp-ring", "base-2"):
        assert consensus_metrics(build_schedule(name, shape)).worst_round_contraction == 1.0
    complete = consensus_metrics(build_schedule("complete", shape))
    assert complete.worst_round_contraction == 0.0 and complete.tau_over_p == 1.0


@pytest.mark.parametrize("p", [2, 3, 4, 6])
def test_static_exp_worst_round_is_its_rho(p):
    # one round per period, circulant hence normal: ||W - J||_2 = max |eigenvalue| over f != 0 = rho = (p-1)/(p+1)
    s = build_schedule("static-exp", ClusterShape(2**p, 1))
    m = consensus_metrics(s)
    assert m.worst_round_contraction == pytest.approx((p - 1) / (p + 1), abs=1e-12)
    assert m.worst_round_contraction == pytest.approx(_dense_worst_round(s), abs=1e-12)
    assert m.tau_over_p == pytest.approx(1 / (1 - ((p - 1) / (p + 1)) ** 2))


@pytest.mark.parametrize(("n", "w"), [(2, 0.5), (2, 0.8), (5, 0.6), (5, 0.2), (7, 1.0), (7, 0.0)])
def test_single_group_round_contraction_closed_form(n, w):
    rnd = Round(np.zeros(n, dtype=np.int64), np.array([w]))
    expected = abs(w - (1 - w) / (n - 1))
    assert round_contraction(rnd) == pytest.approx(expected, abs=1e-12)
    assert round_contraction(rnd) == pytest.approx(
        np.linalg.norm(rnd.dense() - np.full((n, n), 1 / n), 2), abs=1e-12
    )


def test_disconnected_and_single_rank_worst_round():
    halves = Round(np.repeat([0, 1], 4), np.array([0.25, 0.25]))
    assert consensus_metrics(Schedule("islands", (halves,))).worst_round_contraction == 1.0
    assert consensus_metrics(Schedule("islands", (halves,))).tau_over_p == math.inf
    for name in ("complete", "base-2", "static-exp"):
        assert consensus_metrics(build_schedule(name, ClusterShape(1, 1))).worst_round_contraction == 0.0


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 40), st.integers(1, 4), st.integers(0, 10**6))
def test_worst_round_matches_dense_for_random_schedules(n, period, seed):
    s = _random_schedule(np.random.default_rng(seed), n, period)
    assert worst_round_contraction(s) == pytest.approx(_dense_worst_round(s), abs=1e-9)
    assert consensus_metrics(s, "dense-svd").worst_round_contraction == pytest.approx(
        _dense_worst_round(s), abs=1e-9
    )


# ---------------------------------------------------------------- a circulant graph's rho from its offsets


def _fft_rho(n, offsets):
    row = np.zeros(n)
    row[0] = 1.0 / (len(offsets) + 1)
    row[list(offsets)] = 1.0 / (len(offsets) + 1)
    lam = np.abs(np.fft.rfft(row))
    return float(lam[1:].max()) if lam.size > 1 else 0.0


def test_circulant_rho_from_the_offsets_is_the_fft_of_the_row():
    from runtime_model.topology.circulant import circulant_rho

    rng = np.random.default_rng(7)
    sizes = list(range(1, 700)) + [int(n) for n in rng.integers(700, 70_000, 60)]
    for n in sizes:
        exponential = tuple(1 << j for j in range((n - 1).bit_length()))
        assert circulant_rho(n, exponential) == pytest.approx(_fft_rho(n, exponential), abs=1e-12), n
        if n > 8:
            other = tuple(sorted({int(d) for d in rng.integers(1, n, 5)}))
            assert circulant_rho(n, other) == pytest.approx(_fft_rho(n, other), abs=1e-12), (n, other)


def test_circulant_rho_of_the_exponential_graph_at_a_power_of_two_is_ying_et_als():
    """n = 2^tau: (tau - 1) / (tau + 1) (Ying et al., NeurIPS 2021), up to 2^24 without n-sized work."""
    import tracemalloc

    from runtime_model.topology.circulant import circulant_rho

    tracemalloc.start()
    for tau in range(2, 25):
        assert circulant_rho(1 << tau, tuple(1 << j for j in range(tau))) == pytest.approx(
            (tau - 1) / (tau + 1), abs=1e-12
        )
    assert tracemalloc.get_traced_memory()[1] < 16 << 20  # far below one n-sized vector at 2^24 (128 MiB)
    tracemalloc.stop()

"""Consensus of node-XOR-invariant schedules (runtime_model.convergence.consensus_hypercube): the
invariance test says yes exactly where flipping a node-index bit maps every round onto itself, and the
block-by-block rho equals the dense period product's."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_model.convergence.consensus_hypercube import hypercube_rho, node_xor_invariant
from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.registry import build_schedule
from runtime_model.topology.schedule import Round, Schedule


@pytest.mark.parametrize(("n", "k"), [(64, 4), (256, 8)])
def test_bluefogs_graph_is_node_xor_invariant_and_its_rho_is_the_dense_one(n, k):
    schedule = build_schedule("bluefog-dynamic-exp", ClusterShape(gpus=n, gpus_per_node=k))
    assert node_xor_invariant(schedule, k)
    if n > 64:
        return  # the dense product below is for small n
    prod = np.eye(n)
    for rnd in schedule.rounds:
        prod = rnd.dense() @ prod
    dense = np.linalg.norm(prod - np.full((n, n), 1.0 / n), 2)
    assert hypercube_rho(schedule, k) == pytest.approx(dense, rel=1e-9, abs=1e-12)


def test_a_round_that_flipping_a_node_bit_moves_is_not_invariant():
    n, k = 16, 2  # 8 nodes of 2 ranks
    pairs = Round.from_groups(n, [[2 * i, 2 * i + 1] for i in range(n // 2)])  # inside each node: invariant
    ring = [[2 * j, 2 * ((j + 1) % 8)] for j in (1, 3, 5, 7)]  # nodes 1-2, 3-4, 5-6, 7-0: a flip of bit 0
    shifted = Round.from_groups(n, ring + [[r] for r in range(1, n, 2)])  # maps 1-2 onto 0-3, no group
    assert node_xor_invariant(Schedule("pairs", (pairs,)), k)
    assert not node_xor_invariant(Schedule("shifted", (pairs, shifted)), k)


def test_equal_groups_with_different_weights_are_not_invariant():
    n, k = 8, 2
    groups = [[2 * i, 2 * i + 1] for i in range(n // 2)]
    same = Round.from_groups(n, groups, 0.5)
    uneven = Round.from_groups(n, groups, [0.5, 0.5, 0.4, 0.5])
    assert node_xor_invariant(Schedule("same", (same,)), k)
    assert not node_xor_invariant(Schedule("uneven", (uneven,)), k)

"""Consensus of schedules whose rounds commute with flipping a bit of the node index: m k x k problems.

Why: BlueFog's inner-outer dynamic exponential graph (library_topologies.build_bluefog_dynamic_exp) is
neither circulant nor exact in a period, so its rho took the period product of n x n matrices (dense at
512 ranks, power iteration above: a lower bound, 300 passes over n). Its rounds are invariant under
every node-index XOR (node i's local rank a pairs with node i ^ 2^j's, the same inside every node), so
each round W commutes with the group (Z_2)^log2(m) acting on nodes and the Walsh-Hadamard transform over
the node index splits it into m independent k x k blocks:

    W_h[a, b] = sum_d W[(0, a), (d, b)] (-1)^popcount(h & d)        h, d in 0 .. m-1

(rows of node 0 suffice: W[(i, a), (i ^ d, b)] does not depend on i). The period product splits the same
way, J = 11^T / n lives in block h = 0 as 11^T / k, and rho = max_h sigma_max(P_h - [h = 0] 11^T / k).
That is exact, and costs m L k^3 (L rounds), about what n = 64 costs at any n.
"""

from __future__ import annotations

import numpy as np

from runtime_model.topology.schedule import Round, Schedule


def node_xor_invariant(schedule: Schedule, gpus_per_node: int) -> bool:
    """Does every round map onto itself (groups and weights) when any bit of the node index flips?"""
    n, k = schedule.n, gpus_per_node
    m = n // k if k > 0 and n % k == 0 else 0
    if schedule.static_graph is not None or m < 2 or m & (m - 1):
        return False
    ranks = np.arange(n)
    flips = np.stack([((ranks // k) ^ (1 << j)) * k + ranks % k for j in range(m.bit_length() - 1)])
    return all(_invariant(rnd, flips) for rnd in schedule.rounds)


def _invariant(rnd: Round, perms: np.ndarray) -> bool:
    """Every permutation (a row of perms) maps the round's groups onto groups of the same weight (numpy's
    allclose tolerances), all flips at once: the period of BlueFog's graph at 1,024 ranks checks ~1,200
    round-flip pairs, one numpy call chain each cost more than the rest of its advice."""
    labels, weights = rnd.labels, rnd.weights
    moved = labels[perms]
    image = np.empty((perms.shape[0], weights.size), dtype=np.int64)
    image[:, labels] = moved
    if not np.array_equal(image[:, labels], moved):
        return False
    return bool(np.all(np.abs(weights[image] - weights) <= 1e-8 + 1e-5 * np.abs(weights)))


def hypercube_rho(schedule: Schedule, gpus_per_node: int) -> float:
    """||P - J||_2 over one period, block by block (module doc); needs node_xor_invariant."""
    k = gpus_per_node
    m = schedule.n // k
    prod = np.broadcast_to(np.eye(k), (m, k, k)).copy()
    for rnd in schedule.rounds:
        prod = _blocks(rnd, k, m) @ prod
    prod[0] -= 1.0 / k
    return float(np.linalg.svd(prod, compute_uv=False)[:, 0].max())


def _blocks(rnd: Round, k: int, m: int) -> np.ndarray:
    """W_h for every h (m x k x k) from node 0's rows of the round."""
    sizes = rnd.group_sizes().astype(float)
    c_g = np.where(sizes > 1, (1.0 - rnd.weights) / np.maximum(sizes - 1.0, 1.0), 0.0)
    h = np.arange(m)
    blocks = np.zeros((m, k, k))
    for a in range(k):
        g = rnd.labels[a]
        members = np.flatnonzero(rnd.labels == g)
        for j in members:
            weight = rnd.weights[g] if j == a else c_g[g]
            if sizes[g] == 1:
                weight = 1.0
            d, b = divmod(int(j), k)
            parity = (np.bitwise_count(h & d) & 1).astype(np.int64)  # uint8 would wrap in 1 - 2p
            blocks[:, a, b] += weight * (1 - 2 * parity)
    return blocks

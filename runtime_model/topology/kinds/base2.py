"""base-2: the 1-peer Base-2 graph (Takezawa et al., NeurIPS 2023): one peer per iteration, any n, exact
average in finitely many rounds (topology_builders.build_base2).

Quotient at n = 2^a q (q odd): hypercube rounds over the 2^a blocks of q ranks (topology_builders.
_base2_pairs) after the simple Base-2 rounds inside each block; the block bits are folded like
one-peer-exp's, keeping the bits below the node. Consensus: exact, from the reduced schedule.
"""

from __future__ import annotations

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.kind import TopologyInfo
from runtime_model.topology.quotient import (
    BlockFold,
    BuildByName,
    NoReduction,
    Reduction,
    bits_for,
    identity_ranks,
    log2,
)
from runtime_model.topology.topology_builders import (
    _hypercube_len,
    _simple_base2_len,
    always_applicable,
    build_base2,
)

# base-2's quotient keeps whole blocks of its odd part q (2^(c+1) of them, k = 2^c d): the ranks it may
# hold at most (a per-rank run of that size takes ~1.5 s and ~300 MB). Inside a block no two positions
# play the same part in every round (the coarsest partition the rounds respect has q classes: tests), so
# no smaller system is exact: above this rtmodel says it cannot predict base-2 there.
BASE2_MAX_RANKS = 1 << 16


def reduce_base2(name: str, shape: ClusterShape, build: BuildByName, target: int) -> Reduction:
    """The block fold above; at odd n (one simple graph, no block structure) the system itself."""
    n, k = shape.gpus, shape.gpus_per_node
    a = log2(n & -n)
    q = n >> a
    if q > 1 and _simple_base2_len(n) < _simple_base2_len(q) + _hypercube_len(1 << a):  # n odd
        if n > max(target, BASE2_MAX_RANKS):
            raise NoReduction(
                f"base-2 at odd n = {n} is one simple Base-2 graph whose ranks all play different parts, "
                f"so only all {n} ranks reproduce it (at most {BASE2_MAX_RANKS} are simulated)"
            )
        small = build(name, shape)  # no quotient: the system itself, rank by rank
        return Reduction(name, shape, shape, small, tuple(range(small.period)), identity_ranks)
    c = log2(k & -k)  # k = 2^c d with d | q: 2^c blocks of q ranks hold whole nodes
    unit, keep = q, c  # (q = 1: a power of 2, the simple graph is the hypercube on all ranks)
    bits = bits_for(1 << a, unit, keep, a, target)
    if q > 1:
        bits = max(bits, min(a, keep + 1))
    small_shape = ClusterShape(unit << bits, k)
    if small_shape.gpus > max(target, BASE2_MAX_RANKS):
        raise NoReduction(
            f"base-2 at n = {n} = 2^{a} x {q}: its exact quotient keeps whole blocks of the odd part {q} "
            f"({small_shape.gpus} ranks, over the {BASE2_MAX_RANKS} simulated), and no two ranks of a block play "
            "the same part in every round, so no smaller system reproduces it"
        )
    small = build(name, small_shape)
    fold = BlockFold(a, unit, keep, bits)
    inner = 0 if q == 1 else _simple_base2_len(q)
    round_map = tuple(range(inner)) + tuple(inner + fold.bit(i) for i in range(a))  # q = 1: inner is 0
    if len(round_map) == 0 or max(round_map) >= small.period:
        raise NoReduction("base-2: the reduced schedule does not have the folded rounds")
    return Reduction(name, shape, small_shape, small, round_map, fold)


TOPOLOGY = TopologyInfo(
    "base-2",
    "one peer, any n, exact average in finite rounds (Takezawa et al. 2023)",
    None,
    always_applicable,
    build_base2,
    reduce=reduce_base2,
)

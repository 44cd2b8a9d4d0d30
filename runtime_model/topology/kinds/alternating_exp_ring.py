"""alternating-exp-ring: intra-node average alternating with a node-pair average at node distance 2^i
(Decent-DP `alternating-exp-ring`, decent_dp/topo.py 0.2.3).

Quotient: the node index's bits folded like one-peer-exp's rank bits, keeping bits 0 and 1 (they decide
which node pairs run their inter-node iteration first), at least 3 bits when any are folded; each node
bit plays two rounds (intra, inter). Consensus: exact, from the reduced schedule.
"""

from __future__ import annotations

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.kind import TopologyInfo
from runtime_model.topology.quotient import (
    BlockFold,
    BuildByName,
    Reduction,
    bit_fold_quotient,
    bits_for,
    log2,
)
from runtime_model.topology.topology_builders import aer_applicability, build_alternating_exp_ring


def reduce_aer(name: str, shape: ClusterShape, build: BuildByName, target: int) -> Reduction:
    k = shape.gpus_per_node
    full_bits = log2(shape.nodes)
    keep = min(2, full_bits)
    bits = bits_for(1 << full_bits, k, keep, full_bits, target)
    if full_bits > bits:
        bits = max(bits, 3)
    return bit_fold_quotient(name, shape, build, BlockFold(full_bits, k, keep, bits), rounds_per_bit=2)


TOPOLOGY = TopologyInfo(
    "alternating-exp-ring",
    "intra-node average alternating with node-pair average (nodes a power of 2)",
    "alternating-exp-ring",
    aer_applicability,
    build_alternating_exp_ring,
    reduce=reduce_aer,
)

"""one-peer-exp: one peer at distance 2^i in round i (Decent-DP `one-peer-exp`, decent_dp/topo.py 0.2.3;
the one-peer exponential graph of Ying et al., NeurIPS 2021).

Quotient (hypercube_quotient, shared by SGP's graphs, which play the same rounds): n = 2^a, rank bits
below the node (log2 k of them) kept, the higher ones folded (quotient.bit_fold_quotient). Consensus:
exact in log2 n rounds, from the reduced schedule.
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
from runtime_model.topology.topology_builders import build_one_peer_exp, one_peer_exp_applicability


def hypercube_quotient(name: str, shape: ClusterShape, build: BuildByName, target: int) -> Reduction:
    full_bits, keep = log2(shape.gpus), log2(shape.gpus_per_node)
    bits = bits_for(1 << full_bits, 1, keep, full_bits, target)
    return bit_fold_quotient(name, shape, build, BlockFold(full_bits, 1, keep, bits))


TOPOLOGY = TopologyInfo(
    "one-peer-exp",
    "one peer at distance 2^i (n a power of 2)",
    "one-peer-exp",
    one_peer_exp_applicability,
    build_one_peer_exp,
    reduce=hypercube_quotient,
)

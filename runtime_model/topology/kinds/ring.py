"""ring: one peer per iteration, alternating ring neighbours (Decent-DP `ring`, decent_dp/topo.py 0.2.3).

Quotient: phi(r) = r mod n' with n' a multiple of lcm(2, k) dividing n (the rounds pair 2j with 2j +- 1,
so a rotation by an even number of whole nodes keeps them). Consensus in closed form (ring_consensus).
"""

from __future__ import annotations

import math

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.kind import ClosedConsensus, TopologyInfo
from runtime_model.topology.quotient import BuildByName, Reduction, rotation_quotient
from runtime_model.topology.topology_builders import build_ring, ring_applicability


def reduce_ring(name: str, shape: ClusterShape, build: BuildByName, target: int) -> Reduction:
    k = shape.gpus_per_node
    return rotation_quotient(name, shape, build, target, k * 2 // math.gcd(2, k))


def ring_consensus(red: Reduction) -> ClosedConsensus:
    """Ring (n even, pairs (2j, 2j+1) then (2j+1, 2j+2)), in closed form from its 2 x 2 Fourier symbols:
    per mode f of M = n/2, W0 = [[.5, .5], [.5, .5]] and W1(f) = [[.5, .5 e], [.5 conj(e), .5]] with
    e = exp(2 pi i f / M), so W1 W0 = [a; c] [1, 1] with |a| = |c| = |1 + e| / 4: rank one, singular value
    |1 + e| / 2 = |cos(pi f / M)|; mode 0 is J's. rho = max over f != 0 = cos(pi / M) = cos(2 pi / n)."""
    n = red.full.gpus
    if n <= 2:
        return ClosedConsensus(2, 1, 0.0, "symmetry", 0.0)
    return ClosedConsensus(2, None, abs(math.cos(2.0 * math.pi / n)), "symmetry", 1.0)


TOPOLOGY = TopologyInfo(
    "ring",
    "one peer, alternating ring neighbours (even n)",
    "ring",
    ring_applicability,
    build_ring,
    reduce=reduce_ring,
    consensus=ring_consensus,
)

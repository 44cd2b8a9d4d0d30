"""complete: one group of all n ranks every iteration (Decent-DP `complete`, decent_dp/topo.py 0.2.3).

Quotient: phi(r) = r mod n' with n' a multiple of k (whole nodes). The one group spans every node, so its
cost is the reduced group's shape scaled back to n ranks on m nodes (Reduction.group_scale; the NIC
sharing, a per-node property, is kept). Consensus: exact in one round, from the reduced schedule.
"""

from __future__ import annotations

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.kind import TopologyInfo
from runtime_model.topology.quotient import BuildByName, Reduction, rotation_quotient
from runtime_model.topology.topology_builders import always_applicable, build_complete


def reduce_complete(name: str, shape: ClusterShape, build: BuildByName, target: int) -> Reduction:
    return rotation_quotient(name, shape, build, target, shape.gpus_per_node, group_scale=True)


TOPOLOGY = TopologyInfo(
    "complete",
    "global average every iteration",
    "complete",
    always_applicable,
    build_complete,
    reduce=reduce_complete,
)

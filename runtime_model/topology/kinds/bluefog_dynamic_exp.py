"""bluefog-dynamic-exp: BlueFog's inner-outer dynamic exponential graph (bluefog/common/topology_util.py
GetInnerOuterExpo2DynamicSendRecvRanks; library_topologies.build_bluefog_dynamic_exp).

No quotient: its period lcm(k, log2 m, ...) changes with the number of nodes, so no smaller system plays
its rounds in the same order; above FULL_MAX_N rtmodel says it cannot predict it there (the row is not
applicable, with the reason). Consensus per rank (consensus.py "hadamard-blocks").
"""

from __future__ import annotations

from runtime_model.topology.kind import TopologyInfo
from runtime_model.topology.library_topologies import bluefog_dynamic_applicability, build_bluefog_dynamic_exp

TOPOLOGY = TopologyInfo(
    "bluefog-dynamic-exp",
    "BlueFog's inner-outer dynamic exponential graph, one peer per iteration (power-of-2 nodes)",
    None,
    bluefog_dynamic_applicability,
    build_bluefog_dynamic_exp,
)

"""Gossip topologies by name: the registry the advisor, the CLI and validation pick schedules from.

The builders (Decent-DP's four built-ins rebuilt without torch, plus base-2 and static-exp) live in
`topology_builders`; this module names them, says where each applies, and is the one place that
checks a topology name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.library_topologies import (
    bluefog_dynamic_applicability,
    bluefog_static_exp,
    build_bluefog_dynamic_exp,
    build_osgp_exp,
    build_sgp_exp,
    sgp_applicability,
)
from runtime_model.topology.schedule import Schedule
from runtime_model.topology.topology_builders import (
    TopologyError,
    TopologyNotApplicable,
    aer_applicability,
    always_applicable,
    build_alternating_exp_ring,
    build_base2,
    build_complete,
    build_one_peer_exp,
    build_ring,
    build_static_exp,
    one_peer_exp_applicability,
    require_applicable,
    ring_applicability,
)

__all__ = [
    "TOPOLOGIES",
    "TopologyError",
    "TopologyInfo",
    "TopologyNotApplicable",
    "UnknownTopology",
    "build_alternating_exp_ring",
    "build_base2",
    "build_complete",
    "build_one_peer_exp",
    "build_ring",
    "build_schedule",
    "build_static_exp",
    "topology_info",
    "topology_names",
]


class UnknownTopology(TopologyError):
    """No topology has this name."""


@dataclass(frozen=True)
class TopologyInfo:
    name: str
    description: str
    decent_dp_name: str | None
    applicability: Callable[[ClusterShape], str | None]  # None = applicable, else the reason why not
    build: Callable[[ClusterShape], Schedule]


TOPOLOGIES: dict[str, TopologyInfo] = {
    info.name: info
    for info in (
        TopologyInfo(
            "complete", "global average every iteration", "complete", always_applicable, build_complete
        ),
        TopologyInfo(
            "ring", "one peer, alternating ring neighbours (even n)", "ring", ring_applicability, build_ring
        ),
        TopologyInfo(
            "one-peer-exp",
            "one peer at distance 2^i (n a power of 2)",
            "one-peer-exp",
            one_peer_exp_applicability,
            build_one_peer_exp,
        ),
        TopologyInfo(
            "alternating-exp-ring",
            "intra-node average alternating with node-pair average (nodes a power of 2)",
            "alternating-exp-ring",
            aer_applicability,
            build_alternating_exp_ring,
        ),
        TopologyInfo(
            "base-2",
            "one peer, any n, exact average in finite rounds (Takezawa et al. 2023)",
            None,
            always_applicable,
            build_base2,
        ),
        TopologyInfo(
            "static-exp",
            "BlueFog's static exponential graph, ceil(log2 n) peers per iteration at once (Ying et al. 2021)",
            None,
            always_applicable,
            bluefog_static_exp,
        ),
        TopologyInfo(
            "bluefog-dynamic-exp",
            "BlueFog's inner-outer dynamic exponential graph, one peer per iteration (power-of-2 nodes)",
            None,
            bluefog_dynamic_applicability,
            build_bluefog_dynamic_exp,
        ),
        TopologyInfo(
            "sgp-exp",
            "SGP: one-peer exponential push-sum, exchange after the step (n a power of 2)",
            None,
            sgp_applicability,
            build_sgp_exp,
        ),
        TopologyInfo(
            "osgp-exp",
            "SGP --overlap: one-peer exponential push-sum hidden behind compute (n a power of 2)",
            None,
            sgp_applicability,
            build_osgp_exp,
        ),
    )
}


def topology_names() -> list[str]:
    return list(TOPOLOGIES)


def topology_info(name: str) -> TopologyInfo:
    """The one place a topology name is checked (callers ask here instead of testing TOPOLOGIES)."""
    try:
        return TOPOLOGIES[name]
    except KeyError:
        raise UnknownTopology(f"unknown topology {name!r}; choose from: {', '.join(TOPOLOGIES)}") from None


def build_schedule(name: str, shape: ClusterShape) -> Schedule:
    """Build a topology by name; raises TopologyNotApplicable (with the reason) or UnknownTopology."""
    info = topology_info(name)
    require_applicable(info.applicability, shape)
    return info.build(shape)

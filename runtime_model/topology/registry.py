"""Gossip topologies by name: the registry the advisor, the CLI and validation pick schedules from.

Each topology is one module of topology/kinds that fills one kind.TopologyInfo (its builder, where it
applies, its symmetry quotient, its closed-form consensus); this module lists them, in the order every
listing shows them, and is the one place that checks a topology name. Adding a topology: its module, one
line in TOPOLOGIES below, one test (docs/development.md "Add a topology").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.kind import TopologyInfo
from runtime_model.topology.kinds import (
    alternating_exp_ring,
    base2,
    bluefog_dynamic_exp,
    complete,
    one_peer_exp,
    osgp_exp,
    ring,
    sgp_exp,
    static_exp,
)
from runtime_model.topology.schedule import Schedule
from runtime_model.topology.topology_builders import (
    TopologyError,
    TopologyNotApplicable,
    build_alternating_exp_ring,
    build_base2,
    build_complete,
    build_one_peer_exp,
    build_ring,
    build_static_exp,
    require_applicable,
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
    "registered",
    "topology_info",
    "topology_names",
    "unreduced_names",
]


class UnknownTopology(TopologyError):
    """No topology has this name."""


TOPOLOGIES: dict[str, TopologyInfo] = {
    kind.TOPOLOGY.name: kind.TOPOLOGY
    for kind in (
        complete,
        ring,
        one_peer_exp,
        alternating_exp_ring,
        base2,
        static_exp,
        bluefog_dynamic_exp,
        sgp_exp,
        osgp_exp,
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


def unreduced_names() -> list[str]:
    """The topologies with no symmetry quotient (TopologyInfo.reduce is None): above FULL_MAX_N rtmodel
    says it cannot predict them."""
    return [name for name, info in TOPOLOGIES.items() if info.reduce is None]


@contextmanager
def registered(*extra: TopologyInfo) -> Iterator[None]:
    """The registry with `extra` topologies added for the block (a test's toy topology), removed after:
    every listing, the advisor and `rtmodel topologies` pick them up as they do the built-in ones."""
    clash = [info.name for info in extra if info.name in TOPOLOGIES]
    if clash:
        raise TopologyError(f"topology {clash[0]!r} is registered already")
    TOPOLOGIES.update({info.name: info for info in extra})
    try:
        yield
    finally:
        for info in extra:
            TOPOLOGIES.pop(info.name, None)

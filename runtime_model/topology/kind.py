"""One topology, one object: everything rtmodel knows about a gossip topology, filled in by one module.

Why: a topology's builder, where it applies, its symmetry quotient and its closed-form consensus used to
live in four modules that each switched on its name. Modelled on nccl-tests' `struct testColl`
(nccl-tests src/common.h: each collective is one file filling one struct, and the harness selects it):
each topology is one module of topology/kinds that fills one TopologyInfo, and the registry is the list
of them (registry.TOPOLOGIES). Code above asks the object; no module switches on a topology's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.quotient import BuildByName, NoReduction, Reduction
from runtime_model.topology.schedule import Schedule

# reduce(name, shape, build, target): the quotient with about `target` ranks (quotient.py); name is passed
# so that topologies playing the same rounds share one (SGP's is one-peer-exp's); raises NoReduction.
Reducer = Callable[[str, ClusterShape, BuildByName, int], Reduction]


@dataclass(frozen=True)
class ClosedConsensus:
    """A topology's consensus above FULL_MAX_N in closed form, in the terms the convergence floor's
    consensus_result._metrics takes (the topology floor sits below it, so it returns the numbers)."""

    period: int
    exact_rounds: int | None
    rho: float
    method: str
    worst_round_contraction: float


@dataclass(frozen=True)
class TopologyInfo:
    """A topology (module doc). decent_dp_name: its Decent-DP built-in name, None when Decent-DP has none
    (the library that runs it and how travel with the built Schedule: Schedule.exchange, decent_dp_note).
    reduce: its symmetry quotient, None = none known (above FULL_MAX_N rtmodel says it cannot predict it).
    consensus: its consensus from a Reduction in closed form, None = from the reduced schedule's own
    exact rounds (prediction/reduced_system.reduced_consensus)."""

    name: str
    description: str
    decent_dp_name: str | None
    applicability: Callable[[ClusterShape], str | None]  # None = applicable, else the reason why not
    build: Callable[[ClusterShape], Schedule]
    reduce: Reducer | None = None
    consensus: Callable[[Reduction], ClosedConsensus] | None = None

    def reduction(self, shape: ClusterShape, build: BuildByName, target: int) -> Reduction:
        """This topology's reduced system at `shape` (NoReduction when it has none there)."""
        if self.reduce is None:
            raise NoReduction(f"{self.name}: no symmetry known")
        return self.reduce(self.name, shape, build, target)

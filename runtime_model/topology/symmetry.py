"""A registered topology's symmetry quotient, by name: the reduced system that replaces the per-rank
recurrence above FULL_MAX_N ranks (the covering-map argument and the folds: quotient.py).

Why a module of its own: callers ask by name (prediction/reduced_system.py, the tests), the answer is the
topology's own object (kind.TopologyInfo.reduce, filled in by topology/kinds/<name>.py), and this module
sits above the registry, which the quotient machinery may not import.
"""

from __future__ import annotations

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.quotient import FULL_MAX_N, REDUCED_RANKS, BuildByName, NoReduction, Reduction
from runtime_model.topology.registry import topology_info

__all__ = ["FULL_MAX_N", "REDUCED_RANKS", "NoReduction", "Reduction", "reduce"]


def reduce(
    schedule_name: str, shape: ClusterShape, build: BuildByName, target: int = REDUCED_RANKS
) -> Reduction:
    """The reduced system of topology `schedule_name` at `shape` with about `target` ranks or fewer.

    `build(name, small_shape)` builds the topology (registry.build_schedule). Raises NoReduction when
    the topology has no known quotient at this shape (base-2 at an n with a large odd part), or none at
    all (TopologyInfo.reduce is None).
    """
    return topology_info(schedule_name).reduction(shape, build, target)

"""static-exp: BlueFog's static exponential graph (Ying et al., NeurIPS 2021; BlueFog's default
ExponentialGraph): every iteration each rank averages with ranks i + 2^j, all ceil(log2 n) at once.

Quotient: no groups; its cost is computed for the full graph (Reduction.static_offsets, O(log n)), and
the recurrence runs on n' ranks (phi(r) = r mod n', n' whole nodes) with the offsets 2^j folded mod n'
(zero offsets folded back). Consensus in closed form: the full circulant's eigenvalues from its offsets
(circulant.circulant_rho).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.circulant import circulant_rho
from runtime_model.topology.kind import ClosedConsensus, TopologyInfo
from runtime_model.topology.library_topologies import bluefog_static_exp
from runtime_model.topology.quotient import BuildByName, Reduction, rotation_quotient
from runtime_model.topology.schedule import Round, Schedule, StaticGraph
from runtime_model.topology.topology_builders import always_applicable


def reduce_static_exp(name: str, shape: ClusterShape, build: BuildByName, target: int) -> Reduction:
    red = rotation_quotient(name, shape, build, target, shape.gpus_per_node)
    n, n_red, small = shape.gpus, red.n, red.small
    tau = (n - 1).bit_length()
    offsets = tuple(1 << i for i in range(tau))
    graph = StaticGraph(n_red, _folded_offsets(offsets, n_red), 1.0 / (tau + 1))
    placeholder = Round(np.arange(n_red, dtype=np.int64), np.ones(n_red))
    small = Schedule(
        small.name, (placeholder,), small.description, None, graph, small.decent_dp_note, small.exchange
    )
    return replace(red, small=small, round_map=(0,), static_offsets=offsets)


def _folded_offsets(offsets: tuple[int, ...], n_red: int) -> tuple[int, ...]:
    """Offsets 2^j taken mod n'; one that wraps to 0 (a rank would be its own peer) is folded onto a
    small power of 2 instead, so every rank keeps as many distinct draws among its peers as it can."""
    bits = max(1, (n_red - 1).bit_length())
    out = []
    for j, off in enumerate(offsets):
        o = off % n_red
        out.append(o if o else (1 << (j % bits)) % n_red or 1)
    return tuple(out)


def static_consensus(red: Reduction) -> ClosedConsensus:
    """The full static graph's circulant eigenvalues from its offsets alone (circulant.circulant_rho)."""
    rho = circulant_rho(red.full.gpus, red.static_offsets)
    exact = 1 if rho <= 1e-9 else None
    return ClosedConsensus(1, exact, rho, "circulant-branch-and-bound", rho)


TOPOLOGY = TopologyInfo(
    "static-exp",
    "BlueFog's static exponential graph, ceil(log2 n) peers per iteration at once (Ying et al. 2021)",
    None,
    always_applicable,
    bluefog_static_exp,
    reduce=reduce_static_exp,
    consensus=static_consensus,
)

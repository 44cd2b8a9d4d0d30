"""The graphs other gossip libraries run, as schedules the cost model reads (exchange.py says how).

Why beside topology_builders: these are not Decent-DP topologies (Decent-DP cannot run them), but the
paper's Figure 6 measured SGP next to Decent-DP, and BlueFog users run the graphs below; the advisor
shows them as rows "run on" their library so a team can compare what it already has.

Both libraries send to one peer and receive from another (directed, push). A directed exchange costs
what a pair exchange on the same links costs (one message each way per rank, full duplex), so each
round is written as pairs on the same links. SGP's directed exponential graph with weights 1/2 is
exact after log2 n rounds, as the hypercube pairing is (Ying et al. 2021, one-peer exponential graph),
so its consensus figures are exact too; BlueFog's inner-outer graph is approximated by its pair
version for consensus (the same links and degree, not the same matrices).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.exchange import BLUEFOG, OSGP, SGP
from runtime_model.topology.schedule import Schedule
from runtime_model.topology.topology_builders import (
    _log2,
    _round_from_partners,
    _schedule,
    build_one_peer_exp,
    build_static_exp,
    one_peer_exp_applicability,
    require_applicable,
)

_SGP_NOTE = "run by SGP (facebookresearch/stochastic_gradient_push), not by Decent-DP"
_BLUEFOG_NOTE = "run by BlueFog (neighbor_allreduce), not by Decent-DP"


def sgp_applicability(shape: ClusterShape) -> str | None:
    """SGP's graph is any n; rtmodel builds it for n a power of 2 (where it is exact, module doc)."""
    reason = one_peer_exp_applicability(shape)
    return reason.replace("one-peer-exp", "sgp") if reason else None


@lru_cache(maxsize=4)
def _hypercube(shape: ClusterShape) -> Schedule:
    """one-peer-exp at `shape`, built once for SGP and OSGP (the same rounds: every n of a sweep builds both)."""
    return build_one_peer_exp(shape)


def _sgp(shape: ClusterShape, name: str, overlap: bool) -> Schedule:
    require_applicable(sgp_applicability, shape)
    base = _hypercube(shape)
    how = (
        "hidden behind forward + backward (--overlap)" if overlap else "between the step and the next forward"
    )
    return replace(
        base,
        name=name,
        description=f"SGP: all parameters pushed to one peer at distance 2^i per iteration, {how}",
        decent_dp_name=None,
        decent_dp_note=_SGP_NOTE,
        exchange=OSGP if overlap else SGP,
    )


def build_sgp_exp(shape: ClusterShape) -> Schedule:
    """SGP as published (its default, no overlap): one-peer exponential push-sum."""
    return _sgp(shape, "sgp-exp", overlap=False)


def build_osgp_exp(shape: ClusterShape) -> Schedule:
    """SGP with --overlap True (OSGP)."""
    return _sgp(shape, "osgp-exp", overlap=True)


def bluefog_static_exp(shape: ClusterShape) -> Schedule:
    """BlueFog's default static topology (ExponentialGraph, base 2): static-exp with all peers at once."""
    return replace(build_static_exp(shape), decent_dp_note=_BLUEFOG_NOTE, exchange=BLUEFOG)


def bluefog_dynamic_applicability(shape: ClusterShape) -> str | None:
    k, m = shape.gpus_per_node, shape.nodes
    if k < 3:
        return f"BlueFog's inner-outer graph needs at least 3 GPUs per node; {k} here"
    if m < 2 or m & (m - 1):
        return f"rtmodel builds BlueFog's inner-outer graph for a power-of-2 number of nodes; nodes = {m}"
    return None


def build_bluefog_dynamic_exp(shape: ClusterShape) -> Schedule:
    """BlueFog's GetInnerOuterExpo2DynamicSendRecvRanks (bluefog/common/topology_util.py), the benchmark's
    multi-machine default: in iteration t local rank t mod k of every node exchanges with the same local
    rank of the node at distance 2^(t mod log2 m); the node's other k - 1 ranks exchange inside the node
    at distances 2^j, j < floor(log2(k - 2)) + 1 (pairs here, numbered from the rank after the one that
    leaves, so the one left alone when k - 1 is odd changes every iteration and the node stays
    connected). One flow per NIC per iteration."""
    require_applicable(bluefog_dynamic_applicability, shape)
    k, m = shape.gpus_per_node, shape.nodes
    node_bits, inner_bits = (
        max(1, _log2(m)),
        _log2(k - 2) + 1,
    )  # BlueFog's exp_2_out_size + 1, exp_2_in_size + 1
    period = int(np.lcm.reduce([k, node_bits, inner_bits]))
    ranks = np.arange(shape.gpus)
    node, local = ranks // k, ranks % k
    rounds = []
    for t in range(period):
        out = t % k
        partner = ranks.copy()
        outside = local == out
        partner[outside] = ((node[outside] ^ (1 << (t % node_bits))) * k + out).astype(ranks.dtype)
        inner = (local - out - 1) % k  # the k - 1 staying ranks, numbered 0..k-2 from the one after `out`
        peer = inner ^ (1 << (t % inner_bits))
        pairs = ~outside & (peer < k - 1)
        peer_local = (peer + out + 1) % k
        partner[pairs] = node[pairs] * k + peer_local[pairs]
        keep = np.where(partner == ranks, 1.0, 0.5)
        rounds.append(_round_from_partners(partner, keep))
    schedule = _schedule(
        "bluefog-dynamic-exp",
        tuple(rounds),
        "BlueFog inner-outer dynamic exponential graph: one peer per iteration, one rank per node leaves it",
        None,
        decent_dp_note=_BLUEFOG_NOTE,
    )
    return replace(schedule, exchange=BLUEFOG)

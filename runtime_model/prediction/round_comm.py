"""One gossip round's communication per rank: alone on the NICs, sharing them, and the NICs' busy time.

Why a module of its own: the recurrence (iteration.py) and the reduced system (reduced_system.py) both
charge these times; the NIC-sharing bounds live next to the costs they bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from runtime_model.core.scenario import BucketLayout, ClusterShape, GroupShape, Network
from runtime_model.prediction.collectives import allreduce_parts_s, serial_allreduces_s
from runtime_model.prediction.flow_drift import drift_charge_s
from runtime_model.topology.schedule import Schedule, nic_of_ranks, nics_in_use


@dataclass(frozen=True)
class RoundComm:
    """One round's gossip, per rank (seconds, serial over buckets):

    solo_s: the rank's own group's exchange with its flows alone on their NICs (what the rank waits for
        when the flows sharing its NIC do not overlap in time);
    shared_s: the same with the q flows that leave one NIC in this round sharing it throughout (what
        the rank waits for when they all start together);
    nic_busy_s: how long the NIC the rank sends through is busy with this round's flows (q x the
        bytes at the NIC's bandwidth; 0 for a group inside one node);
    charged_s: what the recurrence charges: between sharing throughout (lockstep) and alone, by how
        much the co-flows overlap at offsets drifting over the compute window (flow_drift); per group
        shape, like the other three.
    """

    solo_s: np.ndarray
    shared_s: np.ndarray
    nic_busy_s: np.ndarray
    charged_s: np.ndarray


def round_comm(
    schedule: Schedule,
    round_index: int,
    shape: ClusterShape,
    buckets: BucketLayout,
    net: Network,
    window_s: float = 0.0,
) -> RoundComm:
    """Each rank's gossip in this round: its own group's all-reduces, serial over buckets; window_s is
    the compute each rank does between launching the exchange and waiting for it, over which the
    co-flows' start offsets drift (0: lockstep).

    Per rank, not the round's slowest group: with a one-iteration slack a rank only waits for its
    own group, and which groups are slow changes from round to round (alternating-exp-ring).
    """
    sizes = [b.nbytes for b in buckets.gossip]
    if schedule.static_graph is not None:
        cost = static_graph_comm_s(schedule.static_graph.peer_offsets, shape, buckets.message_bytes, net)
        full = np.full(shape.gpus, cost)
        return RoundComm(full, full, np.zeros(shape.gpus), full)

    per_rank = schedule.rounds[round_index].per_rank_cost(
        shape, lambda g: group_costs_s(g, sizes, net, window_s), net.nics_per_node
    )
    return RoundComm(*per_rank.T)


def group_costs_s(
    g: GroupShape, sizes: Sequence[float], net: Network, window_s: float
) -> tuple[float, float, float, float]:
    """(solo, shared, NIC busy, charged) of one group's serial all-reduces: RoundComm's four fields,
    remembered per network (_memo); the transfers once for every window, the drift charge per window."""
    memo, sized = _memo(net), (g, tuple(sizes))
    full = (*sized, window_s)
    if full not in memo:
        if sized not in memo:
            memo[sized] = group_transfers_s(g, sizes, net)
        solo, shared, busy = memo[sized]
        memo[full] = (solo, shared, busy, drift_charge_s(solo, shared, window_s))
    return memo[full]


def group_transfers_s(g: GroupShape, sizes: Sequence[float], net: Network) -> tuple[float, float, float]:
    """(solo, shared, NIC busy) of one group's serial all-reduces: what the drift charge is made from.

    NIC busy is the q flows' bytes at the NIC's capacity: q x a lone flow's transfer with no per-flow
    cap; where the lone flow was measured (a cap, if any, inside it) the q flows sharing the NIC may
    show its capacity better, so the lesser of the two."""
    alone = replace(g, nic_sharing=1)
    solo = serial_allreduces_s(alone, sizes, net)
    shared = serial_allreduces_s(g, sizes, net)
    if g.nodes == 1:
        return solo, shared, 0.0
    uncapped = replace(net, inter=replace(net.inter, flow_cap_Bps=math.inf))
    q_alone = g.nic_sharing * sum(allreduce_parts_s(alone, s, uncapped)[1] for s in sizes)
    return solo, shared, min(q_alone, sum(allreduce_parts_s(g, s, net)[1] for s in sizes))


_MEMO: dict[
    object, tuple[Network, dict]
] = {}  # network's value (or id) -> (network, {(shape, sizes): transfers, (shape, sizes, window): costs})


def _memo(net: Network) -> dict:
    """The group-shape costs already computed for this network: every topology's rounds at one n, and a
    sweep's n (each scenario builds an equal network), meet the same few shapes, each costing a dozen
    all-reduce formulas. Keyed by the network's value when it hashes, else by the object."""
    try:
        key: object = (
            net.intra,
            net.inter,
            tuple(sorted(net.group_costs.items())),
            net.concurrent_collectives,
            net.nics_per_node,
            net.nccl_algo,
        )
        hash(key)
    except TypeError:
        key = id(net)
    entry = _MEMO.get(key)
    if entry is None or (isinstance(key, int) and entry[0] is not net):
        if len(_MEMO) >= 16:
            _MEMO.clear()
        entry = _MEMO[key] = (net, {})
    return entry[1]


def nic_bound_s(rounds: Sequence[RoundComm], shape: ClusterShape, nics_per_node: int) -> float:
    """The least mean iteration time the NICs allow: over one period every NIC must carry its flows'
    bytes, wherever in the iteration they fall (the one-iteration slack lets flows drift apart, so a
    NIC's flows need not overlap, but they cannot take less than their bytes at its bandwidth)."""
    nic = nic_of_ranks(np.arange(shape.gpus), shape.gpus_per_node, nics_per_node)
    total = np.zeros(shape.nodes * nics_in_use(nics_per_node, shape.gpus_per_node))
    for r in rounds:
        busy = np.zeros_like(total)
        np.maximum.at(busy, nic, r.nic_busy_s)
        total += busy
    return float(total.max()) / max(len(rounds), 1)


def static_graph_comm_s(offsets: Sequence[int], shape: ClusterShape, nbytes: float, net: Network) -> float:
    """A static graph has no disjoint groups: each rank exchanges the whole message with every peer, all
    peers at once (BlueFog's grouped send/recv, exchange.py), so the node's links work in parallel and
    the time is the busier one's after one latency: its NICs carry the message once for every rank
    whose peer is on another node (per offset, spread over the NICs in use), and a rank's intra-node
    link carries it once per peer inside the node. Each exchange is full duplex (one message each way).
    """
    k = shape.gpus_per_node
    local = range(min(k, shape.gpus))
    leaving = [sum((r // k) != ((r + off) % shape.gpus) // k for r in local) for off in offsets]
    inter_s = intra_s = 0.0
    if any(leaving):
        per_nic = sum(leaving) / nics_in_use(net.nics_per_node, k)
        inter_s = net.inter.latency_s + nbytes * per_nic / net.inter.bandwidth_Bps
    staying = max(sum((r // k) == ((r + off) % shape.gpus) // k for off in offsets) for r in local)
    if staying:
        intra_s = net.intra.latency_s + nbytes * staying / net.intra.bandwidth_Bps
    return max(inter_s, intra_s)


def exposed_exchange_s(
    rounds: Sequence[RoundComm], schedule: Schedule, compute_s: float
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(exchange, waited): each round's per-rank exchange time, and what the recurrence charges after a
    group member's last launch (iteration module doc). Hidden behind compute, both are the exchange as
    its co-flows drift (charged_s). Run between the step and the next forward (plain SGP), the flows of
    a NIC start together (shared_s) and nothing hides: the mean compute is charged with them,
    X(t+1) = max over the group of X(t) + C + comm + t_O."""
    if schedule.exchange.hidden:
        exchange = [r.charged_s for r in rounds]
        return exchange, exchange
    exchange = [r.shared_s for r in rounds]
    return exchange, [c + compute_s for c in exchange]

"""Collective costs in the Hockney alpha-beta model, as the backend runs them.

Flat ring (gloo, and what the profiler measures on it; Thakur, Rabenseifner & Gropp 2005): 2(p-1)
steps, every step every rank sends S/p bytes to its ring neighbour, so a step lasts as long as the
slowest hop, and every step pays the slowest link's latency:

    AR_p(S) = 2(p-1) * alpha + 2(p-1)/p * S / bw_bottleneck

NCCL (its own cost model, NVIDIA/nccl src/graph/tuning.cc: time = latency x steps + bytes / bus
bandwidth, per algorithm, the cheaper one per call unless NCCL_ALGO fixes it):

- ring: the same bytes, but only the 2(m-1) steps that cross nodes pay the network latency; the other
  2(p-m) pay the intra-node latency;
- tree (multi-node only): a chain inside each node and a double binary tree across nodes, latency
  2((ppn-1) alpha_intra + ceil(log2 m) alpha_inter), bandwidth term 2S / bw (tuning.cc: tree algbw is
  half its bus bandwidth), so it wins for small messages on many nodes.

Bandwidth across nodes is per node: a group with several GPUs on a rail-optimised node spreads its
channels over `rails` NICs (rails x one NIC's bandwidth), and q flows that leave one NIC together share
it (bandwidth / q, and no more than one flow alone gets: Link.flow_cap_Bps). A group spanning nodes with several ranks per node also crosses intra-node links,
so its bottleneck is the slower of the two.

When calibration measured the exact group shape, that measurement is used instead.
"""

from __future__ import annotations

import math

from runtime_model.scenario import GroupShape, Network


def ring_allreduce_s(p: int, nbytes: float, latency_s: float, seconds_per_byte: float) -> float:
    """Ring all-reduce of nbytes over p ranks with one link's alpha and beta."""
    if p <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (p - 1) * latency_s + 2 * (p - 1) / p * nbytes * seconds_per_byte


def node_bandwidth_Bps(group: GroupShape, network: Network) -> float:
    """Bytes per second one member node of a multi-node group can push across: its rails' NICs, shared
    with the flows of other groups leaving the same NIC (nic_sharing), and no faster than the intra-node
    link the ring also crosses when the group has several ranks on a node."""
    nic_bw = group.rails * network.inter.flow_bandwidth_Bps(group.nic_sharing)
    if group.ranks_per_node > 1:
        return min(nic_bw, network.intra.bandwidth_Bps)
    return nic_bw


def nccl_ring_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts of NCCL's ring: 2(m-1) inter-node steps + 2(p-m) intra-node steps."""
    p, m = group.size, group.nodes
    latency = 2 * (m - 1) * network.inter.latency_s + 2 * (p - m) * network.intra.latency_s
    return latency, 2 * (p - 1) / p * nbytes / node_bandwidth_Bps(group, network)


def nccl_tree_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts of NCCL's tree all-reduce across m > 1 nodes."""
    m, ppn = group.nodes, group.ranks_per_node
    latency = 2 * ((ppn - 1) * network.intra.latency_s + math.ceil(math.log2(m)) * network.inter.latency_s)
    return latency, 2 * nbytes / node_bandwidth_Bps(group, network)


def flat_ring_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts of one flat ring whose every step pays the slowest hop (gloo)."""
    if group.nodes == 1:
        link = network.intra
        return ring_allreduce_s(group.size, 1.0, link.latency_s, 0.0), ring_allreduce_s(
            group.size, nbytes, 0.0, 1 / link.bandwidth_Bps
        )
    latency = ring_allreduce_s(group.size, 1.0, network.inter.latency_s, 0.0)
    return latency, ring_allreduce_s(group.size, nbytes, 0.0, 1 / node_bandwidth_Bps(group, network))


def modelled_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts from the link classes, by the network's algorithm (no measurement)."""
    algo = network.nccl_algo
    if algo is None or group.nodes == 1:
        # inside one node NCCL's ring is the flat ring over the intra-node link
        return flat_ring_parts_s(group, nbytes, network)
    if algo == "ring":
        return nccl_ring_parts_s(group, nbytes, network)
    if algo == "tree":
        return nccl_tree_parts_s(group, nbytes, network)
    return min(nccl_ring_parts_s(group, nbytes, network), nccl_tree_parts_s(group, nbytes, network), key=sum)


def allreduce_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency part, bandwidth part) of one all-reduce; a measured fit for the exact shape wins."""
    if group.size <= 1 or nbytes <= 0:
        return 0.0, 0.0
    fit = network.group_costs.get(group.key)
    if fit is not None:
        return fit.fixed_s, max(0.0, fit.time_s(nbytes) - fit.fixed_s)
    return modelled_parts_s(group, nbytes, network)


def allreduce_s(group: GroupShape, nbytes: float, network: Network) -> float:
    """All-reduce on one group placed as `group` says; uses a measured fit for that shape if present."""
    return sum(allreduce_parts_s(group, nbytes, network))


def serial_allreduces_s(group: GroupShape, sizes, network: Network) -> float:
    """Several all-reduces back to back on one group: their transfers share the links, and with a
    backend that keeps two in flight (gloo) only the first one's latency is exposed."""
    parts = [allreduce_parts_s(group, s, network) for s in sizes]
    if not parts:
        return 0.0
    if network.concurrent_collectives > 1:
        return max(f for f, _ in parts) + sum(b for _, b in parts)
    return sum(f + b for f, b in parts)


def global_allreduce_shape(gpus: int, gpus_per_node: int, nics_per_node: int = 1) -> GroupShape:
    """The group DDP all-reduces over: all n ranks, one flow per NIC, spread over the node's rails."""
    k = min(gpus_per_node, gpus)
    nodes = max(1, gpus // k)
    rails = min(nics_per_node, k) if nodes > 1 else 1
    return GroupShape(size=gpus, nodes=nodes, nic_sharing=1, rails=rails)


def busbw_Bps(p: int, nbytes: float, seconds: float) -> float:
    """nccl-tests bus bandwidth for all-reduce: algbw * 2(p-1)/p."""
    return (nbytes / seconds) * 2 * (p - 1) / p if seconds > 0 and p > 1 else 0.0

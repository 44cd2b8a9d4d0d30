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
  2((ppn-1) alpha_intra + ceil(log2 m) alpha_inter); bandwidth term: the bytes the busiest node's NIC
  sends (tree_nic_bytes) / bw. On 2 nodes that is S, not 2S: each of the two mirrored trees carries S/2
  up one way and down the other (src/device/all_reduce.h runTreeSplit, src/graph/trees.cc
  ncclGetDtree), which NCCL's tuner knows (tuning.cc `bw = nNodes <= 2 || collnet ? bwIntra : bwInter`,
  with search.cc raising a tree's bwIntra to 2x bwInter). So it wins for small messages on many nodes,
  and for large ones on 2 nodes.

Bytes per node (the `nic_bytes_per_iteration` column, runtime_model.prediction.link_bytes), NCCL v2.30.7 source,
Simple protocol (large messages; LL sends 2 bytes per byte, LL128 128/120, only for small ones): ring
2(p-1)/p S per ring (channels split the buffer, src/enqueue.cc ncclCollCbdPart: the total is unchanged);
tree S on 2 nodes, 2S beyond (a node inner in one tree sends S/2 up and S/2 to each of two children,
and S/2 up the other tree, in which it is a leaf); a 2-rank group S. Socket and IB framing add 4 and 64
bytes per message of up to 1 MiB (net_socket.cc SOCKET_CTRL_SIZE, net_ib ncclIbSendFifo): negligible.

Bandwidth across nodes is per node: a group with several GPUs on a rail-optimised node spreads its
channels over `rails` NICs (rails x one NIC's bandwidth), and q flows that leave one NIC together share
it (bandwidth / q, and no more than one flow alone gets: Link.flow_cap_Bps). A group spanning nodes with several ranks per node also crosses intra-node links,
so its bottleneck is the slower of the two.

When calibration measured the exact group shape, that measurement is used instead.
"""

from __future__ import annotations

import math

from runtime_model.core.scenario import GroupShape, Network


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


def ring_nic_bytes(p: int, nbytes: float) -> float:
    """Bytes a ring all-reduce over p ranks sends out of each rank (and of each node: every ring crosses
    a node boundary once per node): reduce-scatter and all-gather, (p-1)/p of the message each."""
    return 2 * (p - 1) / p * nbytes if p > 1 else 0.0


def tree_nic_bytes(nodes: int, nbytes: float) -> float:
    """Bytes NCCL's double binary tree all-reduce sends out of the busiest node (module doc): S on 2
    nodes, 2S beyond; 0 on one node."""
    if nodes <= 1:
        return 0.0
    return nbytes if nodes == 2 else 2 * nbytes


def nccl_ring_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts of NCCL's ring: 2(m-1) inter-node steps + 2(p-m) intra-node steps."""
    p, m = group.size, group.nodes
    latency = 2 * (m - 1) * network.inter.latency_s + 2 * (p - m) * network.intra.latency_s
    return latency, ring_nic_bytes(p, nbytes) / node_bandwidth_Bps(group, network)


def nccl_tree_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts of NCCL's tree all-reduce across m > 1 nodes. Bandwidth: the NIC's
    bytes (tree_nic_bytes) at the node's NIC rate, and no faster than the chain inside the node moving
    2S at the intra-node rate, as NCCL's tuner charges a tree (tuning.cc: its bus bandwidth is the
    chain's bwIntra on 2 nodes, the algorithm bandwidth half of it; beyond 2 nodes min(bwInter, bwIntra))."""
    m, ppn = group.nodes, group.ranks_per_node
    latency = 2 * ((ppn - 1) * network.intra.latency_s + math.ceil(math.log2(m)) * network.inter.latency_s)
    nic_s = tree_nic_bytes(m, nbytes) / (group.rails * network.inter.flow_bandwidth_Bps(group.nic_sharing))
    chain_s = 2 * nbytes / network.intra.bandwidth_Bps if ppn > 1 else 0.0
    return latency, max(nic_s, chain_s)


def flat_ring_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts of one flat ring whose every step pays the slowest hop (gloo)."""
    if group.nodes == 1:
        link = network.intra
        return ring_allreduce_s(group.size, 1.0, link.latency_s, 0.0), ring_allreduce_s(
            group.size, nbytes, 0.0, 1 / link.bandwidth_Bps
        )
    latency = ring_allreduce_s(group.size, 1.0, network.inter.latency_s, 0.0)
    return latency, ring_allreduce_s(group.size, nbytes, 0.0, 1 / node_bandwidth_Bps(group, network))


def allreduce_algorithm(group: GroupShape, nbytes: float, network: Network) -> str:
    """The algorithm an all-reduce runs by: "flat-ring" (gloo, and NCCL's ring inside one node), or NCCL's
    "ring" or "tree", the network's choice, the cheaper of the two when it leaves it to NCCL ("auto")."""
    return _algorithm_and_parts(group, nbytes, network)[0]


def modelled_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency, bandwidth) parts from the link classes, by the network's algorithm (no measurement)."""
    return _algorithm_and_parts(group, nbytes, network)[1]


_PARTS = {"flat-ring": flat_ring_parts_s, "ring": nccl_ring_parts_s, "tree": nccl_tree_parts_s}


def _algorithm_and_parts(
    group: GroupShape, nbytes: float, network: Network
) -> tuple[str, tuple[float, float]]:
    """allreduce_algorithm's choice and its parts, each part computed once (NCCL's "auto" prices both)."""
    algo = network.nccl_algo
    if algo is None or group.nodes == 1:
        algo = "flat-ring"
    elif algo not in _PARTS:
        ring, tree = nccl_ring_parts_s(group, nbytes, network), nccl_tree_parts_s(group, nbytes, network)
        return ("tree", tree) if sum(tree) < sum(ring) else ("ring", ring)
    return algo, _PARTS[algo](group, nbytes, network)


def allreduce_nic_bytes_of(group: GroupShape, nbytes: float, algorithm: str) -> float:
    """Bytes out of the busiest NIC for one all-reduce of `nbytes` on `group` by `algorithm` (module doc);
    a rail-optimised node spreads them over its `rails` NICs. 0 inside one node."""
    if group.nodes <= 1:
        return 0.0
    per_node = (
        tree_nic_bytes(group.nodes, nbytes) if algorithm == "tree" else ring_nic_bytes(group.size, nbytes)
    )
    return per_node / group.rails


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

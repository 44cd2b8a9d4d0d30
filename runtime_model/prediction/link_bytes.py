"""Bytes through the busiest NIC per iteration: the column every family shares (All-Reduce, gossip, local SGD).

Why bytes beside times: a time hides what a slower or shared network would make of it; the bytes a NIC
must carry per iteration are what a team compares against its link (DiLoCo's sources compare families
this way). Each group all-reduces the whole message in a ring over its ranks in rank order: a member
sends 2(g-1)/g of the message to its successor, through its NIC when the successor is on another node
(a pair: each sends its message). A static graph (BlueFog) sends the message to every peer. All-Reduce
(DDP, and local SGD's outer step) is one ring over every GPU.
"""

from __future__ import annotations

import numpy as np

from runtime_model.core.scenario import ClusterShape, GroupShape, Network
from runtime_model.prediction.collectives import (
    allreduce_algorithm,
    allreduce_nic_bytes_of,
    global_allreduce_shape,
    tree_nic_bytes,
)
from runtime_model.topology.schedule import Schedule, nic_of_ranks, nics_in_use


def gossip_nic_bytes(
    schedule: Schedule,
    shape: ClusterShape,
    nics_per_node: int,
    message_bytes: float,
    network: Network | None = None,
) -> float:
    """Mean over the period's rounds of the bytes the busiest NIC sends (0 inside one node). A group
    that NCCL runs as a tree (`network`'s algorithm for its shape, runtime_model.prediction.collectives) sends
    tree_nic_bytes per member node, spread over its rails, instead of its ring's hops."""
    k, n = shape.gpus_per_node, shape.gpus
    ranks = np.arange(n)
    nic = nic_of_ranks(ranks, k, nics_per_node)
    sent = np.zeros(shape.nodes * nics_in_use(nics_per_node, k))
    if schedule.static_graph is not None:
        for offset in schedule.static_graph.peer_offsets:
            leaves = ranks // k != ((ranks + offset) % n) // k
            np.add.at(sent, nic[leaves], message_bytes)
        return float(sent.max())
    for rnd in schedule.rounds:
        successor, size = ring_successors(rnd)
        tree, tree_bytes = _tree_groups(rnd, shape, nics_per_node, message_bytes, network)
        leaves = (ranks // k != successor // k) & (size > 1) & ~tree
        np.add.at(sent, nic[leaves], (2 * (size[leaves] - 1) / size[leaves]) * message_bytes)
        if tree.any():  # one charge per member node: its group's lowest rank there
            first = tree & _first_of_group_on_node(rnd.labels, k)
            np.add.at(sent, nic[first], tree_bytes[first])
    return float(sent.max()) / max(len(schedule.rounds), 1)


def _tree_groups(rnd, shape: ClusterShape, nics_per_node: int, message_bytes: float, network: Network | None):
    """(each rank's group runs as NCCL's tree, the bytes each member node's NICs then send per rail)."""
    if network is None or network.nccl_algo is None or rnd.group_sizes().max() <= 2:
        # gloo rings every group; a pair sends its message once by ring or tree alike
        return np.zeros(shape.gpus, dtype=bool), np.zeros(shape.gpus)

    def of_group(g: GroupShape) -> tuple[float, float]:
        if g.nodes <= 1 or allreduce_algorithm(g, message_bytes, network) != "tree":
            return 0.0, 0.0
        return 1.0, tree_nic_bytes(g.nodes, message_bytes) / g.rails

    per_rank = rnd.per_rank_cost(shape, of_group, nics_per_node)
    return per_rank[:, 0] > 0.5, per_rank[:, 1]


def _first_of_group_on_node(labels: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """True for the lowest rank of each (group, node) pair."""
    ranks = np.arange(labels.size)
    key = labels.astype(np.int64) * (labels.size // gpus_per_node + 1) + ranks // gpus_per_node
    _, first = np.unique(key, return_index=True)
    mask = np.zeros(labels.size, dtype=bool)
    mask[first] = True
    return mask


def ring_successors(rnd) -> tuple[np.ndarray, np.ndarray]:
    """(each rank's successor in its group's ring in rank order, its group's size), vectorised over the
    round's groups as Round.sorted_groups orders them (computed once per round, shared with the costs)."""
    order, starts = rnd.sorted_groups
    sizes = np.diff(np.r_[starts, order.size])
    nxt = np.r_[order[1:], order[0]]
    last = np.zeros(order.size, dtype=bool)
    last[np.r_[starts[1:], order.size] - 1] = True  # each group's last rank wraps to its first
    successor = np.empty_like(order)
    successor[order] = np.where(last, np.repeat(order[starts], sizes), nxt)
    size = np.empty_like(order)
    size[order] = np.repeat(sizes, sizes)
    return successor, size


def allreduce_nic_bytes(
    shape: ClusterShape, nics_per_node: int, nbytes: float, network: Network | None = None
) -> float:
    """Bytes the busiest NIC carries in one all-reduce over every GPU, by the algorithm the network runs
    it with (runtime_model.prediction.collectives: a ring crosses every node boundary once and carries 2(n-1)/n of
    the message, NCCL's tree on 2 nodes only the message; one ring per rail). Without a network: a ring,
    as gloo runs it. 0 on one node. Measured on the emulated cluster: benchmarks/results/wire-bytes.md."""
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node, nics_per_node)
    algorithm = "flat-ring" if network is None else allreduce_algorithm(group, nbytes, network)
    return allreduce_nic_bytes_of(group, nbytes, algorithm)

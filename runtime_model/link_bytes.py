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

from runtime_model.collectives import global_allreduce_shape
from runtime_model.scenario import ClusterShape
from runtime_model.schedule import Schedule, nic_of_ranks, nics_in_use


def gossip_nic_bytes(
    schedule: Schedule, shape: ClusterShape, nics_per_node: int, message_bytes: float
) -> float:
    """Mean over the period's rounds of the bytes the busiest NIC sends (0 inside one node)."""
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
        successor, size = ring_successors(rnd.labels)
        leaves = (ranks // k != successor // k) & (size > 1)
        np.add.at(sent, nic[leaves], (2 * (size[leaves] - 1) / size[leaves]) * message_bytes)
    return float(sent.max()) / max(len(schedule.rounds), 1)


def ring_successors(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each rank's successor in its group's ring in rank order, its group's size), vectorised."""
    order = np.lexsort((np.arange(labels.size), labels))
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    sizes = np.diff(np.r_[starts, labels.size])
    first = np.repeat(order[starts], sizes)  # the group's first rank, for each sorted position
    nxt = np.r_[order[1:], order[0]]
    last = np.r_[sorted_labels[1:] != sorted_labels[:-1], True]
    successor = np.empty_like(order)
    successor[order] = np.where(last, first, nxt)
    size = np.empty_like(order)
    size[order] = np.repeat(sizes, sizes)
    return successor, size


def allreduce_nic_bytes(shape: ClusterShape, nics_per_node: int, nbytes: float) -> float:
    """Bytes the busiest NIC carries in one ring all-reduce over every GPU: each ring crosses every node
    boundary once and carries 2(n-1)/n of the message; NCCL runs one ring per rail. 0 on one node."""
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node, nics_per_node)
    if group.nodes <= 1:
        return 0.0
    return 2 * (group.size - 1) / group.size * nbytes / group.rails

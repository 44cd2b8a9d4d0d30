"""Networks as GPU clusters build them: NCCL's ring and tree, NICs per node (rails), flows sharing a NIC.

Hand-computed cases for every formula, and properties: more NICs or bandwidth is never slower, a flow
is never faster than alone, the NICs' byte bound always holds.
"""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_model.core.errors import InvalidValue
from runtime_model.core.scenario import ClusterShape, GroupShape, Link, Network
from runtime_model.prediction.collectives import (
    allreduce_algorithm,
    allreduce_nic_bytes_of,
    allreduce_parts_s,
    allreduce_s,
    global_allreduce_shape,
    nccl_ring_parts_s,
    nccl_tree_parts_s,
    tree_nic_bytes,
)
from runtime_model.prediction.iteration import allreduce_prediction, gossip_prediction
from runtime_model.prediction.round_comm import nic_bound_s, round_comm
from runtime_model.topology.registry import build_schedule
from runtime_model.topology.schedule import Round, Schedule
from tests.helpers import scenario

A_INTRA, A_INTER = 1e-6, 1e-5
B_INTRA, B_INTER = 1e11, 1e9


def nccl(algo="auto", nics=1, inter_bw=B_INTER) -> Network:
    return Network(
        intra=Link(A_INTRA, B_INTRA), inter=Link(A_INTER, inter_bw), nics_per_node=nics, nccl_algo=algo
    )


def test_nccl_ring_hand_computed():
    # 8 ranks on 2 nodes: 2(m-1) = 2 inter steps, 2(p-m) = 12 intra steps; 2(p-1)/p S at one NIC
    lat, bw = nccl_ring_parts_s(GroupShape(8, 2), 1e6, nccl("ring"))
    assert lat == pytest.approx(2 * A_INTER + 12 * A_INTRA)
    assert bw == pytest.approx(1.75 * 1e6 / B_INTER)


def test_flat_ring_pays_network_latency_every_step():
    flat = Network(intra=Link(A_INTRA, B_INTRA), inter=Link(A_INTER, B_INTER))
    assert allreduce_parts_s(GroupShape(8, 2), 1e6, flat)[0] == pytest.approx(14 * A_INTER)


def test_nccl_tree_hand_computed():
    # 16 ranks on 8 nodes, 2 per node: 2((ppn-1) a_intra + log2(8) a_inter); 2S / node bandwidth
    lat, bw = nccl_tree_parts_s(GroupShape(16, 8), 1e6, nccl("tree"))
    assert lat == pytest.approx(2 * (A_INTRA + 3 * A_INTER))
    assert bw == pytest.approx(2e6 / B_INTER)


def test_nccl_tree_on_two_nodes_sends_the_message_once():
    """Two mirrored trees over 2 nodes carry S/2 each, up one way and down the other: S per NIC, not 2S
    (NCCL src/device/all_reduce.h runTreeSplit; tuning.cc gives a 2-node tree bwIntra, up to 2x bwInter)."""
    lat, bw = nccl_tree_parts_s(GroupShape(16, 2), 1e6, nccl("tree"))
    assert lat == pytest.approx(2 * (7 * A_INTRA + 1 * A_INTER))
    assert bw == pytest.approx(1e6 / B_INTER)
    assert tree_nic_bytes(2, 1e6) == 1e6 and tree_nic_bytes(3, 1e6) == 2e6 and tree_nic_bytes(1, 1e6) == 0


def test_the_bytes_column_follows_the_algorithm_each_size_gets():
    """Ring 2(p-1)/p S per rail; tree S on 2 nodes; a pair S; one node nothing."""
    ring, tree = nccl("ring", nics=2), nccl("tree", nics=2)
    g = GroupShape(16, 2, 1, 2)
    assert allreduce_algorithm(g, 1e8, ring) == "ring" and allreduce_algorithm(g, 1e8, tree) == "tree"
    assert allreduce_nic_bytes_of(g, 1e8, "ring") == pytest.approx(2 * 15 / 16 * 1e8 / 2)
    assert allreduce_nic_bytes_of(g, 1e8, "tree") == pytest.approx(1e8 / 2)
    assert allreduce_nic_bytes_of(GroupShape(2, 2), 1e8, "ring") == pytest.approx(1e8)
    assert allreduce_nic_bytes_of(GroupShape(8, 1), 1e8, "ring") == 0.0
    flat = Network(intra=Link(A_INTRA, B_INTRA), inter=Link(A_INTER, B_INTER))
    assert allreduce_algorithm(g, 1e8, flat) == "flat-ring"


def test_auto_takes_the_cheaper_per_message_size():
    g, net = GroupShape(256, 256), nccl("auto")
    small, large = 1e3, 1e9
    assert allreduce_s(g, small, net) == pytest.approx(sum(nccl_tree_parts_s(g, small, net)))
    assert allreduce_s(g, large, net) == pytest.approx(sum(nccl_ring_parts_s(g, large, net)))


def test_rails_multiply_node_bandwidth_up_to_the_intra_link():
    net = nccl("ring", nics=8)
    one = allreduce_parts_s(GroupShape(16, 2, 1, 1), 1e8, net)[1]
    eight = allreduce_parts_s(GroupShape(16, 2, 1, 8), 1e8, net)[1]
    assert one == pytest.approx(2 * 15 / 16 * 1e8 / B_INTER)
    assert eight == pytest.approx(one / 8)
    slow_intra = replace(net, intra=Link(A_INTRA, 4e9))
    assert allreduce_parts_s(GroupShape(16, 2, 1, 8), 1e8, slow_intra)[1] == pytest.approx(
        2 * 15 / 16 * 1e8 / 4e9
    )


def test_global_shape_uses_one_rail_per_gpu_up_to_the_nics():
    assert global_allreduce_shape(64, 8, 8) == GroupShape(64, 8, 1, 8)
    assert global_allreduce_shape(64, 8, 2) == GroupShape(64, 8, 1, 2)
    assert global_allreduce_shape(8, 8, 8) == GroupShape(8, 1, 1, 1)  # one node: no NIC at all
    assert GroupShape(64, 8, 1, 1).key == "p64-s8-q1"  # profiles keep their keys on one-NIC nodes
    assert GroupShape(64, 8, 1, 8).key == "p64-s8-q1-r8"


def test_a_per_flow_cap_holds_a_lone_flow_below_the_nic_and_sharing_below_the_cap():
    # NIC 10 GB/s, one flow at most 4 GB/s: alone 4, two flows 4 each (8 of 10), four flows 2.5 each
    net = Network(intra=Link(A_INTRA, B_INTRA), inter=Link(A_INTER, 10e9, flow_cap_Bps=4e9))
    assert [net.inter.flow_bandwidth_Bps(q) for q in (1, 2, 4)] == [4e9, 4e9, 2.5e9]
    for q, per_flow in ((1, 4e9), (2, 4e9), (4, 2.5e9)):
        assert allreduce_parts_s(GroupShape(2, 2, q), 1e8, net)[1] == pytest.approx(1e8 / per_flow)
    # the NIC's busy time is the q flows' bytes at its capacity (2 x 1e8 / 10e9 with two flows), not q x alone
    sc = scenario(n=4, k=2, fwd=0.001, bwd=0.002, opt=0.0, nbytes=(100_000_000,), ready=(1.0,))
    sc = replace(sc, network=net)
    sch = Schedule("x", (Round.from_groups(4, [[0, 2], [1, 3]]),))
    r = round_comm(sch, 0, sc.shape, sc.buckets, sc.network)
    assert r.nic_busy_s == pytest.approx(np.full(4, 2 * 1e8 / 10e9))
    with pytest.raises(ValueError, match="flow_cap_Bps must be > 0"):
        Link(A_INTER, 10e9, flow_cap_Bps=0.0)


@settings(max_examples=25, deadline=None)
@given(cap=st.floats(1e8, 1e11), q=st.integers(1, 16))
def test_a_per_flow_cap_never_makes_a_flow_faster(cap, q):
    free = Network(intra=Link(A_INTRA, B_INTRA), inter=Link(A_INTER, B_INTER))
    capped = replace(free, inter=replace(free.inter, flow_cap_Bps=cap))
    g = GroupShape(2, 2, q)
    assert allreduce_s(g, 1e7, capped) >= allreduce_s(g, 1e7, free) * (1 - 1e-12)


def test_rail_sharing_counts_flows_per_nic():
    # local rank i of node 0 pairs with local rank i of node 1: all 8 flows on one NIC, or one per rail
    n, k = 16, 8
    pairs = Round.from_groups(n, [[i, k + i] for i in range(k)])
    shape = ClusterShape(n, k)
    assert set(pairs.group_shapes(shape, 1)) == {GroupShape(2, 2, 8)}
    assert set(pairs.group_shapes(shape, 8)) == {GroupShape(2, 2, 1)}
    assert set(pairs.group_shapes(shape, 4)) == {GroupShape(2, 2, 2)}


def test_partial_overlap_bounds_hand_computed():
    # 4 ranks, 2 per node; round 1 crosses with 2 flows on each node's one NIC
    sc = scenario(
        n=4, k=2, fwd=0.001, bwd=0.002, opt=0.0, nbytes=(1_000_000,), ready=(1.0,), inter_bw=1e8, inter_lat=0
    )
    sch = Schedule("x", (Round.from_groups(4, [[0, 1], [2, 3]]), Round.from_groups(4, [[0, 2], [1, 3]])))
    cross = round_comm(sch, 1, sc.shape, sc.buckets, sc.network)
    assert cross.solo_s == pytest.approx(np.full(4, 1e6 / 1e8))  # alone: S / B
    assert cross.shared_s == pytest.approx(np.full(4, 2e6 / 1e8))  # two flows throughout: 2 S / B
    assert cross.nic_busy_s == pytest.approx(np.full(4, 2e6 / 1e8))
    rounds = [round_comm(sch, i, sc.shape, sc.buckets, sc.network) for i in range(2)]
    # over the period of 2 iterations each NIC carries 2 S bytes: at least S / B per iteration
    assert nic_bound_s(rounds, sc.shape, 1) == pytest.approx(1e6 / 1e8)
    # two NICs per node: each flow has its own, and the NIC carries S per period
    two = replace(sc, network=replace(sc.network, nics_per_node=2))
    rounds2 = [round_comm(sch, i, two.shape, two.buckets, two.network) for i in range(2)]
    assert rounds2[1].shared_s == pytest.approx(rounds2[1].solo_s)
    assert nic_bound_s(rounds2, two.shape, 2) == pytest.approx(0.5e6 / 1e8)


def test_nics_per_node_refused_below_one_and_unknown_algorithm():
    with pytest.raises(InvalidValue):
        replace(nccl(), nics_per_node=0)
    with pytest.raises(InvalidValue):
        replace(nccl(), nccl_algo="collnet")


shapes = st.sampled_from([(8, 2), (16, 4), (16, 8), (32, 8), (12, 4)])


@settings(max_examples=25, deadline=None)
@given(
    shape=shapes,
    nics=st.sampled_from([1, 2, 4, 8]),
    bw=st.floats(1e8, 1e11),
    algo=st.sampled_from([None, "auto", "ring", "tree"]),
)
def test_more_nics_or_bandwidth_is_never_slower(shape, nics, bw, algo):
    n, k = shape
    base = scenario(n=n, k=k, sd=0.0, inter_bw=bw)
    base = replace(base, network=replace(base.network, nccl_algo=algo, nics_per_node=nics))
    more_nics = replace(base, network=replace(base.network, nics_per_node=2 * nics))
    faster = replace(base, network=base.network.scaled(inter_bandwidth=2.0))
    assert allreduce_prediction(more_nics).mean_s <= allreduce_prediction(base).mean_s + 1e-12
    assert allreduce_prediction(faster).mean_s <= allreduce_prediction(base).mean_s + 1e-12
    for name in ("one-peer-exp", "alternating-exp-ring", "ring"):
        try:
            sch = build_schedule(name, base.shape)
        except Exception:
            continue
        t = gossip_prediction(base, sch).mean_s
        assert gossip_prediction(more_nics, sch).mean_s <= t * (1 + 1e-9)
        assert gossip_prediction(faster, sch).mean_s <= t * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, nics=st.sampled_from([1, 2, 8]), bw=st.floats(1e8, 1e11))
def test_a_flow_is_never_faster_than_alone_and_the_nic_bound_holds(shape, nics, bw):
    n, k = shape
    sc = scenario(n=n, k=k, sd=0.0, inter_bw=bw)
    sc = replace(sc, network=replace(sc.network, nics_per_node=nics))
    for name in ("one-peer-exp", "alternating-exp-ring", "ring", "base-2"):
        try:
            sch = build_schedule(name, sc.shape)
        except Exception:
            continue
        rounds = [round_comm(sch, i, sc.shape, sc.buckets, sc.network) for i in range(sch.period)]
        for r in rounds:
            assert np.all(r.shared_s >= r.solo_s - 1e-15)
        p = gossip_prediction(sc, sch)
        assert p.mean_s >= nic_bound_s(rounds, sc.shape, nics) * (1 - 1e-9)
        # every round's slowest exchange is at least its flows' solo time
        for shown, r in zip(p.per_round_comm_s, rounds, strict=True):
            assert shown >= r.solo_s.max() - 1e-15

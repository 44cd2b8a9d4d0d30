"""Hand-computed alpha-beta costs."""

import pytest

from runtime_model.core.scenario import AffineCost, GroupShape, ScenarioError
from runtime_model.prediction.collectives import (
    allreduce_s,
    busbw_Bps,
    global_allreduce_shape,
    ring_allreduce_s,
)
from tests.helpers import net


def test_ring_allreduce_hand_computed():
    # 2(p-1) alpha + 2(p-1)/p S beta = 6 ms + 1.5 ms
    assert ring_allreduce_s(4, 1000, 1e-3, 1e-6) == pytest.approx(7.5e-3)
    assert ring_allreduce_s(1, 1000, 1e-3, 1e-6) == 0.0
    assert ring_allreduce_s(2, 0, 1e-3, 1e-6) == 0.0


def test_group_inside_node_uses_intra_link():
    n = net(intra_lat=1e-5, intra_bw=1e10)
    # p=4 inside one node: 6 * 1e-5 + 1.5 * 1e6 / 1e10
    assert allreduce_s(GroupShape(4, 1), 1e6, n) == pytest.approx(6e-5 + 1.5e-4)


def test_group_across_nodes_uses_inter_link_and_nic_sharing():
    n = net(inter_lat=1e-4, inter_bw=1e9)
    one = allreduce_s(GroupShape(2, 2, 1), 1e6, n)
    assert one == pytest.approx(2e-4 + 1e-3)
    # four flows through one NIC: the bandwidth term is four times larger, latency unchanged
    assert allreduce_s(GroupShape(2, 2, 4), 1e6, n) == pytest.approx(2e-4 + 4e-3)


def test_measured_shape_overrides_link_classes():
    n = net()
    fit = AffineCost(fixed_s=0.5, per_byte_s=1e-9)
    measured = type(n)(n.intra, n.inter, "m", {GroupShape(2, 2, 1).key: fit})
    assert allreduce_s(GroupShape(2, 2, 1), 1e6, measured) == pytest.approx(0.5 + 1e-3)
    # other shapes still come from the link classes
    assert allreduce_s(GroupShape(4, 2, 1), 1e6, measured) == allreduce_s(GroupShape(4, 2, 1), 1e6, n)


def test_global_shape_and_busbw():
    assert global_allreduce_shape(64, 8) == GroupShape(64, 8, 1)
    assert busbw_Bps(4, 1000, 1.0) == pytest.approx(1000 * 1.5)


def test_invalid_group_shape_is_a_spec_error():
    with pytest.raises(ScenarioError):
        GroupShape(2, 3)

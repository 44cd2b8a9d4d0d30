"""The sharded All-Reduce family's time model (runtime_model/prediction/sharded.py): invariants that hold
whatever the inputs, on preset scenarios and hand-checkable ones."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_model.core.errors import UserError
from runtime_model.core.scenario import AffineCost, GroupShape, Link
from runtime_model.prediction.collectives import allreduce_s, global_allreduce_shape
from runtime_model.prediction.iteration import allreduce_prediction, compute_wait_of_all
from runtime_model.prediction.sharded import (
    SHARDED_METHODS,
    ShardedOptions,
    hsdp_groups,
    sharded_prediction,
)
from runtime_model.prediction.sharded_units import broadcast_s, gather_s
from runtime_model.presets.to_model import PresetRequest, resolve, scenario_from_choice
from tests.helpers import scenario as hand_scenario

fast = settings(max_examples=20, deadline=None)
MODELS = ("resnet50", "transformer-base", "transformer-big", "gpt2-small")
NETWORKS = ("tcp-25g", "ib-100", "roce-400g")


def preset(gpus: int, network: str = "ib-100", model: str = "transformer-big", per_node: int = 8, **kw):
    per_node = min(per_node, gpus)
    return scenario_from_choice(
        resolve(PresetRequest(gpus, network=network, model=model, gpus_per_node=per_node, **kw))
    )


def infinitely_fast(scenario):
    """Every link a million times faster and without latency (measured fits dropped)."""
    net = scenario.network
    fast_link = lambda link: replace(  # noqa: E731
        link, latency_s=0.0, bandwidth_Bps=link.bandwidth_Bps * 1e6, flow_cap_Bps=link.flow_cap_Bps * 1e6
    )
    return replace(
        scenario, network=replace(net, intra=fast_link(net.intra), inter=fast_link(net.inter), group_costs={})
    )


@pytest.mark.parametrize("method", SHARDED_METHODS)
@pytest.mark.parametrize("model", MODELS)
def test_one_gpu_is_compute_plus_optimizer(method, model):
    s = preset(1, model=model)
    p = sharded_prediction(s, method)
    assert p.comm_s == 0 and p.exposed_comm_s == 0
    assert p.mean_s == pytest.approx(
        compute_wait_of_all(s.compute, s.shape)[0] + s.compute.optimizer_s, rel=1e-12
    )


@fast
@given(
    model=st.sampled_from(MODELS), network=st.sampled_from(NETWORKS), per_node=st.sampled_from([1, 2, 4, 8])
)
def test_hsdp_on_one_node_is_fsdp(model, network, per_node):
    s = preset(per_node, network, model, per_node)
    assert sharded_prediction(s, "hsdp") == replace(sharded_prediction(s, "fsdp"), name="hsdp")


@fast
@given(
    model=st.sampled_from(MODELS),
    network=st.sampled_from(NETWORKS),
    nodes=st.sampled_from([1, 2, 3, 8, 64]),
    per_node=st.sampled_from([1, 4, 8]),
)
def test_resharding_never_helps_and_zero1_adds_to_ddp(model, network, nodes, per_node):
    s = preset(nodes * per_node, network, model, per_node)
    fsdp, zero2, zero1 = (sharded_prediction(s, m) for m in ("fsdp", "zero2", "zero1"))
    assert fsdp.mean_s >= zero2.mean_s and fsdp.comm_s >= zero2.comm_s
    ddp = allreduce_prediction(s)
    assert zero1.comm_s >= ddp.comm_s and zero1.exposed_comm_s >= ddp.exposed_comm_s


@fast
@given(
    model=st.sampled_from(MODELS),
    network=st.sampled_from(NETWORKS),
    gpus=st.sampled_from([2, 8, 16, 128, 1024]),
    method=st.sampled_from(SHARDED_METHODS),
)
def test_infinitely_fast_links_leave_compute_and_sharded_optimizer(model, network, gpus, method):
    s = infinitely_fast(preset(gpus, network, model))
    p = sharded_prediction(s, method)
    shards = s.shape.gpus_per_node if method == "hsdp" else gpus
    expected = compute_wait_of_all(s.compute, s.shape)[0] + s.compute.optimizer_s / shards
    assert p.mean_s == pytest.approx(expected, rel=1e-4)


@fast
@given(
    model=st.sampled_from(MODELS),
    gpus=st.sampled_from([16, 64, 512]),
    method=st.sampled_from(SHARDED_METHODS),
    lo=st.floats(0.01, 10.0),
    ratio=st.floats(1.0, 100.0),
)
def test_faster_network_is_never_slower(model, gpus, method, lo, ratio):
    s = preset(gpus, "tcp-25g", model)
    slow = replace(s, network=s.network.scaled(lo))
    quick = replace(s, network=s.network.scaled(lo * ratio))
    assert sharded_prediction(quick, method).mean_s <= sharded_prediction(slow, method).mean_s * (1 + 1e-12)


@pytest.mark.parametrize("method", SHARDED_METHODS)
@pytest.mark.parametrize("gpus,per_node", [(8, 8), (64, 8), (64, 4), (6, 2)])
def test_optimizer_runs_on_the_shard(method, gpus, per_node):
    s = preset(gpus, per_node=per_node)
    shards = per_node if method == "hsdp" else gpus
    assert sharded_prediction(s, method).optimizer_s == pytest.approx(s.compute.optimizer_s / shards)


def test_gather_is_half_the_ring_allreduce_and_a_measured_fit_wins():
    s = hand_scenario(n=8, k=2)
    group = global_allreduce_shape(8, 2)
    ring = replace(s.network, nccl_algo="ring")
    assert gather_s(group, 1e6, ring) == pytest.approx(allreduce_s(group, 1e6, ring) / 2)
    fit = AffineCost(fixed_s=1e-3, per_byte_s=1e-9)
    measured = replace(ring, group_costs={group.key: fit})
    assert gather_s(group, 1e6, measured) == pytest.approx(fit.time_s(1e6) / 2)
    # a broadcast moves the whole message through every rank: p/(p-1) of the gather's bytes
    no_latency = replace(s.network, inter=Link(0.0, 1e9), intra=Link(0.0, 1e10))
    assert broadcast_s(group, 1e6, no_latency) == pytest.approx(gather_s(group, 1e6, no_latency) * 8 / 7)


def test_hsdp_groups_share_the_nics():
    s = preset(64, per_node=8, nics_per_node=2)
    shard, replicate = hsdp_groups(s)
    assert shard == GroupShape(8, 1) and replicate == GroupShape(8, 8, nic_sharing=4, rails=1)


def test_dtype_options_scale_the_bytes():
    s = preset(64, "tcp-25g")
    wide = sharded_prediction(s, "fsdp", ShardedOptions(gather_bytes=4, reduce_bytes=4))
    narrow = sharded_prediction(s, "fsdp", ShardedOptions(gather_bytes=2, reduce_bytes=2))
    assert narrow.comm_s < wide.comm_s
    keep_all = ShardedOptions(kept_units=tuple(range(len(s.buckets.gossip))))
    assert sharded_prediction(s, "fsdp", keep_all).comm_s == pytest.approx(
        sharded_prediction(s, "zero2").comm_s
    )


def test_zero1_broadcast_latency_grows_with_the_tensors():
    s = preset(64, "tcp-25g")
    few, many = (sharded_prediction(s, "zero1", ShardedOptions(param_tensors=t)) for t in (1, 500))
    assert many.exposed_comm_s > few.exposed_comm_s


def test_unknown_method_is_a_user_error():
    with pytest.raises(UserError, match="one of fsdp, zero2, zero1, hsdp"):
        sharded_prediction(preset(8), "zero3")

"""Preset bucket layouts are the ones the libraries form: cut from the model's stored parameter list by
the profiler's own code, they equal what the profiler computes from the real model."""

from __future__ import annotations

import pytest

from runtime_model.prediction.bucketing import ready_fractions
from runtime_model.presets import to_model as presets

MIB = 2**20


def test_the_papers_transformer_buckets_are_the_libraries():
    """DDP [4.0, 25.1, 27.1, 28.1, 28.1, 28.1, 25.1, 75.5] MiB and Decent-DP [25.1, 27.1, 25.1, 27.1, 25.1,
    27.1, 84.5] MiB, as both libraries cut the paper's Transformer (the tied embedding lands whole in the
    last bucket)."""
    b = presets.buckets_from_preset(presets.resolve(presets.PresetRequest(8, model="transformer-base")))
    assert [round(x.nbytes / MIB, 1) for x in b.ddp] == [4.0, 25.1, 27.1, 28.1, 28.1, 28.1, 25.1, 75.5]
    assert [round(x.nbytes / MIB, 1) for x in b.gossip] == [25.1, 27.1, 25.1, 27.1, 25.1, 27.1, 84.5]
    assert b.ddp[-1].ready_fraction == b.gossip[-1].ready_fraction == 1.0


def test_an_explicit_cap_applies_to_ddps_first_bucket_and_the_dtype_scales_bytes():
    default = presets.buckets_from_preset(presets.resolve(presets.PresetRequest(8, model="transformer-base")))
    capped = presets.buckets_from_preset(
        presets.resolve(presets.PresetRequest(8, model="transformer-base", bucket_cap_mb=25))
    )
    assert default.ddp[0].nbytes < 5 * MIB and capped.ddp[0].nbytes >= 25 * MIB
    half = presets.buckets_from_preset(
        presets.resolve(presets.PresetRequest(8, model="transformer-base", message_dtype="bf16"))
    )
    assert half.message_bytes == pytest.approx(default.message_bytes / 2, rel=1e-3)


def test_ready_fractions_follow_the_body_and_put_the_embedding_last():
    # body 30 + 70 parameters, then a 100-parameter embedding ready at the very end
    assert ready_fractions([30, 70, 100], 100) == [0.3, 1.0, 1.0]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["transformer-base", "gpt2-small", "resnet50"])
def test_preset_layouts_equal_the_profilers_from_the_real_model(model):
    torch = pytest.importorskip("torch")
    from rtmodel_harness import reference_models
    from rtmodel_harness.buckets import bucket_layout

    torch.manual_seed(0)
    net, make_batch = reference_models.build(model)
    step = make_batch({"transformer-base": 32, "gpt2-small": 1024, "resnet50": 1}[model])

    def forward_backward():  # as the paper trains: under autocast (bf16 stands in for CUDA's fp16 on CPU)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = step()
        loss.backward()

    traced = bucket_layout(net, 25.0, 1.0, run_backward=forward_backward)
    preset = presets.buckets_from_preset(presets.resolve(presets.PresetRequest(8, model=model)))
    assert [b.nbytes for b in preset.ddp] == traced.ddp_buckets_bytes
    assert [b.nbytes for b in preset.gossip] == traced.gossip_buckets_bytes

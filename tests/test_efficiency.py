"""gpus.toml's large-batch efficiencies are derived from published throughputs (runtime_model/presets/efficiency.py),
never chosen: every figure is recomputed here, and the derivation is checked on hand-computed cases."""

import math

import pytest

from runtime_model.presets import efficiency
from runtime_model.presets.preset_loading import builtin_library

GPUS = dict(builtin_library().gpus)


def torch_side(module: str):
    """profiler.opcount and rtmodel_harness.reference_models build torch models: only where torch is."""
    pytest.importorskip("torch")
    import importlib

    return importlib.import_module(module)


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_every_preset_efficiency_is_the_derived_one(gpu):
    assert dict(GPUS[gpu].mfu) == efficiency.preset_mfu(gpu, GPUS)


def test_inverting_the_device_model_on_a_hand_computed_iteration():
    """1 TFLOP and 100 GB per 1,000 tokens on a 100 TFLOP/s, 1,000 GB/s (x0.5) device measured at
    0.5 s: memory takes 0.2 s, so the FLOPs fill 0.3 s -> 1e12 / (1e14 x 0.3) = 1/30."""
    ref = efficiency._data()["reference"]
    tokens = 1000.0
    flops = ref["train_flops_per_unit"] * tokens + ref["flops_intercept"]
    nbytes = ref["bytes_per_unit"]["amp"] * tokens + ref["fixed_bytes"]["amp"]
    device = efficiency.Device(peak_tflops=100.0, memory_bandwidth_GBps=1000.0, memory_efficiency=0.5)
    memory_s = nbytes / 5e11
    iteration_s = memory_s + 0.3
    got = efficiency.mfu_from_iteration(iteration_s, tokens, "amp", device)
    assert got == pytest.approx(flops / (1e14 * 0.3), rel=1e-12)
    # and back: the compute model with that efficiency reproduces the published iteration
    assert flops / (1e14 * got) + memory_s == pytest.approx(iteration_s, rel=1e-12)


def test_a_published_iteration_shorter_than_its_memory_time_is_refused():
    device = efficiency.Device(peak_tflops=100.0, memory_bandwidth_GBps=1.0, memory_efficiency=1.0)
    with pytest.raises(ValueError, match="memory time"):
        efficiency.mfu_from_iteration(0.1, 1000.0, "amp", device)


def test_faster_published_throughput_or_slower_memory_means_higher_efficiency():
    device = efficiency.Device(peak_tflops=312.0, memory_bandwidth_GBps=1555.0, memory_efficiency=0.9)
    slower_memory = efficiency.Device(peak_tflops=312.0, memory_bandwidth_GBps=1000.0, memory_efficiency=0.9)
    tokens = 6144.0
    base = efficiency.mfu_from_iteration(0.10, tokens, "amp", device)
    assert efficiency.mfu_from_iteration(0.09, tokens, "amp", device) > base
    assert efficiency.mfu_from_iteration(0.10, tokens, "amp", slower_memory) > base


def test_inference_only_gpus_scale_the_nearest_measured_training_iteration():
    """T4's AMP iteration is V100's x (V100 / T4 inference tok/s of the same model and batch)."""
    data = efficiency._data()
    v100 = next(r for r in data["training"] if (r["gpu"], r["precision"]) == ("V100", "amp"))
    t4 = next(r for r in data["scaled"] if (r["gpu"], r["precision"]) == ("T4", "amp"))
    iteration_s = (
        v100["tokens_per_iteration"] / v100["tokens_per_s"] * t4["like_tokens_per_s"] / t4["tokens_per_s"]
    )
    gpu = GPUS["T4"]
    device = efficiency.Device(gpu.tflops["fp16"], gpu.memory_bandwidth_GBps, gpu.memory_efficiency)
    want = efficiency.mfu_from_iteration(iteration_s, v100["tokens_per_iteration"], "amp", device)
    assert efficiency.derived_mfu(GPUS)[("T4", "amp")] == pytest.approx(want, rel=1e-12)


def test_gpus_list_only_the_precisions_their_datasheets_do():
    """Volta and Turing have neither TF32 nor BF16 tensor cores: asking for them is refused, not run as fp32."""
    for gpu in ("T4", "V100", "V100-32GB"):
        assert set(GPUS[gpu].tflops) == set(efficiency.preset_mfu(gpu, GPUS)) == {"fp32", "fp16"}


def test_every_derived_efficiency_names_its_published_table():
    assert set(efficiency.sources()) == set(efficiency.derived_mfu(GPUS))
    assert all("base model" in s for s in efficiency.sources().values())


def test_zipf_shares_cover_every_token_and_put_most_in_the_head():
    reference_models = torch_side("rtmodel_harness.reference_models")
    shares = reference_models.zipf_shares(reference_models.TXL_CUTOFFS, reference_models.TXL_VOCAB)
    assert math.fsum(shares) == pytest.approx(1.0, abs=1e-12)
    assert 0.75 < shares[0] < 0.85 and all(s > 0 for s in shares)


@pytest.mark.slow
def test_reference_counts_are_what_opcount_measures():
    """efficiency.toml's FLOPs and bytes of Transformer-XL base are the shipped command's output."""
    opcount = torch_side("profiler.opcount")
    ref = efficiency._data()["reference"]
    for amp, mode in ((True, "amp"), (False, "full")):
        r = opcount.full_width(ref["model"], amp)
        flops = r["forward_flops_per_unit"] + r["backward_flops_per_unit"]
        assert flops == pytest.approx(ref["train_flops_per_unit"], rel=1e-9)
        assert r["forward_flops_fixed"] + r["backward_flops_fixed"] == pytest.approx(
            ref["flops_intercept"], rel=1e-9
        )
        nbytes = r["forward_bytes_per_unit"] + r["backward_bytes_per_unit"]
        assert nbytes == pytest.approx(ref["bytes_per_unit"][mode], rel=1e-9)
        fixed = r["forward_bytes_fixed"] + r["backward_bytes_fixed"]
        assert fixed == pytest.approx(ref["fixed_bytes"][mode], rel=1e-9)


@pytest.mark.slow
def test_transformer_xl_forward_flops_match_a_hand_count():
    """Per token and layer: qkv over memory + segment (2 x 2 d 3d), o_net 2 d^2, FF 4 d ffn, and three
    attention products over klen = 384 (2 klen d each); plus the adaptive softmax head 2 d (c0 + 3) and
    each tail cluster 2 d size x its Zipf share. r_net runs once per segment (an intercept)."""
    reference_models = torch_side("rtmodel_harness.reference_models")
    opcount = torch_side("profiler.opcount")
    d, ffn, layers, klen = 512, 2048, 16, reference_models.TXL_SEGMENT + reference_models.TXL_MEMORY
    layer = 2 * 2 * d * 3 * d + 2 * d * d + 4 * d * ffn + 3 * 2 * klen * d
    edges = [0, *reference_models.TXL_CUTOFFS, reference_models.TXL_VOCAB]
    shares = reference_models.zipf_shares(reference_models.TXL_CUTOFFS, reference_models.TXL_VOCAB)
    head = 2 * d * (edges[1] + 3)
    tails = sum(2 * d * (hi - lo) * s for lo, hi, s in zip(edges[1:-1], edges[2:], shares[1:], strict=True))
    r = opcount.full_width("transformer-xl-base", True)
    assert r["forward_flops_per_unit"] == pytest.approx(layers * layer + head + tails, rel=2e-3)
    assert r["params"] == 191_950_298


def test_v100_efficiency_is_its_own_published_training_throughput():
    """V100 is measured itself (DGX-1, AMP 36,692 tok/s, FP32 13,981): its preset takes those derived
    figures, only for the precisions Volta has; the 32 GB part, the same GV100, takes them too."""
    derived = efficiency.derived_mfu(GPUS)
    want = {"fp16": round(derived[("V100", "amp")], 3), "fp32": round(derived[("V100", "fp32")], 3)}
    assert want == {"fp16": 0.283, "fp32": 0.68}
    assert dict(GPUS["V100"].mfu) == want == dict(GPUS["V100-32GB"].mfu)
    assert efficiency.preset_mfu("A100-80GB", GPUS) == dict(GPUS["A100"].mfu)


def test_the_published_v100_rows_use_the_v100_presets_datasheet_figures():
    """efficiency.toml gives V100's peak and bandwidth with its rows; they are the preset's, so the
    derivation and the compute model see the same GPU."""
    v100 = GPUS["V100"]
    for row in efficiency._data()["training"]:
        if row["gpu"] == "V100":
            peak = v100.tflops[efficiency.PRECISION_KEYS[row["precision"]][0]]
            assert (row["peak_tflops"], row["memory_bandwidth_GBps"], row["memory_efficiency"]) == (
                peak,
                v100.memory_bandwidth_GBps,
                v100.memory_efficiency,
            )

"""The GPU presets' host cost (gpus.toml launch_us, traffic.toml host_dispatches_per_tensor) is derived
from a committed GPU run (benchmarks/gpu_host_cost.py), never chosen: recomputed here from the raw results,
and the derivation checked on a hand-made document."""

import json

import pytest

from benchmarks import gpu_host_cost
from runtime_model.presets.preset_loading import builtin_library

LIB = builtin_library()


@pytest.fixture(scope="module")
def derived():
    return gpu_host_cost.derive(gpu_host_cost.load())


def test_every_cuda_preset_launch_cost_is_the_derived_one(derived):
    for gpu in LIB.gpus.values():
        assert gpu.launch_us == round(derived.launch_us, 1), gpu.name
        assert "benchmarks/results/gpu-compute" in gpu.launch_source


def test_per_tensor_host_work_is_the_derived_one(derived):
    measured = {"adam": derived.optimizer_per_tensor, "grad-scaler-unscale": derived.scaler_per_tensor}
    assert LIB.optimizers["adam"].host_dispatches_per_tensor == round(measured["adam"], 2)
    assert LIB.memory_pass("grad-scaler-unscale").host_dispatches_per_tensor == round(
        measured["grad-scaler-unscale"], 2
    )
    for name in ("adamw", "fused-adam", "accum-adam"):  # stand-ins, said so in their sources
        assert (
            LIB.optimizers[name].host_dispatches_per_tensor
            == LIB.optimizers["adam"].host_dispatches_per_tensor
        )
        assert "adam" in LIB.optimizers[name].host_source


def _point(model, precision, wrapper, share, forward, backward, optimizer, scaler=None):
    host = {"forward": forward, "backward": backward, "optimizer": optimizer}
    if scaler is not None:
        host["scaler"] = scaler
    return {"model": model, "units": 1, "precision": precision, "wrapper": wrapper,
            "device_busy_share": share, "host_ms": host}  # fmt: skip


def test_hand_made_document():
    """transformer-base fp16: 516 + 791 preset ops. At 40 us/op of host against a 30 us dispatch the
    launch adds 10 us; a device-bound point (share 0.9) is left out. Adam's 8 ops then cost 8 x 40 us,
    the rest of its 2.17 ms is per tensor: (2170 - 320) / (185 x 30) = 1/3 dispatch per tensor."""
    m = LIB.models["transformer-base"]
    ops = m.forward_ops["amp"] + m.backward_ops["amp"]
    tensors = len(m.backward_numels)
    host_ms = ops * 40e-3
    opt_ms = (8 * 40 + tensors * 30 / 3) * 1e-3
    scaler_ms = (2 * 40 + tensors * 30 * 0.1) * 1e-3
    doc = {
        "dispatch": {"us_per_op": 30.0},
        "points": [
            _point("transformer-base", "fp16", "bare", 0.2, host_ms / 2, host_ms / 2, opt_ms, scaler_ms),
            _point("transformer-base", "fp16", "bare", 0.9, 99.0, 99.0, 99.0, 99.0),
            _point("transformer-xl-base", "fp16", "bare", 0.2, 1.0, 1.0, 1.0, 1.0),  # no preset: skipped
        ],
    }
    cost = gpu_host_cost.derive(doc)
    assert cost.launch_us == pytest.approx(10.0)
    assert cost.optimizer_per_tensor == pytest.approx(1 / 3)
    assert cost.scaler_per_tensor == pytest.approx(0.1)
    assert len(cost.launch_samples) == 1


def test_nothing_host_bound_is_refused():
    doc = {
        "dispatch": {"us_per_op": 30.0},
        "points": [_point("transformer-base", "fp16", "bare", 0.9, 1, 1, 1, 1)],
    }
    with pytest.raises(ValueError, match="host-bound"):
        gpu_host_cost.derive(doc)


def test_the_command_prints_the_figures_and_fails_in_one_line(tmp_path, capsys):
    assert gpu_host_cost.main([]) == 0
    assert "launch_us = " in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dispatch": {"us_per_op": 30.0}, "points": []}))
    assert gpu_host_cost.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err

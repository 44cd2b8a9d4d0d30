"""Per-model device efficiency (efficiency.toml [[device_busy]]): each row is a committed GPU run's
measured device-busy time, and the derived efficiency puts exactly that device time back through the
compute model; lookups follow the GPU's model stand-in and the AMP twin, and a given --mfu still wins."""

import dataclasses
import json
from pathlib import Path

import pytest

from runtime_model.presets import efficiency
from runtime_model.presets import to_model as presets

LIB = presets.builtin_library()
RESULTS = Path(__file__).parent.parent / "benchmarks" / "results" / "gpu-compute" / "gpu-compute.json"
ROWS = efficiency._data()["device_busy"]


@pytest.fixture(scope="module")
def measured():
    doc = json.loads(RESULTS.read_text())
    return {(p["model"], p["units"], p["precision"]): p for p in doc["points"] if p["wrapper"] == "bare"}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['model']}-{r['precision']}")
def test_every_row_is_a_committed_measurement(row, measured):
    point = measured[(row["model"], row["units"], row["precision"])]
    assert row["device_busy_ms"] == pytest.approx(point["device_busy_ms"], rel=1e-9)
    assert row["gpu"] == json.loads(RESULTS.read_text())["header"]["gpu_preset"]


def test_the_h100_reference_row_is_the_committed_transformer_xl_run(measured):
    row = next(r for r in efficiency._data()["training"] if r["gpu"] == "H100")
    busy_ms = measured[("transformer-xl-base", row["tokens_per_iteration"], "fp16")]["device_busy_ms"]
    assert row["tokens_per_iteration"] / row["tokens_per_s"] == pytest.approx(busy_ms * 1e-3, rel=1e-6)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['model']}-{r['precision']}")
def test_the_derived_efficiency_puts_the_measured_device_time_back(row):
    """iteration_work's device time of the bare iteration (forward, backward, the step's passes) at the
    unrounded efficiency is the device-busy time it came from."""
    mfu = efficiency.model_mfu_from_busy(row, LIB)
    choice = presets.resolve(presets.PresetRequest(1, gpu=row["gpu"], model=row["model"], global_batch=row["units"], precision=row["precision"], mfu=mfu))  # fmt: skip
    w = presets.iteration_work(choice)
    device_s = w.forward.device_s + w.backward.device_s + w.optimizer.device_s
    assert device_s == pytest.approx(row["device_busy_ms"] * 1e-3, rel=1e-9)


def test_lookup_follows_the_stand_in_and_the_amp_twin():
    own, where = efficiency.model_mfu("H100", "transformer-base", "fp16", LIB)
    assert "measured on H100 fp16" in where
    assert efficiency.model_mfu("H200", "transformer-base", "fp16", LIB)[0] == own  # the same GH100
    assert efficiency.model_mfu("H100", "transformer-base", "bf16", LIB)[0] == own  # fp16's twin
    assert efficiency.model_mfu("A100", "transformer-base", "fp16", LIB) is None  # not measured there
    assert efficiency.model_mfu("H100", "gpt2-small", "tf32", LIB) is None


def test_resolve_takes_the_models_own_figure_and_a_given_mfu_wins():
    assert presets.resolve(
        presets.PresetRequest(8, gpu="H100", model="transformer-big", precision="fp16")
    ).mfu == pytest.approx(efficiency.model_mfu("H100", "transformer-big", "fp16", LIB)[0])
    assert (
        presets.resolve(presets.PresetRequest(8, gpu="A100", model="transformer-big", precision="fp16")).mfu
        == LIB.gpu("A100").mfu["fp16"]
    )
    assert (
        presets.resolve(
            presets.PresetRequest(8, gpu="H100", model="transformer-big", precision="fp16", mfu=0.3)
        ).mfu
        == 0.3
    )


def test_a_wider_model_uses_more_of_the_peak():
    """Transformer-big (d=1024) fills the tensor cores better than Transformer-base (d=512), which uses
    more of them than the small-batch Transformer-XL reference: efficiency is the model's, not the GPU's."""
    big = efficiency.model_mfu("H100", "transformer-big", "fp16", LIB)[0]
    base = efficiency.model_mfu("H100", "transformer-base", "fp16", LIB)[0]
    assert big > base > LIB.gpu("H100").mfu["fp16"]


def test_a_user_library_without_rows_keeps_the_gpus_figure():
    custom = dataclasses.replace(
        LIB, models={**LIB.models, "mine": dataclasses.replace(LIB.models["transformer-base"], name="mine")}
    )
    assert efficiency.model_mfu("H100", "mine", "fp16", custom) is None
    assert (
        presets.resolve(presets.PresetRequest(8, gpu="H100", model="mine"), library=custom).mfu
        == LIB.gpu("H100").mfu["bf16"]
    )

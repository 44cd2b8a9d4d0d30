"""Large-batch efficiency (gpus.toml `mfu`) derived from published throughputs, not chosen.

Why a derivation: the compute model charges FLOPs / (peak x mfu) plus memory-bound bytes / (bandwidth x
memory_efficiency). An efficiency read off a benchmark is only right for this model if the benchmark's
own memory-bound time is taken out first, with the same byte counts the model charges. So the published
time per iteration of a reference model (preset_data/efficiency.toml) is inverted through the same two
terms. GPUs measured only in inference borrow the nearest measured GPU's training iteration, scaled by
the two GPUs' inference throughputs of the same model.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from runtime_model.preset_types import GpuPreset

AMP = "amp"
# gpus.toml precision keys each reference precision stands for.
PRECISION_KEYS = {AMP: ("fp16", "bf16"), "tf32": ("tf32",), "fp32": ("fp32",)}


@dataclass(frozen=True)
class Device:
    """What the derivation needs of a GPU: peak for the precision, bandwidth, streaming efficiency."""

    peak_tflops: float
    memory_bandwidth_GBps: float
    memory_efficiency: float


@cache
def _data() -> dict:
    return tomllib.loads(resources.files("runtime_model.preset_data").joinpath("efficiency.toml").read_text())


def _mode(precision: str) -> str:
    return AMP if precision == AMP else "full"


def _device(row: dict, gpus: dict[str, GpuPreset]) -> Device:
    if "peak_tflops" in row:
        return Device(row["peak_tflops"], row["memory_bandwidth_GBps"], row["memory_efficiency"])
    gpu = gpus[row["gpu"]]
    peak = gpu.tflops[PRECISION_KEYS[row["precision"]][0]]
    return Device(peak, gpu.memory_bandwidth_GBps, gpu.memory_efficiency)


def mfu_from_iteration(iteration_s: float, tokens: float, precision: str, device: Device) -> float:
    """The efficiency at which the reference's FLOPs fill `iteration_s` once its memory time is out."""
    ref = _data()["reference"]
    mode = _mode(precision)
    flops = ref["train_flops_per_unit"] * tokens + ref["flops_intercept"]
    nbytes = ref["bytes_per_unit"][mode] * tokens + ref["fixed_bytes"][mode]
    memory_s = nbytes / (device.memory_bandwidth_GBps * 1e9 * device.memory_efficiency)
    if memory_s >= iteration_s:
        raise ValueError(f"memory time {memory_s:.3f} s exceeds the published iteration {iteration_s:.3f} s")
    return flops / (device.peak_tflops * 1e12 * (iteration_s - memory_s))


def derived_mfu(gpus: dict[str, GpuPreset]) -> dict[tuple[str, str], float]:
    """(GPU, reference precision) -> efficiency, for every GPU efficiency.toml measures or scales."""
    out: dict[tuple[str, str], float] = {}
    iterations: dict[tuple[str, str], tuple[float, float]] = {}
    for row in _data()["training"]:
        key = (row["gpu"], row["precision"])
        iteration_s = row["tokens_per_iteration"] / row["tokens_per_s"]
        iterations[key] = (iteration_s, row["tokens_per_iteration"])
        out[key] = mfu_from_iteration(
            iteration_s, row["tokens_per_iteration"], row["precision"], _device(row, gpus)
        )
    for row in _data().get("scaled", []):
        like_s, tokens = iterations[(row["like"], row["precision"])]
        iteration_s = like_s * row["like_tokens_per_s"] / row["tokens_per_s"]
        out[(row["gpu"], row["precision"])] = mfu_from_iteration(
            iteration_s, tokens, row["precision"], _device(row, gpus)
        )
    return out


def sources() -> dict[tuple[str, str], str]:
    """(GPU, reference precision) -> the published table each efficiency comes from."""
    data = _data()
    return {(r["gpu"], r["precision"]): r["source"] for r in [*data["training"], *data.get("scaled", [])]}


def preset_mfu(gpu: str, gpus: dict[str, GpuPreset]) -> dict[str, float]:
    """gpus.toml's `mfu` table for `gpu`, per precision key, rounded as stored: its own derived figure,
    else its stand-in's (efficiency.toml [stand_in]); a GPU without TF32 (tf32 peak = fp32 peak, T4)
    runs "tf32" as fp32. Only the precisions the GPU lists in `tflops` (V100: fp32 and fp16)."""
    derived, stand_in = derived_mfu(gpus), _data()["stand_in"]
    table = {}
    for precision, keys in PRECISION_KEYS.items():
        for name in (gpu, stand_in.get(gpu), stand_in.get(precision)):
            if (name, precision) in derived:
                table.update(dict.fromkeys(keys, round(derived[(name, precision)], 3)))
                break
    peaks = gpus[gpu].tflops
    if "tf32" in peaks and peaks["tf32"] == peaks.get("fp32") and "fp32" in table:
        table["tf32"] = table["fp32"]
    return {key: value for key, value in table.items() if key in peaks}

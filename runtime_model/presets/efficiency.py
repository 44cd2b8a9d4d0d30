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

from runtime_model.presets import preset_data
from runtime_model.presets.preset_types import GpuPreset, PresetLibrary

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
    return tomllib.loads(preset_data.read_text("efficiency.toml"))


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


def stand_in_chain(gpu: str) -> list[str]:
    """`gpu`, then the GPUs standing in for it in turn ([stand_in]: H200 -> H100 -> A100)."""
    chain, stand_in = [gpu], _data()["stand_in"]
    while chain[-1] in stand_in and stand_in[chain[-1]] not in chain:
        chain.append(stand_in[chain[-1]])
    return chain


def preset_mfu(gpu: str, gpus: dict[str, GpuPreset]) -> dict[str, float]:
    """gpus.toml's `mfu` table for `gpu`, per precision key, rounded as stored: its own derived figure,
    else the first of its stand-ins' (efficiency.toml [stand_in], followed as a chain), else the
    precision's stand-in. Only the precisions the GPU's datasheet lists in `tflops` (V100, T4: fp32 and
    fp16)."""
    derived, stand_in = derived_mfu(gpus), _data()["stand_in"]
    table = {}
    for precision, keys in PRECISION_KEYS.items():
        for name in (*stand_in_chain(gpu), stand_in.get(precision)):
            if (name, precision) in derived:
                table.update(dict.fromkeys(keys, round(derived[(name, precision)], 3)))
                break
    peaks = gpus[gpu].tflops
    return {key: value for key, value in table.items() if key in peaks}


AMP_TWINS = {"fp16": "bf16", "bf16": "fp16"}  # the same tensor-core peak: each stands in for the other


def model_mfu_from_busy(row: dict, library: PresetLibrary) -> float:
    """The efficiency at which a preset model's FLOPs fill its measured device-busy time once the memory
    time iteration_work charges for the bare iteration (its kernels' bytes, its step's passes) is out.
    (The same bytes as iteration_work; tests/test_model_efficiency.py checks that the figure puts the
    measured device time back through it. Not called here: presets imports this module.)"""
    m, g, units = library.model(row["model"]), library.gpu(row["gpu"]), row["units"]
    mode = "amp" if row["precision"] in AMP_TWINS else "full"
    pass_bytes = sum(
        library.traffic(n).bytes_per_param for n in library.step_passes(m.name, row["precision"])
    )
    nbytes = (
        (m.forward_bytes_per_unit[mode] + m.backward_bytes_per_unit[mode]) * units
        + m.forward_fixed_bytes[mode] + m.backward_fixed_bytes[mode] + pass_bytes * m.params
    )  # fmt: skip
    memory_s = nbytes / (g.memory_bandwidth_GBps * 1e9 * g.memory_efficiency)
    busy_s = row["device_busy_ms"] * 1e-3
    if memory_s >= busy_s:
        raise ValueError(
            f"{row['model']} on {row['gpu']}: memory time {memory_s:.3f} s exceeds device-busy {busy_s:.3f} s"
        )
    return m.train_flops_per_unit * units / (g.tflops[row["precision"]] * 1e12 * (busy_s - memory_s))


@cache
def model_mfu(gpu: str, model: str, precision: str, library: PresetLibrary) -> tuple[float, str] | None:
    """(efficiency, where from) of `model` on `gpu` at `precision` from a measured device-busy row: the
    GPU's own or its [model_stand_in]'s, the precision's or its AMP twin's; None where none is measured
    (the GPU's own figure then applies)."""
    rows = {(r["gpu"], r["model"], r["precision"]): r for r in _data().get("device_busy", [])}
    stand_in = _data().get("model_stand_in", {})
    for name in (gpu, stand_in.get(gpu)):
        for prec in (precision, AMP_TWINS.get(precision)):
            row = rows.get((name, model, prec))
            if row is not None and model in library.models and name in library.gpus:
                where = (
                    f"{model}'s device-busy time measured on {name} {prec} (efficiency.toml [[device_busy]])"
                )
                return round(model_mfu_from_busy(row, library), 3), where
    return None

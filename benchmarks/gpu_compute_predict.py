"""The runtime model's side of the GPU compute benchmark: the preset GPU of a device, the model's compute
at a measured point, and the figures derived from a measurement and its prediction.

Why apart from the benchmark: the rescore (gpu_compute_rescore) re-predicts committed runs on a machine
without a GPU, with exactly the prediction the benchmark made.
"""

from __future__ import annotations

import dataclasses

GPU_PRESETS = [
    ("H200", "H200"),
    ("H100", "H100"),
    ("A100", "A100"),
    ("V100", "V100"),
    ("A40", "A40"),
    ("T4", "T4"),
]


def gpu_preset_for(device_name: str | None, memory_gib: float = 0.0) -> str:
    """The gpus.toml preset of a CUDA device name; H100 when unknown (or on CPU)."""
    upper = (device_name or "").upper()
    for key, preset in GPU_PRESETS:
        if key in upper:
            big = {"A100": (50, "A100-80GB"), "V100": (20, "V100-32GB")}.get(preset)
            return big[1] if big and memory_gib > big[0] else preset
    return "H100"


def predict(model: str, units: int, precision: str, gpu: str, dispatch_us: float) -> dict | None:
    """The runtime model's compute for one GPU at this point (None for a model without a preset)."""
    from runtime_model.prediction.gpu_compute import ddp_compute
    from runtime_model.presets import to_model as presets

    lib = presets.builtin_library()
    if model not in lib.models:
        return None
    lib = dataclasses.replace(
        lib, gpus={**lib.gpus, gpu: dataclasses.replace(lib.gpus[gpu], dispatch_us=dispatch_us)}
    )
    choice = presets.resolve(
        presets.PresetRequest(1, gpu=gpu, model=model, global_batch=units, precision=precision), library=lib
    )
    work = presets.iteration_work(choice, lib)
    ddp = ddp_compute(work, 0.0, "benchmarks.gpu_compute")
    fwd_bwd = work.forward + work.backward
    bare_s = fwd_bwd.time_s + work.optimizer.time_s if work.amp else (fwd_bwd + work.optimizer).time_s

    def phase(w) -> dict:
        return {"host_ms": w.host_s * 1e3, "device_ms": w.device_s * 1e3}

    return {
        "gpu_preset": gpu,
        "dispatch_us": dispatch_us,
        "launch_us": lib.gpus[gpu].launch_us,
        "mfu": choice.mfu,
        "bare_ms": bare_s * 1e3,
        "ddp_ms": (ddp.compute_s + ddp.optimizer_s) * 1e3,
        "phases": {k: phase(getattr(work, k)) for k in ("forward", "backward", "optimizer", "ddp_copies")},
    }


def derive(point: dict, prediction: dict | None) -> None:
    """Figures computed from the measured ones: per-op and per-launch host cost, device share, error."""
    host, ops, launches = point.get("host_ms") or {}, point.get("ops") or {}, point.get("launches") or {}
    point["host_us_per_op"] = {p: host[p] * 1e3 / n for p, n in ops.items() if n and host.get(p) is not None}
    point["host_us_per_launch"] = {
        p: host[p] * 1e3 / n for p, n in launches.items() if n and host.get(p) is not None and p != "wait"
    }
    wall, busy = point.get("wall_ms"), point.get("device_busy_ms")
    point["device_busy_share"] = busy / wall if wall and busy is not None else None
    point["prediction"] = prediction
    pred = None if prediction is None else prediction[f"{point['wrapper']}_ms"]
    point["predicted_ms"] = pred
    point["error_pct"] = (pred - wall) / wall * 100 if pred is not None and wall else None

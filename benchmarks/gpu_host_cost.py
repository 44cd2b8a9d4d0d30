"""The host-cost figures of the GPU presets, derived from a GPU compute benchmark's results.

Why derived here: the CPU-only `profiler.opcount --dispatch` times eager ops on the CPU, so it misses
what a CUDA launch adds on the host (driver call, stream and allocator bookkeeping), and it prices a
foreach optimizer's step as a handful of ops when its host time really grows with the parameter
tensors (Python bookkeeping, one CPU-tensor `.item()` per step counter). `benchmarks.gpu_compute`
measures both on a GPU host beside that host's own `opcount --dispatch` figure, so:

- launch_us = median over host-bound bare points, forward and backward, of
  host ms / the preset's kernel-launching ops - dispatch_us (gpus.toml `launch_us`);
- an optimizer's (or GradScaler's) host dispatches per tensor = median over host-bound points of its
  phase's host ms, less its per-call ops (traffic.toml host_ops) at dispatch + launch, / (parameter
  tensors x dispatch_us) (traffic.toml `host_dispatches_per_tensor`).

Host-bound: the device is busy under HOST_BOUND_SHARE of the iteration, so the launch queue never fills
and a launch never waits for the device: the host's time is its own. Medians, so that one noisy phase
moves nothing. Run `python -m benchmarks.gpu_host_cost RESULTS.json` to print them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

HOST_BOUND_SHARE = 0.6
RESULTS = Path(__file__).parent / "results" / "gpu-compute" / "gpu-compute.json"
AMP = ("fp16", "bf16")


@dataclass(frozen=True)
class HostCost:
    """The derived figures and the measurements each comes from (for the table in the presets' sources)."""

    dispatch_us: float  # the measuring host's opcount --dispatch figure
    launch_us: float
    launch_samples: tuple[float, ...]
    optimizer_per_tensor: float  # foreach Adam's host dispatches per parameter tensor
    optimizer_samples: tuple[float, ...]
    scaler_per_tensor: float  # GradScaler unscale_ + step + update, per parameter tensor
    scaler_samples: tuple[float, ...]


def _host_bound(point: dict) -> bool:
    share = point.get("device_busy_share")
    return share is not None and share < HOST_BOUND_SHARE and not point.get("errors")


def derive(doc: dict, library=None) -> HostCost:
    """The figures from one benchmark document (benchmarks.gpu_compute's JSON)."""
    from runtime_model.presets.to_model import builtin_library

    lib = library or builtin_library()
    dispatch = doc["dispatch"]["us_per_op"]
    launch, optimizer, scaler = [], [], []
    points = [p for p in filter(_host_bound, doc["points"]) if p["model"] in lib.models]
    for p in points:
        if p["wrapper"] == "bare":
            model, mode = lib.models[p["model"]], "amp" if p["precision"] in AMP else "full"
            ops = model.forward_ops[mode] + model.backward_ops[mode]
            launch.append((p["host_ms"]["forward"] + p["host_ms"]["backward"]) * 1e3 / ops - dispatch)
    if not launch:
        raise ValueError("no host-bound bare point of a preset model to derive the launch cost from")
    launch_us = max(0.0, statistics.median(launch))
    scaler_call_us = lib.memory_pass("grad-scaler-unscale").host_ops * (dispatch + launch_us)
    for p in points:
        model = lib.models[p["model"]]
        host, tensors = p["host_ms"], len(model.backward_numels)
        call_us = lib.optimizers[model.optimizer].host_ops * (dispatch + launch_us)
        optimizer.append((host["optimizer"] * 1e3 - call_us) / (tensors * dispatch))
        if p["precision"] == "fp16" and host.get("scaler") is not None:
            scaler.append((host["scaler"] * 1e3 - scaler_call_us) / (tensors * dispatch))
    if not (optimizer and scaler):
        raise ValueError("no host-bound fp16 point of a preset model to derive the per-tensor costs from")
    return HostCost(
        dispatch_us=dispatch,
        launch_us=launch_us,
        launch_samples=tuple(launch),
        optimizer_per_tensor=statistics.median(optimizer),
        optimizer_samples=tuple(optimizer),
        scaler_per_tensor=statistics.median(scaler),
        scaler_samples=tuple(scaler),
    )


def load(path: Path = RESULTS) -> dict:
    return json.loads(Path(path).read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", default=str(RESULTS), help="a benchmarks.gpu_compute JSON")
    args = parser.parse_args(argv)
    try:
        cost = derive(load(Path(args.results)))
    except (OSError, ValueError, KeyError) as exc:
        print(f"gpu_host_cost: {args.results}: {exc}", file=sys.stderr)
        return 2

    def spread(xs: tuple[float, ...]) -> str:
        return ", ".join(f"{x:.2f}" for x in sorted(xs))

    print(f"host dispatch (opcount --dispatch): {cost.dispatch_us:.1f} us/op")
    print(f"launch_us = {cost.launch_us:.1f}   (median of {spread(cost.launch_samples)})")
    print(f"optimizer host_dispatches_per_tensor = {cost.optimizer_per_tensor:.2f}   "
          f"(median of {spread(cost.optimizer_samples)})")  # fmt: skip
    print(f"grad scaler host_dispatches_per_tensor = {cost.scaler_per_tensor:.2f}   "
          f"(median of {spread(cost.scaler_samples)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Memory benchmark: the per-rank peak of real DDP, Decent-DP and FSDP2 steps next to method_memory's.

For each model and batch, two gloo ranks on this CPU (torch.multiprocessing spawn, a FileStore) train
with PyTorch's MemTracker (torch/distributed/_tools/mem_tracker.py) active in every rank: the model, the
wrapper (DistributedDataParallel; decent_dp's DecentralizedDataParallel as
rtmodel_harness/decent_dp_args.py configures it, with AccumAdam; fully_shard on each repeated block and
on the root) and the optimizer are built inside the tracker so that their buffers are counted. The
tracker's peak is read over steady iterations (re-entering the tracker resets its peak to the memory
alive then), after warm-up iterations in which DDP rebuilds its buckets and Decent-DP builds its blocks;
the peak over construction and warm-up is kept too. The prediction is runtime_model.memory's
method_memory with the model's shape (its FSDP units, Decent-DP buckets, largest tensor, buffers) and the
activations of profiler/activation_memory.py (estimate_for_workload, device_type="cpu"; FakeTensors).

    python -m benchmarks.memory_accuracy            # every row (~3 min on 2 cores)
    python -m benchmarks.memory_accuracy --quick    # one model, one batch, DDP and FSDP2

Raw rows (one JSON object per rank and row, with device, host, torch and decent_dp versions and date):
benchmarks/results/memory/<date>-<host>.jsonl. Target: every row within 5 %.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "memory"
BOUND = 0.05  # the acceptance criterion: |predicted - measured| / measured per row
WORLD = 2
WARMUP = 3  # Decent-DP sets its buckets up in its second forward, steps them from the third
MEASURED = 2
METHODS = ("ddp", "decent-dp", "fsdp")
OPTIMIZER = {
    "ddp": "adam",
    "decent-dp": "accum-adam",
    "fsdp": "adam",
}  # the advisor's Decent-DP runs AccumAdam


@dataclass(frozen=True)
class Case:
    model: str  # a harness model name or package.module:factory
    model_args: tuple[tuple[str, object], ...]
    batches: tuple[int, ...]


CASES = (
    Case("mlp", (), (8, 256, 1024)),
    Case("transformer-tiny", (), (2, 8, 32)),
    Case("gpt2-small", (("width_div", 16),), (128, 512, 2048)),
    Case("benchmarks.memory_models:small_cnn", (), (4, 16, 64)),
    Case("benchmarks.memory_models:small_vit", (), (2, 8, 32)),
)
QUICK = (Case("mlp", (), (256,)),)
QUICK_METHODS = ("ddp", "fsdp")


# ----------------------------------------------------------------------------- the model's shape


def fsdp_units(model) -> list:
    """The modules fully_shard wraps below the root: the children of the first nn.ModuleList (transformer
    layers, CNN and ViT blocks), else the root's direct children that hold parameters (an MLP's Linears)."""
    from torch import nn

    for module in model.modules():
        if isinstance(module, nn.ModuleList):
            return list(module)
    return [m for m in model.children() if any(True for _ in m.parameters())]


def model_shape(case: Case, batch: int) -> dict:
    """Parameters and the shape method_memory needs, from the model built on this host's CPU."""
    from rtmodel_harness.fsdp import late_grad_params
    from rtmodel_harness.workloads import build_workload

    wl = build_workload(case.model, dict(case.model_args), batch, "cpu", rank=0)
    params = [p for p in wl.model.parameters() if p.requires_grad]
    layout = wl.bucket_layout(cap_mb=25.0)
    element = params[0].element_size()
    units = fsdp_units(wl.model)
    return {
        "params": sum(p.numel() for p in params),
        "largest_tensor_params": max(p.numel() for p in params),
        "unit_params": [sum(p.numel() for p in u.parameters()) for u in units],
        "late_grad_params": late_grad_params(wl.model, units, params, layout.backward_order),
        "decent_dp_bucket_params": [b // element for b in layout.gossip_buckets_bytes],
        "buffer_bytes": sum(b.numel() * b.element_size() for b in wl.model.buffers()),
    }


def activations(case: Case, batch: int) -> tuple[float, float, str]:
    """The activations' peak, and the peak of activations plus gradients made so far (the measure's
    highest total less its parameters, buffers and optimizer states: all that changes in forward and
    backward), from profiler/activation_memory.py on FakeTensors."""
    from profiler.activation_memory import estimate_for_workload

    m = estimate_for_workload(case.model, batch, model_args=dict(case.model_args), device_type="cpu")
    with_grads = m.peak_total_bytes - m.parameter_bytes - m.buffer_bytes - m.optimizer_bytes
    return (
        float(m.activation_bytes),
        float(with_grads),
        "profiler.activation_memory.estimate_for_workload(cpu)",
    )


def predict(method: str, shape: dict, activation_bytes: float, activation_grad_bytes: float):
    from runtime_model.memory.accounting import TrainingRecipe, method_memory

    recipe = TrainingRecipe(optimizer=OPTIMIZER[method], foreach_step=False)  # CPU: the per-tensor loop
    buckets = shape["decent_dp_bucket_params"] if method == "decent-dp" else ()
    return method_memory(
        method,
        shape["params"],
        recipe,
        world=WORLD,
        gpus_per_node=WORLD,
        activation_bytes=activation_bytes,
        largest_tensor_params=shape["largest_tensor_params"],
        unit_params=shape["unit_params"],
        bucket_params=buckets,
        backend="gloo",
        buffer_bytes=shape["buffer_bytes"],
        late_grad_params=shape["late_grad_params"],
        activation_grad_bytes=activation_grad_bytes,
    )


# ----------------------------------------------------------------------------- a rank


def _wrap(method: str, wl, recipe):
    """(module to call, optimizer or None, whether the wrapper steps in backward) for one method."""
    if method == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        from rtmodel_harness.ddp_args import ddp_kwargs

        wrapped = DistributedDataParallel(wl.model, **ddp_kwargs(wl.device, 25.0))
        return wrapped, wl.make_optimizer(wrapped.parameters(), recipe=recipe), False
    if method == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for unit in fsdp_units(wl.model):
            fully_shard(unit)
        fully_shard(wl.model)
        return wl.model, wl.make_optimizer(wl.model.parameters(), recipe=recipe), False
    from decent_dp.ddp import DecentralizedDataParallel

    from rtmodel_harness.decent_dp_args import decent_dp_kwargs

    return (
        DecentralizedDataParallel(wl.model, **decent_dp_kwargs(wl, recipe, None, "complete", 25.0, WORLD)),
        None,
        True,
    )


def _peak_bytes(tracker) -> int:
    return int(sum(s["Total"] for s in tracker.get_tracker_snapshot("peak").values()))


def _step(tracker, recipe, wl, model, optimizer, in_backward: bool, i: int) -> None:
    tracker.reset_mod_stats()  # MemTracker refuses a second iteration of the same root module otherwise
    if in_backward:
        from rtmodel_harness.recipe import backward_only_step

        backward_only_step(recipe, wl, model, wl.make_batch(i), None)
    else:
        from rtmodel_harness.recipe import train_step

        train_step(recipe, wl, model, wl.make_batch(i), optimizer, None)


def measure_row(case: Case, batch: int, method: str, rank: int) -> dict:
    """Build, warm up and step one method under MemTracker; the peaks (bytes) of this rank."""
    import torch.distributed as dist
    from torch.distributed._tools.mem_tracker import MemTracker

    from rtmodel_harness.recipe import Recipe
    from rtmodel_harness.workloads import build_workload

    recipe = Recipe(optimizer=OPTIMIZER[method])
    tracker = MemTracker()
    started = time.perf_counter()
    with tracker:
        wl = build_workload(case.model, dict(case.model_args), batch, "cpu", rank=rank)
        model, optimizer, in_backward = _wrap(method, wl, recipe)
        for i in range(WARMUP):
            _step(tracker, recipe, wl, model, optimizer, in_backward, i)
    warmup_peak = _peak_bytes(tracker)
    with tracker:  # entering again starts the peak from the memory alive now
        for i in range(WARMUP, WARMUP + MEASURED):
            _step(tracker, recipe, wl, model, optimizer, in_backward, i)
    steady_peak = _peak_bytes(tracker)
    peak = tracker.get_tracker_snapshot("peak").values()
    breakdown = {str(k).split(".")[-1]: v for snap in peak for k, v in snap.items()}
    for op in getattr(model, "_comm_ops", None) or ():  # Decent-DP's last all-reduces still in flight
        if op is not None:
            op.wait()
    del model, optimizer, wl, tracker
    gc.collect()
    dist.barrier()
    return {
        "measured_peak_bytes": steady_peak,
        "warmup_peak_bytes": warmup_peak,
        "measured_breakdown": breakdown,
        "rank_seconds": time.perf_counter() - started,
    }


def _rank_main(rank: int, store: str, plan: list, out: str) -> None:
    import torch
    import torch.distributed as dist
    from loguru import logger

    import rtmodel_decentdp  # noqa: F401  (AccumAdam's compat shim, as the stages import it)

    logger.remove()  # Decent-DP logs every construction at DEBUG
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    rows = []
    for case, batch, method in plan:
        rows.append({"rank": rank, **measure_row(case, batch, method, rank)})
    Path(f"{out}.{rank}").write_text(json.dumps(rows))
    from rtmodel_util.rank_exit import exit_without_finalisation, release_process_groups

    release_process_groups()
    exit_without_finalisation(0)


# ----------------------------------------------------------------------------- the run


def _environment() -> dict:
    from importlib.metadata import version

    import torch

    return {
        "device": "cpu",
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "decent_dp": version("decent-dp"),
        "python": platform.python_version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "world": WORLD,
        "backend": "gloo",
    }


def run(cases=CASES, methods=METHODS, out_dir: Path | None = RESULTS_DIR) -> list[dict]:
    """Measure and predict every (case, batch, method); write the raw rows; return them."""
    import torch.multiprocessing as mp

    started = time.perf_counter()
    plan = [(i, b, m) for i, case in enumerate(cases) for b in case.batches for m in methods]
    predictions = {}
    for i, case in enumerate(cases):
        for b in case.batches:
            shape = model_shape(case, b)
            acts, acts_grads, source = activations(case, b)
            for m in methods:
                predictions[(i, b, m)] = (
                    shape,
                    acts,
                    acts_grads,
                    source,
                    predict(m, shape, acts, acts_grads),
                )
    with tempfile.TemporaryDirectory() as tmp:
        rank_plan = [(cases[i], b, m) for i, b, m in plan]
        mp.spawn(_rank_main, args=(f"{tmp}/store", rank_plan, f"{tmp}/rows"), nprocs=WORLD)
        ranks = [json.loads(Path(f"{tmp}/rows.{r}").read_text()) for r in range(WORLD)]
    env = _environment()
    rows = []
    for measured in ranks:
        for (i, b, m), row in zip(plan, measured, strict=True):
            shape, acts, acts_grads, source, use = predictions[(i, b, m)]
            rows.append(
                {
                    "model": cases[i].model,
                    "model_args": dict(cases[i].model_args),
                    "batch": b,
                    "method": m,
                    "optimizer": OPTIMIZER[m],
                    **row,
                    "predicted_peak_bytes": use.peak_bytes,
                    "error": use.peak_bytes / row["measured_peak_bytes"] - 1,
                    "predicted_phase": use.peak_phase,
                    "predicted_parts": dict(use.parts),
                    "activation_bytes": acts,
                    "activation_grad_bytes": acts_grads,
                    "activation_source": source,
                    "shape": shape,
                    **env,
                }
            )
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        stamp = env["date"][:10]
        path = out_dir / f"{stamp}-{env['host']}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        print(f"raw rows: {path}")
    print(f"benchmark wall time: {time.perf_counter() - started:.0f} s")
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        f"{'model':<18} {'batch':>5} {'method':<9} {'rank':>4} {'measured MiB':>12} {'predicted MiB':>13} "
        f"{'error':>7}  phase"
    ]
    for r in rows:
        name = r["model"].split(":")[-1] + (
            "" if not r["model_args"] else "/" + ",".join(f"{k}={v}" for k, v in r["model_args"].items())
        )
        lines.append(
            f"{name:<18} {r['batch']:>5} {r['method']:<9} {r['rank']:>4} "
            f"{r['measured_peak_bytes'] / 2**20:>12.2f} {r['predicted_peak_bytes'] / 2**20:>13.2f} "
            f"{100 * r['error']:>6.2f}%  {r['predicted_phase']}"
        )
    errors = [abs(r["error"]) for r in rows]
    lines.append(
        f"rows {len(rows)}: mean |error| {100 * sum(errors) / len(errors):.2f} %, "
        f"max {100 * max(errors):.2f} %, within {100 * BOUND:.0f} %: "
        f"{sum(e <= BOUND for e in errors)}/{len(errors)}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one model, one batch, DDP and FSDP2")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder of the raw JSONL rows")
    args = parser.parse_args(argv)
    rows = run(QUICK, QUICK_METHODS, args.out) if args.quick else run(out_dir=args.out)
    print(table(rows))
    sys.exit(0 if all(abs(r["error"]) <= BOUND for r in rows) else 1)


if __name__ == "__main__":
    main()

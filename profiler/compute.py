"""Local compute timing: forward, backward, Adam step and bucket ready times, per iteration.

Why without DDP: the runtime model composes compute with communication itself, so compute must be
measured alone; all ranks still run at the same time so shared resources (cores, memory bandwidth,
PCIe) are contended as in training. Bucket ready time = when the gradient that completes the
bucket (its last parameter in backward order) is accumulated, measured from backward start with
post-accumulate-grad hooks. CPU: time.perf_counter; GPU: CUDA events recorded on the current stream.
The step is the recipe's (rtmodel_harness.recipe: --precision, --optimizer): forward + loss under autocast
for fp16/bf16, backward through the GradScaler for fp16 (its scale() counts in backward, its step() and
update() in the optimizer phase), as validation trains it. With a `memory` probe
(rtmodel_harness.peak_memory.PeakMemory, entered before the model was built) the run also records its
peak memory: CUDA's counter reset after the warm-up and read after the timed iterations, CPU's MemTracker
off for the timed iterations and on for its own iterations after them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from rtmodel_harness.buckets import BucketLayout, trainable_params
from rtmodel_harness.recipe import Recipe, backward, optimizer_step


class Clock:
    """Marks on the compute stream: CUDA events on a GPU (the host clock would time kernel launches,
    not kernels), perf_counter on CPU. Call sync() after the last mark and before seconds():
    elapsed_time is only defined once both events have completed."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def now(self):
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def seconds(self, start, end) -> float:
        return start.elapsed_time(end) / 1000.0 if self.cuda else end - start

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def measure_compute(
    workload,
    layout: BucketLayout,
    warmup: int,
    iterations: int,
    progress: Callable[[str], None] | None = None,
    recipe: Recipe | None = None,
    memory=None,
) -> dict:
    """This rank's compute samples (lists over measured iterations) under `recipe` (default: fp32, Adam);
    `memory` (a PeakMemory or None) is told when the timed iterations start and end (module doc)."""
    recipe = recipe or Recipe()
    if recipe.needs_decent_dp:
        import rtmodel_decentdp  # noqa: F401  (AccumAdam's compat shim)
    scaler = recipe.prepare(workload.device)
    model = workload.model
    params = trainable_params(model)
    clock = Clock(workload.device)
    ddp_closers, gossip_closers = layout.closers("ddp"), layout.closers("gossip")
    marks: dict[int, object] = {}
    handles = [
        params[pid].register_post_accumulate_grad_hook(lambda _p, pid=pid: marks.__setitem__(pid, clock.now()))
        for pid in sorted(set(ddp_closers) | set(gossip_closers))
    ]
    optimizer = workload.make_optimizer(params, lr=1e-4, recipe=recipe)
    out = {k: [] for k in ("forward_s", "backward_s", "optimizer_s", "ddp_bucket_ready_s", "gossip_bucket_ready_s")}
    total = warmup + iterations
    try:
        for it in range(total):
            if memory is not None:
                memory.between_iterations()  # after the one before (a no-op while the probe is off)
                if it == warmup:
                    memory.timed_start()
            batch = workload.make_batch(it)
            marks.clear()
            clock.sync()
            t0 = clock.now()
            with recipe.autocast(workload.device):
                loss = workload.loss(model, batch)
            t1 = clock.now()
            backward(loss, scaler)
            t2 = clock.now()
            optimizer_step(optimizer, scaler)
            t3 = clock.now()
            clock.sync()
            if it < warmup:
                continue
            out["forward_s"].append(clock.seconds(t0, t1))
            out["backward_s"].append(clock.seconds(t1, t2))
            out["optimizer_s"].append(clock.seconds(t2, t3))
            out["ddp_bucket_ready_s"].append([clock.seconds(t1, marks[p]) for p in ddp_closers])
            out["gossip_bucket_ready_s"].append([clock.seconds(t1, marks[p]) for p in gossip_closers])
            if progress and (it + 1 == total or (it - warmup) % max(1, iterations // 4) == 0):
                progress(f"compute: iteration {it - warmup + 1}/{iterations} "
                         f"(forward {out['forward_s'][-1] * 1e3:.1f} ms, backward {out['backward_s'][-1] * 1e3:.1f} ms)")
        if memory is not None:
            memory.timed_end()
            def step(batch):
                _untimed_step(recipe, workload, model, batch, optimizer, scaler)

            memory.measure(step, workload, total)
    finally:
        for h in handles:
            h.remove()
    return out


def _untimed_step(recipe: Recipe, workload, model, batch, optimizer, scaler) -> None:
    """One iteration as the timed loop runs it, without its marks (the memory probe's own iterations)."""
    with recipe.autocast(workload.device):
        loss = workload.loss(model, batch)
    backward(loss, scaler)
    optimizer_step(optimizer, scaler)

"""`rtmodel profile --trace-out DIR`: a torch.profiler trace of this rank's DDP training, as a team would
record its own loop, written where `rtmodel advise --trace DIR` reads it.

Why record it from the profile run: the same workload, recipe and buckets the profile measured, traced
the way the user's own loop is (docs/trace.md), so the trace path can be checked against the profile on
the same cluster. DDP here exchanges for real (its default hooks, unlike measure_ddp_work's noop one).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

WAIT, WARMUP, ACTIVE = 1, 2, 3  # the schedule docs/trace.md shows a user


def record_ddp_trace(
    make_workload: Callable[[], object], recipe, bucket_cap_mb: float, out_dir: str, rank: int,
    say: Callable[[str], None] | None = None,
) -> Path:  # fmt: skip
    """Trace ACTIVE DDP iterations after WAIT + WARMUP into `out_dir` (one .pt.trace.json.gz per rank)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    from rtmodel_harness.buckets import trainable_params
    from rtmodel_harness.ddp_args import ddp_kwargs
    from rtmodel_harness.recipe import backward, optimizer_step

    workload = make_workload()
    device = workload.device
    model = DistributedDataParallel(workload.model, **ddp_kwargs(device, bucket_cap_mb))
    scaler = recipe.prepare(device)
    optimizer = workload.make_optimizer(trainable_params(model), lr=1e-4, recipe=recipe)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with profile(
        activities=activities,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        on_trace_ready=tensorboard_trace_handler(str(out), worker_name=f"rank{rank}", use_gzip=True),
        record_shapes=True,
    ) as prof:
        for it in range(WAIT + WARMUP + ACTIVE):
            batch = workload.make_batch(it)
            with recipe.autocast(device):
                loss = workload.loss(model, batch)
            backward(loss, scaler)
            optimizer_step(optimizer, scaler)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            prof.step()
    if say:
        say(f"trace: {ACTIVE} DDP iterations traced into {out}")
    return out

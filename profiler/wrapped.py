"""Decent-DP's per-bucket work measured in wrapped iterations with real exchanges.

Why: the bare compute section times the optimizer step alone, while every rank computes. Under
Decent-DP the step runs in each bucket's hook right after that bucket's exchange completed, with the
exchanges' threads and the other ranks' hooks competing for the host; in a communication-bound
iteration that work is on the critical path after every exchange. On the emulated cluster it took
23-26 ms per iteration where the bare step (an 8 ms sleep) and the mixing predict about 9 ms. So the
profile runs a few Decent-DP iterations (ring, or complete on an odd world size; the workload's own
optimizer and recipe) and records,
per iteration, the seconds its hooks spent after their exchange had completed (rtmodel_decentdp.timed).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from datetime import timedelta

from rtmodel_documents.profile_schema import DDP_WRAPPED_KEYS


def wrapped_topology(world_size: int) -> str:
    """A Decent-DP built-in for this world: ring (one peer per round) where it applies (an even world
    size), else complete (any size >= 2)."""
    return "ring" if world_size % 2 == 0 else "complete"


WRAPPED_WARMUP = 3  # Decent-DP traces in its first iteration and builds its buckets in the second
WRAPPED_ITERATIONS = 10


@contextmanager
def _new_groups_time_out(timeout_s: float):
    """Decent-DP creates a process group per edge with torch's default timeout (30 min): while it does,
    that default is the profile's --timeout-s, so a lost peer fails the profile in time, not in 30 min."""
    import torch.distributed.distributed_c10d as c10d

    saved = c10d.default_pg_timeout, c10d.default_pg_nccl_timeout
    c10d.default_pg_timeout = c10d.default_pg_nccl_timeout = timedelta(seconds=timeout_s)
    try:
        yield
    finally:
        c10d.default_pg_timeout, c10d.default_pg_nccl_timeout = saved


def measure_gossip_step(
    workload,
    recipe,
    bucket_cap_mb: float,
    ranks_per_node: int,
    timeout_s: float,
    say: Callable[[str], None] | None = None,
) -> dict:
    """This rank's {"gossip_step_s": [seconds per iteration]}, or {"skipped": why} where Decent-DP cannot
    run here (not installed; one rank). Call on every rank: the wrapper's exchanges are collectives, and
    its groups (one per edge) time out after `timeout_s` as the profile's own do."""
    import torch.distributed as dist

    if dist.get_world_size() < 2:
        return {"skipped": "one rank: Decent-DP needs a peer"}
    try:
        from rtmodel_decentdp.timed import TimedDecentralizedDataParallel
    except ImportError as exc:  # decent_dp comes with rtmodel-advisor[cluster]
        return {"skipped": f"decent_dp is not installed ({exc.name})"}
    from rtmodel_harness.decent_dp_args import decent_dp_kwargs
    from rtmodel_harness.distributed import barrier
    from rtmodel_harness.recipe import backward_only_step

    scaler = recipe.prepare(workload.device)
    topology = wrapped_topology(dist.get_world_size())
    kwargs = decent_dp_kwargs(workload, recipe, scaler, topology, bucket_cap_mb, ranks_per_node)
    with _new_groups_time_out(timeout_s):
        model = TimedDecentralizedDataParallel(workload.model, **kwargs)
    model.train()
    barrier(workload.device)
    for it in range(WRAPPED_WARMUP + WRAPPED_ITERATIONS):
        backward_only_step(recipe, workload, model, workload.make_batch(it), scaler)
    barrier(workload.device)
    model.flush()
    samples = model.step_work_s[-WRAPPED_ITERATIONS:]
    if say:
        mean_ms = sum(samples) / len(samples) * 1e3
        say(f"compute: Decent-DP ({topology}) per-bucket work after the exchanges {mean_ms:.1f} ms per "
            f"iteration ({WRAPPED_ITERATIONS} wrapped iterations)")  # fmt: skip
    return {"gossip_step_s": samples}


def measure_ddp_work(
    make_workload: Callable[[], object],
    layout,
    recipe,
    bucket_cap_mb: float,
    say: Callable[[str], None] | None = None,
    *,
    device,
) -> dict:
    """This rank's compute under DDP ({"ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s"}: seconds per
    iteration), DDP built as validation builds it, with torch's noop comm hook (each bucket returned at
    once): the samples hold DDP's own host work (bucket copy-in in its autograd hooks, the copy-back, the
    reducer's bookkeeping) and no exchange, which the model adds itself. A fresh model from
    `make_workload`: DDP's hooks stay on the parameters it wraps. Call on every rank: building DDP
    broadcasts the parameters.

    Also this rank's peak memory in that training on `device` (the workload's), under "peak_memory"
    (profiler.compute_memory.rank_memory): the probe (rtmodel_harness.peak_memory) is on from before the
    model is built."""
    from dataclasses import replace

    from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
    from torch.nn.parallel import DistributedDataParallel

    from profiler.compute import measure_compute
    from profiler.compute_memory import rank_memory
    from rtmodel_harness.ddp_args import ddp_kwargs
    from rtmodel_harness.peak_memory import PeakMemory

    with PeakMemory(device) as memory:
        workload = make_workload()
        model = DistributedDataParallel(workload.model, **ddp_kwargs(workload.device, bucket_cap_mb))
        model.register_comm_hook(None, noop_hook)
        out = measure_compute(
            replace(workload, model=model), layout, WRAPPED_WARMUP, WRAPPED_ITERATIONS, None, recipe, memory
        )
    if say:
        mean_ms = sum(map(sum, (out["forward_s"], out["backward_s"], out["optimizer_s"]))) / WRAPPED_ITERATIONS * 1e3
        say(f"compute: under DDP without exchanges {mean_ms:.1f} ms per iteration ({WRAPPED_ITERATIONS} iterations)")
    times = dict(zip(DDP_WRAPPED_KEYS, (out["forward_s"], out["backward_s"], out["optimizer_s"]), strict=True))
    return {**times, "peak_memory": rank_memory(memory, model)}

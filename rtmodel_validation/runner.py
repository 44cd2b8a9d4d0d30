"""One rank of a validation job: train with PyTorch DDP, then with Decent-DP (then, when the job asks,
with local SGD), timing every iteration.

Both runs build the workload afresh (same seed: same initial weights, same per-step batches and jitter,
so both see identical compute) and train with the job's recipe (rtmodel_harness.recipe: precision and
optimizer, the profile's unless --precision / --optimizer replace them; every run the same optimizer).
fp16's GradScaler: DDP and local SGD scale the loss and step through it; Decent-DP is handed it
(DecentralizedDataParallel(scaler=...)) and steps each bucket's optimizer through it in its hooks.
What one iteration is:
- DDP:       forward + backward (bucketed all-reduce overlapped with it) + optimizer.step() + zero_grad
- Decent-DP: forward + backward; its hooks wait for the previous gossip, mix, step Adam per bucket and
             launch the next gossip, all inside backward.
Batches are made before the clock starts. On GPU the clock is torch.cuda.synchronize + perf_counter.
Warm-up iterations are not timed: Decent-DP builds its buckets in the forward of its 2nd iteration,
DDP rebuilds its buckets after the 1st, and NCCL sets up a group's communicator in its first collective
(plan.effective_warmup: one gossip period + 2). Rank 0 gathers every rank's times.
Local SGD (rtmodel_harness.local_sgd) times every inner step the same way, the step that launches or
waits for an outer all-reduce included; warm-up and timed steps are whole periods of H
(rtmodel_validation.local_sgd.local_sgd_counts), so the mean holds each outer sync as often as the model's.
With job.baseline "fsdp" a last training shards the model with FSDP2 (rtmodel_harness.fsdp: ZeRO-3) and
steps it as DDP's (train_step: the recipe, zero_grad(set_to_none=True)); one iteration is forward (each
block's all-gather) + backward (all-gathers again, reduce-scatters the gradients) + the optimizer on the
shards. Every training also records this rank's peak memory (rtmodel_harness.peak_memory: CUDA's allocator
peak over the timed iterations; on a CPU MemTracker, in iterations of its own after the timed ones).
"""

from __future__ import annotations

import itertools
import os
import socket

import torch
import torch.distributed as dist

from rtmodel_harness.peak_memory import PeakMemory
from rtmodel_util.decent_dp_logs import quiet_decent_dp_setup
from rtmodel_util.launch_env import NODE_NAME_ENV
from rtmodel_util.rank_exit import release_process_groups
from rtmodel_validation.errors import ValidationError
from rtmodel_validation.job import RankJob, RankReport


def init_distributed(timeout_s: float, backend: str = "auto") -> bool:
    """Join the torchrun job (rtmodel_util.backend_choice: nccl when each rank has a GPU of its own, else
    gloo); True when this call created the process group.

    rtmodel_harness.distributed.init_distributed: the GPU (RTMODEL_DEVICE_INDEX, else LOCAL_RANK) is made
    current before the group exists, and NCCL is bound to it so communicators are created eagerly."""
    from rtmodel_harness.distributed import init_distributed as init_bound

    if dist.is_initialized():
        return False
    init_bound(backend, timeout_s)
    return True


def run_device() -> torch.device:
    """The device init_distributed bound this rank to."""
    from rtmodel_harness.distributed import choose_backend

    return choose_backend("auto")[1]


def timed_loop(
    step_fn, workload, warmup: int, iterations: int, device: torch.device, memory: PeakMemory | None = None
) -> list[float]:
    """Per-iteration wall times (s) of `step_fn(batch)` after `warmup` untimed iterations; `memory` is told
    when the timed ones start and end (rtmodel_harness.peak_memory)."""
    from rtmodel_harness.distributed import barrier, clock

    times: list[float] = []
    for step in range(warmup + iterations):
        if step == warmup:
            barrier(device)  # all ranks start the timed part together
            if memory is not None:
                memory.timed_start()
        batch = workload.make_batch(step)
        t0 = clock(device)
        step_fn(batch)
        t1 = clock(device)
        if step >= warmup:
            times.append(t1 - t0)
        elif memory is not None:
            memory.between_iterations()
    if memory is not None:
        memory.timed_end()
    return times


def job_recipe(job: RankJob):
    """The job's Recipe; AccumAdam's compat shim (rtmodel_decentdp) imported first when it needs it."""
    from rtmodel_harness.recipe import Recipe

    recipe = Recipe(job.workload.precision, job.workload.optimizer)
    if recipe.needs_decent_dp:
        import rtmodel_decentdp  # noqa: F401
    return recipe


def _prepared(job: RankJob, device: torch.device):
    """(recipe, GradScaler or None, a fresh workload) for one training of the job on `device`: every run
    builds its workload afresh with the same seed (module doc)."""
    from rtmodel_harness.workloads import build_workload

    wl_job, recipe = job.workload, job_recipe(job)
    scaler = recipe.prepare(device)
    return recipe, scaler, build_workload(wl_job.model, wl_job.model_args, wl_job.batch_per_rank, device)


BARE_WARMUP, BARE_ITERATIONS = 2, 5  # the drift check's bare steps: a median of 5 is enough for a drift


def run_bare(job: RankJob, device: torch.device) -> list[float]:
    """The workload's bare step (forward, backward, optimizer; no DDP, nothing sent), as the profile timed
    its compute: measured again now, so validate tells the machine's drift from the model's error."""
    from rtmodel_harness.recipe import train_step

    recipe, scaler, wl = _prepared(job, device)
    optimizer = wl.make_optimizer(wl.model.parameters(), lr=1e-3, recipe=recipe)

    def step(batch):
        train_step(recipe, wl, wl.model, batch, optimizer, scaler)

    return timed_loop(step, wl, BARE_WARMUP, BARE_ITERATIONS, device)


def run_allreduce(job: RankJob, device: torch.device) -> tuple[list[float], PeakMemory]:
    """(times, this rank's peak memory), as every run_* below."""
    from torch.nn.parallel import DistributedDataParallel

    from rtmodel_harness.ddp_args import ddp_kwargs

    def wrap(model):
        return DistributedDataParallel(model, **ddp_kwargs(device, job.workload.bucket_cap_mb))

    return _run_wrapped(job, device, wrap)


def _run_wrapped(job: RankJob, device: torch.device, wrap) -> tuple[list[float], PeakMemory]:
    """Train the workload wrapped by `wrap` (DDP, FSDP2) with the recipe, timed, then its peak memory
    measured over extra iterations (PeakMemory.measure: never around the timed ones)."""
    from rtmodel_harness.recipe import train_step

    with PeakMemory(device) as memory:
        recipe, scaler, wl = _prepared(job, device)
        model = wrap(wl.model)
        optimizer = wl.make_optimizer(model.parameters(), lr=1e-3, recipe=recipe)

        def step(batch):
            train_step(recipe, wl, model, batch, optimizer, scaler)

        times = timed_loop(step, wl, job.warmup, job.iterations, device, memory)
        memory.measure(step, wl, job.warmup + job.iterations)
    return times, memory


def run_fsdp(job: RankJob, device: torch.device) -> tuple[list[float], PeakMemory]:
    """The sharded baseline: FSDP2 over every rank (rtmodel_harness.fsdp), stepped as DDP's."""
    from rtmodel_harness.fsdp import shard_model

    return _run_wrapped(job, device, lambda model: shard_model(model, device, job.world_size))


def run_decentdp(job: RankJob, device: torch.device) -> tuple[list[float], float, PeakMemory]:
    """(times, this rank's distance to consensus after the run, its peak memory)."""
    from decent_dp.ddp import DecentralizedDataParallel
    from decent_dp.topo import TopologyReg

    from rtmodel_harness.decent_dp_args import decent_dp_kwargs
    from rtmodel_harness.recipe import backward_only_step

    if job.registered_by_rtmodel:
        import rtmodel_decentdp  # noqa: F401  (registers rtmodel's schedules)
    name = job.decent_dp_topology
    if name not in TopologyReg.registry:
        raise ValidationError(f"Decent-DP has no topology {name!r} (known: {', '.join(TopologyReg.registry)})")
    with PeakMemory(device) as memory:
        recipe, scaler, wl = _prepared(job, device)
        wrap = decent_dp_kwargs(wl, recipe, scaler, name, job.workload.bucket_cap_mb, job.ranks_per_node)
        model = DecentralizedDataParallel(wl.model, **wrap)
        model.train()

        def step(batch):
            backward_only_step(recipe, wl, model, batch, scaler)

        times = timed_loop(step, wl, job.warmup, job.iterations, device, memory)
        d2c = model.global_avg(will_revert=False, return_d2c=True)  # after the timed iterations, as before
        memory.measure(step, wl, job.warmup + job.iterations)
    return times, float(d2c), memory


def run_local_sgd(
    job: RankJob, device: torch.device, warmup: int, iterations: int
) -> tuple[list[float], PeakMemory]:
    """Per-inner-step times of local SGD with job.local_sgd (module doc of rtmodel_harness.local_sgd), after
    `warmup` untimed inner steps (both whole periods: rtmodel_validation.local_sgd.local_sgd_counts), and the peak
    memory (on a CPU over one more whole period, so an outer sync is in it)."""
    from torch.nn.parallel import DistributedDataParallel

    from rtmodel_harness.ddp_args import ddp_kwargs
    from rtmodel_harness.local_sgd import OuterSync, node_group
    from rtmodel_harness.recipe import train_step

    opts = job.local_sgd
    with PeakMemory(device) as memory:
        recipe, scaler, wl = _prepared(job, device)
        model = wl.model
        if opts.replica == "node" and job.ranks_per_node > 1:  # DDP inside each node, every inner step
            group = node_group(job.ranks_per_node)
            wrap = ddp_kwargs(device, job.workload.bucket_cap_mb, process_group=group)
            model = DistributedDataParallel(wl.model, **wrap)
        optimizer = wl.make_optimizer(model.parameters(), lr=1e-3, recipe=recipe)
        params = wl.model.parameters()
        outer = OuterSync(params, opts.inner_steps, opts.overlap_steps, opts.fragments, opts.bits)
        steps = itertools.count()

        def step(batch):
            train_step(recipe, wl, model, batch, optimizer, scaler)
            outer.after_step(next(steps))

        times = timed_loop(step, wl, warmup, iterations, device, memory)
        memory.measure(step, wl, warmup + iterations, iterations=opts.inner_steps)
        outer.finish()
    return times, memory


def run_rank(job: RankJob, on_phase=None) -> list[RankReport] | None:
    """Run every training on this rank; rank 0 returns every rank's report, the others None.

    `on_phase(line)`, if given, is called as each phase starts (pass it on rank 0 only: progress)."""
    quiet_decent_dp_setup()  # before the preflight first imports decent_dp
    created = init_distributed(job.timeout_s, job.backend)
    note = on_phase or (lambda line: None)
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        if world != job.world_size:
            raise ValidationError(f"the job has {world} ranks but the plan was made for {job.world_size}")
        device = run_device()
        recipe_note = job_recipe(job).device_note(device.type)  # fp16 without CUDA: one line, before training
        if recipe_note:
            note(recipe_note)
        from rtmodel_validation.preflight import preflight_job

        preflight_job(job, device, job_recipe(job))  # before any training: Decent-DP and both optimizers step
        load_1m = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        note(f"bare step (the compute now, against the profile's): {BARE_ITERATIONS} timed iterations")
        bare_times = run_bare(job, device)
        counts = f"{job.warmup} warm-up + {job.iterations} timed iterations on {world} ranks ({device.type})"
        note(f"DDP run (All-Reduce): {counts}")
        ar_times, ar_memory = run_allreduce(job, device)
        note(f"Decent-DP run ({job.decent_dp_topology}): {counts}")
        dd_times, d2c, dd_memory = run_decentdp(job, device)
        peaks = {"allreduce": ar_memory.peak_bytes, "decentralized": dd_memory.peak_bytes}
        ls_times, fs_times = [], []
        if job.local_sgd is not None:
            from rtmodel_validation.local_sgd import local_sgd_counts

            warm, timed = local_sgd_counts(job.iterations, job.warmup, job.local_sgd.inner_steps)
            note(f"local-SGD run: {warm} warm-up + {timed} timed inner steps on {world} ranks ({device.type})")
            ls_times, ls_memory = run_local_sgd(job, device, warm, timed)
            peaks["local_sgd"] = ls_memory.peak_bytes
        if job.baseline == "fsdp":
            note(f"FSDP2 run (fully_shard per block, ZeRO-3): {counts}")
            fs_times, fs_memory = run_fsdp(job, device)
            peaks["fsdp"] = fs_memory.peak_bytes
        report = RankReport(
            rank=rank,
            local_rank=int(os.environ.get("LOCAL_RANK", rank)),
            host=os.environ.get(NODE_NAME_ENV) or socket.gethostname(),
            device=str(device),
            backend=dist.get_backend(),
            allreduce_s=tuple(ar_times),
            decentralized_s=tuple(dd_times),
            distance_to_consensus=float(d2c),
            local_sgd_s=tuple(ls_times),
            bare_compute_s=tuple(bare_times),
            load_avg_1m=load_1m,
            fsdp_s=tuple(fs_times),
            peak_memory_bytes=peaks,
            peak_memory_source=ar_memory.source,
        )
        gathered: list = [None] * world
        dist.all_gather_object(gathered, report)
        return gathered if rank == 0 else None
    finally:
        if created:
            release_process_groups()

"""Bytes on the wire, one rank's part: train DDP and each Decent-DP topology (gloo) for a whole number of
gossip periods while each node's first local rank reads its NIC's counters after every step.

Run by `benchmarks.wire_bytes` under torchrun on every emulated node. Each run builds the synthetic
workload afresh (rtmodel_harness.workloads: real fp32 parameters, compute emulated by short sleeps) and
steps it with the same helpers validate uses (rtmodel_harness.recipe), so the bytes are those a
validation run puts on the wire. Warm-up: one period + 2 (as validate: Decent-DP's set-up gossips and
DDP's bucket rebuild stay outside the window). Counted: `iterations` iterations, a multiple of the
schedule's period, so every round is counted equally often, as the model's per-round mean weighs them.
Rank 0 prints one line `RESULT {json}`. Imports torch only inside main(), so `import rtmodel_emulation` stays
torch-free.
"""

from __future__ import annotations

import argparse
import json
import math
import os

from rtmodel_util.launch_env import NODE_NAME_ENV

ALLREDUCE = "allreduce"


def workload_args(param_mb: float, layers: int) -> dict:
    """The synthetic workload every run trains: parameters that are real, compute that only sleeps."""
    return {
        "param_mb": param_mb,
        "layers": layers,
        "forward_ms": 2.0,
        "backward_ms": 4.0,
        "jitter": "none",
        "optimizer": "sleep",
        "optimizer_ms": 1.0,
    }


def period_of(run: str, world: int, local_world: int) -> int:
    """Rounds before a schedule repeats (1 for DDP's one all-reduce group)."""
    if run == ALLREDUCE:
        return 1
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.topology.registry import build_schedule

    return build_schedule(run, ClusterShape(world, local_world)).period


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.wire_bytes_rank")
    ap.add_argument("--runs", required=True, help=f"comma-separated: {ALLREDUCE} and/or Decent-DP topologies")
    ap.add_argument("--param-mb", type=float, default=4.0)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--min-iterations", type=int, default=48)
    ap.add_argument("--iface", default="tun0")
    ap.add_argument("--timeout-s", type=float, default=300.0)
    args = ap.parse_args(argv)

    import torch.distributed as dist

    from rtmodel_emulation.wire_counters import read_counters
    from rtmodel_harness.distributed import barrier, init_distributed
    from rtmodel_util.rank_exit import release_process_groups

    _, device = init_distributed("gloo", args.timeout_s)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    reads = local_rank == 0  # one reader per node: the counters are the node's, not the rank's
    results = []
    for run in (r for r in args.runs.split(",") if r):
        period = period_of(run, world, local_world)
        iterations = period * math.ceil(args.min_iterations / period)
        step, finish, message_bytes = _training(run, args, device, local_world)
        warmup = period + 2
        for i in range(warmup):
            if i == warmup - 1:
                barrier(device)  # every rank enters the last warm-up step together
            step(i)
        # read right after every step, the last warm-up one included: each reading finds one gossip just
        # launched and in flight, so the cumulative bytes grow by one iteration's traffic per step plus a
        # wobble of part of a gossip; the benchmark takes the least-squares slope, which that wobble
        # moves far less than a difference of two readings (a reading after a barrier would find the
        # first gossip done, and count one gossip short: -1/iterations)
        readings = [read_counters(args.iface)] if reads else None
        for i in range(warmup, warmup + iterations):
            step(i)
            if reads:
                readings.append(read_counters(args.iface))
        finish()  # waits for the last gossip, outside the window
        barrier(device)
        counted = _cumulative(readings) if reads else None
        gathered: list = [None] * world
        dist.all_gather_object(
            gathered, {"node": os.environ.get(NODE_NAME_ENV, str(rank)), "counted": counted}
        )
        results.append(
            {
                "run": run,
                "period": period,
                "iterations": iterations,
                "message_bytes": message_bytes(),
                "nodes": [g for g in gathered if g["counted"] is not None],
            }
        )
    if rank == 0:
        print(
            "RESULT " + json.dumps({"world_size": world, "gpus_per_node": local_world, "runs": results}),
            flush=True,
        )
    release_process_groups()
    return 0


def _cumulative(readings) -> dict:
    """Bytes and packets since the first reading, at every reading; retransmissions over the window."""
    first = readings[0]
    since = [r.since(first) for r in readings]
    return {
        "tx_bytes": [c.tx_bytes for c in since],
        "rx_bytes": [c.rx_bytes for c in since],
        "tx_packets": since[-1].tx_packets,
        "rx_packets": since[-1].rx_packets,
        "tcp_retransmitted_segments": since[-1].tcp_retransmitted_segments,
    }


def _training(run: str, args, device, local_world: int):
    """(step(i), finish(), message_bytes()) of one DDP or Decent-DP training: message_bytes() is what each
    rank exchanges per iteration, asked after the warm-up (Decent-DP builds its buffers in iteration 2)."""
    from rtmodel_harness.recipe import Recipe, backward_only_step, train_step
    from rtmodel_harness.workloads import build_workload

    recipe = Recipe()
    wl = build_workload("synthetic", workload_args(args.param_mb, args.layers), 1, device)
    if run == ALLREDUCE:
        from torch.nn.parallel import DistributedDataParallel

        from rtmodel_harness.ddp_args import ddp_kwargs

        model = DistributedDataParallel(wl.model, **ddp_kwargs(device, args.bucket_cap_mb))
        optimizer = wl.make_optimizer(model.parameters(), lr=1e-3, recipe=recipe)

        def ddp_step(i: int) -> None:
            train_step(recipe, wl, model, wl.make_batch(i), optimizer, None)

        return ddp_step, (lambda: None), (lambda: wl.param_bytes)

    from decent_dp.ddp import DecentralizedDataParallel

    import rtmodel_decentdp  # noqa: F401  (registers rtmodel's schedules, e.g. base-2)
    from rtmodel_harness.decent_dp_args import decent_dp_kwargs

    model = DecentralizedDataParallel(
        wl.model, **decent_dp_kwargs(wl, recipe, None, run, args.bucket_cap_mb, local_world)
    )
    model.train()

    def step(i: int) -> None:
        backward_only_step(recipe, wl, model, wl.make_batch(i), None)

    def finish() -> None:
        model.global_avg(will_revert=False)  # waits for the gossip still in flight

    return step, finish, (lambda: _gossip_message_bytes(model, wl.param_bytes))


def _gossip_message_bytes(model, param_bytes: int) -> int:
    """The bytes Decent-DP all-reduces per iteration: its communication buffers, each parameter padded to
    32 elements (decent_dp 0.2.3 ddp.py `_align`); the parameters' bytes where the buffers are not exposed."""
    blocks = getattr(model, "_comm_blocks", None)
    if not blocks:
        return param_bytes
    return int(sum(b.numel() * b.element_size() for b in blocks))


if __name__ == "__main__":
    from rtmodel_util.rank_exit import exit_without_finalisation

    exit_without_finalisation(main())

"""How fast gloo moves Decent-DP's buckets when Decent-DP drives it, against how the profile times them.

Why: on GPU hosts where ranks share one GPU (gloo through the host), the profile times the gossip's
buckets one at a time and all in flight on one group (profiler/comm.measure_in_flight), and the model
charges that; the real Decent-DP runs were 1.15-1.5x faster than both (benchmarks/results/gpu-accuracy).
Decent-DP (decent_dp/ddp.py, `_ddp_fn`) launches bucket k's all-reduce in its backward hook and waits
for it at bucket k's hook one iteration later, on the group of that iteration's round: consecutive
iterations of a schedule with several rounds use different process groups, each with its own gloo
connections and worker threads. This benchmark times, on the same buckets and the same pairs:

  serial      one at a time on round A's groups (the profile's first timing)
  inflight    all in flight on round A's groups (the profile's second timing)
  inflight2   in flight, alternate buckets on round A's and round B's groups
  pipeline    Decent-DP's loop without compute: wait bucket k's last exchange, launch it again; round A
  pipeline2   the same loop alternating rounds A and B per iteration (one-peer-exp at 4 ranks)
  pipeline-h  pipeline with `host_ms` of host time between buckets (compute the exchange hides behind)

Round A pairs rank i with i^1; round B with i^2 (4+ ranks) or, at 2 ranks, a second group of the same
two ranks. Seconds per iteration (pipeline: median over iterations after warm-up; else per repetition).

    python -m benchmarks.gloo_gossip_pipeline --ranks 2 4 --device cuda --out FILE.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time

# Decent-DP's gossip buckets of transformer-base (bucket_cap 25 MB; the GPU accuracy profiles' layout)
DEFAULT_BUCKETS = (26277888, 28375040, 26279936, 28375168, 26273792, 28370944, 88631296)


def pair_groups(world: int):
    """(round A's groups, round B's groups) as rank lists: every rank calls new_group for each in order."""
    a = [[i, i ^ 1] for i in range(0, world, 2)]
    if world >= 4:
        b = sorted({tuple(sorted((i, i ^ 2))) for i in range(world)})
        return a, [list(g) for g in b]
    return a, [list(g) for g in a]  # two ranks: a second group of the same pair


def _mine(groups, dist, rank):
    out = None
    for ranks in groups:
        g = dist.new_group(ranks)
        if rank in ranks:
            out = g
    return out


def _rank_main(rank: int, world: int, args: argparse.Namespace, port: int, queue) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    a_groups, b_groups = pair_groups(world)
    ga, gb = _mine(a_groups, dist, rank), _mine(b_groups, dist, rank)
    bufs = [torch.zeros(b // 4, dtype=torch.float32, device=device) for b in args.buckets]
    for g in (ga, gb):
        dist.all_reduce(torch.zeros(1, device=device), group=g)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def timed(body):
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        body()
        sync()
        return time.perf_counter() - t0

    def serial():
        for b in bufs:
            dist.all_reduce(b, group=ga)
            sync()

    def inflight(groups):
        def body():
            works = [
                dist.all_reduce(b, group=groups[i % len(groups)], async_op=True) for i, b in enumerate(bufs)
            ]
            for w in works:
                w.wait()

        return body

    def pipeline(groups, host_s):
        works = [None] * len(bufs)
        stamps = []
        for t in range(args.warmup + args.iterations):
            g = groups[t % len(groups)]
            for k, b in enumerate(bufs):
                if works[k] is not None:
                    works[k].wait()
                if host_s:
                    time.sleep(host_s / len(bufs))
                works[k] = dist.all_reduce(b, group=g, async_op=True)
            stamps.append(time.perf_counter())
        for w in works:
            w.wait()
        sync()
        return [b - a for a, b in itertools.pairwise(stamps[args.warmup :])]

    result = {}
    for name, body in (("serial", serial), ("inflight", inflight([ga])), ("inflight2", inflight([ga, gb]))):
        samples = [timed(body) for _ in range(args.reps + 1)][1:]
        result[name] = samples
    for name, groups, host_s in (
        ("pipeline", [ga], 0.0),
        ("pipeline2", [ga, gb], 0.0),
        ("pipeline-h", [ga], args.host_ms / 1e3),
        ("pipeline2-h", [ga, gb], args.host_ms / 1e3),
    ):
        dist.barrier()
        result[name] = pipeline(groups, host_s)
    queue.put((rank, result))
    dist.barrier()
    dist.destroy_process_group()


def run_world(world: int, args: argparse.Namespace, port: int) -> dict:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, args=(r, world, args, port, queue)) for r in range(world)]
    for p in procs:
        p.start()
    per_rank = dict(queue.get(timeout=args.timeout_s) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    names = per_rank[0].keys()
    out = {}
    for name in names:
        # per repetition / iteration, the slowest rank (the round is done when its slowest rank is)
        rows = [per_rank[r][name] for r in range(world)]
        samples = [max(v) for v in zip(*rows, strict=True)]
        out[name] = {"median_s": statistics.median(samples), "samples_s": samples}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gloo_gossip_pipeline", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--buckets", type=int, nargs="+", default=list(DEFAULT_BUCKETS), help="bytes each")
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--host-ms", type=float, default=60.0, help="host time per iteration in pipeline-h")
    parser.add_argument("--timeout-s", type=float, default=240.0)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    import platform

    import torch

    doc = {
        "schema": "rtmodel-gloo-gossip-pipeline/1",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor(),
        "buckets_bytes": args.buckets,
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "worlds": {},
    }
    total = sum(args.buckets)
    for i, world in enumerate(args.ranks):
        t0 = time.perf_counter()
        res = run_world(world, args, 29600 + i)
        doc["worlds"][str(world)] = res
        print(
            f"[{world} ranks, {args.device}, {total / 1e6:.0f} MB, {time.perf_counter() - t0:.0f} s]",
            flush=True,
        )
        for name, r in res.items():
            print(
                f"  {name:12s} {r['median_s'] * 1e3:8.1f} ms  {total / r['median_s'] / 1e9:6.2f} GB/s",
                flush=True,
            )
        if args.out:
            with open(args.out, "w") as f:
                json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

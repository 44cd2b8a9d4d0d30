"""gloo all_reduce timing worker, run on the emulated nodes (by torchrun, or by run_on_node with RANK etc.).

Imports torch only inside main(), so `import rtmodel_emulation` stays torch-free. Rank 0 prints one line
`RESULT {json}` with, per size, the median over repeats of the mean time of back-to-back all_reduces
(back-to-back, as nccl-tests do, so barrier skew does not leak into the timing), and whether the
reduced values were correct.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import timedelta

from rtmodel_util.launch_env import NODE_NAME_ENV


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rtmodel_emulation.allreduce_bench")
    ap.add_argument("--sizes", default="4096,1048576", help="comma-separated message sizes in bytes (float32)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per size (median reported)")
    ap.add_argument("--target-repeat-s", type=float, default=0.3,
                    help="back-to-back all_reduces per repeat: as many as fit in about this long (>= 1)")
    ap.add_argument("--max-iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-seconds-per-size", type=float, default=20.0,
                    help="fewer repeats when one size would take much longer than this")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    from rtmodel_util.rank_exit import release_process_groups

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = []
    for nbytes in (int(s) for s in args.sizes.split(",") if s):
        numel = max(1, nbytes // 4)
        buf = torch.empty(numel, dtype=torch.float32)
        buf.fill_(rank + 1)
        dist.all_reduce(buf)
        correct = bool(torch.all(buf == world * (world + 1) / 2))
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        one = (time.perf_counter() - t0) / max(1, args.warmup)
        iters = max(1, min(args.max_iters, int(args.target_repeat_s / max(one, 1e-9))))
        repeats = max(1, min(args.repeats, int(args.max_seconds_per_size / max(one * iters, 1e-9))))
        # every rank must agree on iters/repeats, or the loops deadlock: take rank 0's choice
        plan = torch.tensor([iters, repeats], dtype=torch.int64)
        dist.broadcast(plan, 0)
        iters, repeats = int(plan[0]), int(plan[1])
        means = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            means.append((time.perf_counter() - t0) / iters)
        results.append({"bytes": numel * 4, "median_s": statistics.median(means), "samples_s": means,
                        "iters": iters, "correct": correct})
    if rank == 0:
        print("RESULT " + json.dumps({"world_size": world, "node": os.environ.get(NODE_NAME_ENV),
                                      "results": results}), flush=True)
    release_process_groups()
    return 0


if __name__ == "__main__":
    from rtmodel_util.rank_exit import exit_without_finalisation

    exit_without_finalisation(main())  # gloo's threads can abort a finished rank's finalisation

"""Concurrent 2-rank (or larger) gloo process groups, all exchanging at once: Decent-DP's round shape.

Why: Decent-DP runs each rank's round on process groups of its own, concurrently, so several TCP
connections leave one NIC at once; what each gets (the NIC's share, or a per-flow cap) is what
MEASUREMENTS.md "Per-flow cap" checks. Run on the emulated nodes by torchrun (or with RANK etc.).

    --groups 0-2,1-3   two groups, {0, 2} and {1, 3}; a group may repeat (another connection, same pair)

Every rank creates every group in the same order (torch.distributed.new_group needs that), then per
iteration starts an async all_reduce of `--bytes` on each of its groups and waits for all. Each rank
writes one line `RESULT {json}` with the median over repeats of the mean iteration time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import timedelta


def parse_groups(text: str) -> list[list[int]]:
    """Parse "0-2,1-3" into [[0, 2], [1, 3]]."""
    return [[int(r) for r in g.split("-")] for g in text.split(",") if g]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rtmodel_emulation.groups_bench")
    ap.add_argument("--groups", required=True)
    ap.add_argument("--bytes", type=int, default=4 << 20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--timeout-s", type=float, default=120.0)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    from rtmodel_util.rank_exit import release_process_groups

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout_s))
    rank = dist.get_rank()
    groups = parse_groups(args.groups)
    handles = [dist.new_group(g) for g in groups]
    numel = max(1, args.bytes // 4)
    mine = [
        (h, torch.full((numel,), float(rank + 1))) for g, h in zip(groups, handles, strict=True) if rank in g
    ]

    def one_iteration() -> None:
        works = [dist.all_reduce(buf, group=h, async_op=True) for h, buf in mine]
        for w in works:
            w.wait()

    one_iteration()  # connections up, warm
    means = []
    for _ in range(args.repeats):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            one_iteration()
        means.append((time.perf_counter() - t0) / args.iters)
    doc = {
        "rank": rank,
        "groups": len(mine),
        "bytes": args.bytes,
        "local_rank": os.environ.get("LOCAL_RANK"),
        "median_s": statistics.median(means) if mine else None,
        "samples_s": means,
    }
    # one write of one line: a node's ranks share torchrun's stdout, and a line under PIPE_BUF is not torn
    os.write(1, ("RESULT " + json.dumps(doc) + "\n").encode())
    release_process_groups()
    return 0


if __name__ == "__main__":
    from rtmodel_util.rank_exit import exit_without_finalisation

    exit_without_finalisation(main())  # gloo's threads can abort a finished rank's finalisation

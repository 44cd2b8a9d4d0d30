"""Communication benchmark: all-reduce time per pattern and message size, all groups at once.

Protocol (every rank runs the same sequence, so collectives line up):
  for each pattern: every rank calls dist.new_group for every group, in order, then one small
      all-reduce on its own group (NCCL sets a communicator up in its first collective: never timed);
  for each size: barrier, one unrecorded warm-up all-reduce, then `reps` times:
      barrier; (sync GPU); t0; all_reduce on my group; (sync GPU); t1.
A rank outside every group of a pattern only joins the barriers. The buffer is zeros so repeated
sums never overflow. Rank 0 later turns per-rank times into samples: sample = max over the ranks of
all groups (the round is done when its slowest rank is), like nccl-tests' max over ranks; and per
group, the max over that group's ranks (`group_samples_s`): what one rank of the group waits for while
the other groups run, which is what a Decent-DP rank waits for (its own group, one iteration later).
The training's own buckets are then timed on two patterns, one after another and all in flight
(measure_in_flight): what a backend that works several collectives at once gains over the first timing;
Decent-DP's also alternately on two sets of groups of the same ranks (its rounds' groups are its own).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from rtmodel_documents.profile_document import InFlightResult, PatternResult, ProfilePattern
from rtmodel_documents.profile_patterns import Pattern, human_bytes
from rtmodel_harness.distributed import barrier, sync


def make_groups(pattern: Pattern, device: torch.device):
    """Create every group of the pattern and warm this rank's up; returns it (None: in no group).

    Every rank must call new_group for every group in the same order. The warm-up all-reduce makes
    the group's communicator exist before anything is timed, even where NCCL creates it lazily."""
    rank = dist.get_rank()
    mine = None
    for ranks in pattern.groups:
        group = dist.new_group(list(ranks))
        if rank in ranks:
            mine = group
    if mine is not None:
        dist.all_reduce(torch.zeros(1, dtype=torch.float32, device=device), group=mine)
        sync(device)
    return mine


def timed_all_reduce(buf: torch.Tensor, group, device: torch.device) -> float:
    """Seconds of one all-reduce; the GPU is synchronised before each clock read, so the time is the
    collective's, not just its launch's."""
    sync(device)
    t0 = time.perf_counter()
    dist.all_reduce(buf, group=group)
    sync(device)
    return time.perf_counter() - t0


def measure_pattern(
    pattern: Pattern,
    sizes: list[int],
    reps: int,
    device: torch.device,
    progress: Callable[[str], None] | None = None,
) -> list[list[float] | None]:
    """This rank's durations per size (None where the rank is in no group of the pattern)."""
    mine = make_groups(pattern, device)
    out: list[list[float] | None] = []
    for i, nbytes in enumerate(sizes):
        buf = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
        if progress:
            progress(f"communication {pattern.name}: {human_bytes(nbytes)} ({i + 1}/{len(sizes)})")
        times: list[float] = []
        for rep in range(reps + 1):
            barrier(device)
            if mine is None:
                continue
            seconds = timed_all_reduce(buf, mine, device)
            if rep:  # rep 0 is this size's warm-up
                times.append(seconds)
        out.append(times if mine is not None else None)
        del buf
    barrier(device)
    return out


def measure_in_flight(
    pattern: Pattern, buckets_bytes: list[int], reps: int, device: torch.device, two_groups: bool = False
) -> tuple[list[float], ...] | None:
    """This rank's (one at a time, in flight[, in flight over two groups]) seconds per repetition for the
    pattern's groups all-reducing `buckets_bytes` (InFlightResult), or None where the rank is in no
    group. `two_groups`: also alternate the buckets between the pattern's groups and a second set of
    groups of the same ranks, as Decent-DP's consecutive rounds use groups of their own. Rep 0 of each
    is a warm-up."""
    mine = make_groups(pattern, device)
    second = make_groups(pattern, device) if two_groups else None
    bufs = [torch.zeros(max(b // 4, 1), dtype=torch.float32, device=device) for b in buckets_bytes]
    ways: list[tuple[str, list]] = [("serial", [mine]), ("in flight", [mine])]
    ways += [("in flight", [mine, second])] if two_groups else []
    out: list[list[float]] = [[] for _ in ways]
    for rep in range(reps + 1):
        for times, (how, groups) in zip(out, ways, strict=True):
            barrier(device)
            if mine is None:
                continue
            sync(device)
            t0 = time.perf_counter()
            if how == "in flight":
                works = [
                    dist.all_reduce(b, group=groups[i % len(groups)], async_op=True)
                    for i, b in enumerate(bufs)
                ]
                for work in works:
                    work.wait()
            else:
                for b in bufs:
                    dist.all_reduce(b, group=mine)
                    sync(device)
            sync(device)
            seconds = time.perf_counter() - t0
            if rep:  # rep 0 of each is a warm-up
                times.append(seconds)
    del bufs
    barrier(device)
    return tuple(out) if mine is not None else None


def in_flight_entry(
    pattern: Pattern, buckets_bytes: list[int], per_rank: list[tuple[list[float], ...] | None]
) -> InFlightResult:
    """The profile's entry from every rank's measure_in_flight: per repetition the max over the ranks."""
    rows = [r for r in per_rank if r is not None]

    def slowest(i: int) -> tuple[float, ...]:
        return tuple(max(v) for v in zip(*(r[i] for r in rows), strict=True))

    return InFlightResult(
        pattern=pattern.name,
        buckets_bytes=tuple(buckets_bytes),
        one_at_a_time_s=slowest(0),
        in_flight_s=slowest(1),
        two_groups_s=slowest(2) if len(rows[0]) > 2 else None,
    )


def pattern_entry(
    pattern: Pattern, sizes: list[int], per_rank: list[list[list[float] | None]]
) -> ProfilePattern:
    """The profile's entry for one pattern from every rank's measure_pattern result."""
    p = pattern.group_size
    results = []
    for i, nbytes in enumerate(sizes):
        rows = [r[i] for r in per_rank if r[i] is not None]
        samples = tuple(max(vals) for vals in zip(*rows, strict=True))
        per_group = tuple(
            tuple(max(vals) for vals in zip(*(per_rank[r][i] for r in g), strict=True))
            for g in pattern.groups
        )
        med = statistics.median(samples)
        algbw = nbytes / med
        results.append(
            PatternResult(
                bytes=nbytes,
                samples_s=samples,
                group_samples_s=per_group,
                median_s=med,
                algbw_Bps=algbw,
                busbw_Bps=algbw * 2 * (p - 1) / p,
            )
        )
    return ProfilePattern(
        pattern=pattern.name,
        group_size=p,
        nodes_spanned=pattern.nodes_spanned,
        nic_sharing=pattern.nic_sharing,
        concurrent_groups=len(pattern.groups),
        groups=tuple(tuple(g) for g in pattern.groups),
        results=tuple(results),
    )

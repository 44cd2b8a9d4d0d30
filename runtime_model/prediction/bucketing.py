"""Gradient bucket layouts exactly as PyTorch DDP and Decent-DP form them (pure python, no torch).

Why both: the runtime model overlaps communication bucket by bucket, and the two libraries cut the
same gradients differently.
- DDP (from its second iteration on, after `Reducer.rebuild_buckets`) walks parameters in the order
  their gradients became ready in the first backward and closes a bucket as soon as its size
  reaches the cap: the first bucket's cap is `first_bucket_mb` (1 MiB when DDP's bucket_cap_mb is
  left at its default), later ones `cap_mb`. Sizes are numel * element_size, unpadded. For a model
  whose layers run in registration order this is the reverse registration order.
- Decent-DP (decent_dp/ddp.py `_initialize_params`) walks the traced backward order too, adds each
  parameter's numel rounded up to 32 elements times its element size, and closes a bucket when the
  size reaches `bucket_size_in_mb` MiB or at the last parameter. Its communication buffer is the
  aligned element count, bumped by 32 elements while it equals an earlier bucket's (it keeps sizes
  unique); those buffer sizes are what it all-reduces and what we report.
Parameter indices below index `[p for p in model.parameters() if p.requires_grad]`, the list both
libraries bucket. One dtype is assumed (DDP would bucket each dtype/device separately).

The profiler applies this to a model it traced; the presets apply it to a model's stored parameter
list (models.toml `backward_numels`), so a preset's buckets and a profiled model's are cut by the same
code.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

from runtime_model.core.defaults import MIB
from runtime_model.core.scenario import Bucket
from runtime_model.core.scenario import BucketLayout as ScenarioBuckets


class BucketLayout(NamedTuple):
    """Bucket sizes in backward (gradient-ready) order and which bucket each parameter lands in."""

    ddp_buckets_bytes: list[int]
    gossip_buckets_bytes: list[int]
    ddp_param_to_bucket: dict[int, int]  # parameter index -> DDP bucket index
    gossip_param_to_bucket: dict[int, int]  # parameter index -> Decent-DP bucket index
    backward_order: list[int]  # parameter indices in the order their gradients became ready

    def closers(self, which: str) -> list[int]:
        """For each bucket, the parameter whose gradient completes it (the last one in backward order)."""
        mapping = self.ddp_param_to_bucket if which == "ddp" else self.gossip_param_to_bucket
        n = len(self.ddp_buckets_bytes if which == "ddp" else self.gossip_buckets_bytes)
        last = [-1] * n
        for pid in self.backward_order:
            last[mapping[pid]] = pid
        return last


def _align32(numel: int) -> int:
    return math.ceil(numel / 32) * 32


def layout_from_order(
    sizes: list[tuple[int, int]], order: list[int], cap_mb: float, first_bucket_mb: float
) -> BucketLayout:
    """Bucket layouts from (numel, element_size) per parameter and the backward order (pure python)."""
    if not order:
        raise ValueError("no parameter received a gradient in the traced backward pass")
    # DDP: compute_bucket_assignment_by_size over the ready order, limits [first, cap, cap, ...]
    ddp_sizes: list[int] = []
    ddp_map: dict[int, int] = {}
    limit, acc = int(first_bucket_mb * MIB), 0
    for pid in order:
        numel, esize = sizes[pid]
        acc += numel * esize
        ddp_map[pid] = len(ddp_sizes)
        if acc >= limit:
            ddp_sizes.append(acc)
            acc, limit = 0, int(cap_mb * MIB)
    if acc:
        ddp_sizes.append(acc)
    # Decent-DP: 32-element aligned, close at >= cap or at the last parameter
    gossip_elems: list[int] = []
    gossip_esize: list[int] = []
    gossip_map: dict[int, int] = {}
    cap = cap_mb * MIB
    size, elems = 0, 0
    for i, pid in enumerate(order):
        numel, esize = sizes[pid]
        size += _align32(numel) * esize
        elems += _align32(numel)
        gossip_map[pid] = len(gossip_elems)
        if size >= cap or i == len(order) - 1:
            gossip_elems.append(elems)
            gossip_esize.append(esize)
            size, elems = 0, 0
    seen: set[int] = set()
    bumped: dict[int, int] = {}  # a size -> the last size it was bumped to: equal buckets stay O(n)
    gossip_sizes = []
    for elems, esize in zip(gossip_elems, gossip_esize, strict=True):
        start = elems
        elems = bumped.get(start, start)  # every size from start up to here is taken (seen only grows)
        while elems in seen:
            elems += 32
        seen.add(elems)
        bumped[start] = elems
        gossip_sizes.append(elems * esize)
    return BucketLayout(ddp_sizes, gossip_sizes, ddp_map, gossip_map, list(order))


def ready_fractions(numels: list[int], tail_params: int) -> list[float]:
    """When, as a fraction of backward, each parameter's gradient is ready (backward order).

    Backward work is taken as proportional to the parameters it has passed (matmul FLOPs are), except
    the `tail_params` whose gradients complete only at the very end (input embeddings, a tied output
    projection): they are ready at 1.0 and carry no share of the body's work.
    """
    body = max(1, sum(numels) - tail_params)
    done, out = 0, []
    for numel in numels:
        done += numel
        out.append(min(1.0, done / body))
    return out


def preset_bucket_layout(
    numels: list[int], element_bytes: int, cap_mb: float, ddp_first_bucket_mb: float, tail_params: int
) -> ScenarioBuckets:
    """DDP's and Decent-DP's buckets (scenario.BucketLayout) of a model given as its parameters' numels
    in backward order, cut by `layout_from_order` (the profiler's code) with ready fractions from
    `ready_fractions`. Cut once per model and cap (a sweep asks at every n; the layout is immutable)."""
    return _preset_bucket_layout(tuple(numels), element_bytes, cap_mb, ddp_first_bucket_mb, tail_params)


@lru_cache(maxsize=16)
def _preset_bucket_layout(
    numels: tuple[int, ...], element_bytes: int, cap_mb: float, ddp_first_bucket_mb: float, tail_params: int
) -> ScenarioBuckets:
    sizes = [(n, element_bytes) for n in numels]
    order = list(range(len(numels)))
    lay = layout_from_order(sizes, order, cap_mb, ddp_first_bucket_mb)
    ready = ready_fractions(numels, tail_params)

    def buckets(sizes_bytes: list[int], which: str) -> tuple[Bucket, ...]:
        closers = lay.closers(which)
        return tuple(Bucket(int(b), ready[c]) for b, c in zip(sizes_bytes, closers, strict=True))

    return ScenarioBuckets(
        ddp=buckets(lay.ddp_buckets_bytes, "ddp"),
        gossip=buckets(lay.gossip_buckets_bytes, "gossip"),
        element_bytes=element_bytes,
    )

"""Gradient bucket layouts of a real model: trace its backward order, then cut it as DDP and Decent-DP do.

The cutting rules (DDP's first-bucket cap and close-at-cap, Decent-DP's 32-element alignment and unique
buffer sizes) live in `runtime_model.prediction.bucketing`, shared with the presets, so a profiled model and a
preset are bucketed by the same code. Parameter indices index `[p for p in model.parameters() if
p.requires_grad]`, the list both libraries bucket.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from runtime_model.core.defaults import BUCKET_CAP_MIB, DDP_FIRST_BUCKET_MIB
from runtime_model.prediction.bucketing import BucketLayout, layout_from_order


def trainable_params(model) -> list:
    return [p for p in model.parameters() if p.requires_grad]


def trace_backward_order(model, run_backward: Callable[[], None]) -> list[int]:
    """Run one backward (`run_backward` does forward + backward) and record the order in which
    each trainable parameter's gradient is accumulated (post-accumulate-grad hooks, as Decent-DP)."""
    params = trainable_params(model)
    order: list[int] = []
    handles = [
        p.register_post_accumulate_grad_hook(lambda _p, i=i: order.append(i)) for i, p in enumerate(params)
    ]
    try:
        run_backward()
    finally:
        for h in handles:
            h.remove()
        for p in params:
            p.grad = None
    return order


def ddp_first_bucket_mb(bucket_cap_mb: float | None) -> float:
    """DDP's first-bucket cap for a given `bucket_cap_mb` argument of DistributedDataParallel.

    Torch of today (2.13, and 2.11 as DDP's own buckets on an H200 host showed:
    benchmarks/results/gpu-compute/h200-2026-11-27) uses the 1 MiB first bucket only when bucket_cap_mb
    is None; an explicit cap sizes the first bucket too. Older torch passed 1 MiB always. Checked against
    DDP's own buckets in tests."""
    if bucket_cap_mb is None or _first_bucket_always_default():
        return DDP_FIRST_BUCKET_MIB
    return float(bucket_cap_mb)


@functools.cache
def _first_bucket_always_default() -> bool:
    """Whether this torch's DDP hands its Reducer dist._DEFAULT_FIRST_BUCKET_BYTES whatever the cap (the
    old rule, recognised in DDP's source: no version number marks the change; anything else is read as
    today's rule)."""
    import inspect

    import torch.nn.parallel.distributed as ddp_mod

    if hasattr(ddp_mod, "_BucketCapacityConfig") or hasattr(ddp_mod, "BucketCapacityConfig"):
        return False
    try:
        source = inspect.getsource(ddp_mod.DistributedDataParallel)
    except (OSError, TypeError):  # no source shipped
        return False
    return reducer_gets_default_first_bucket(source)


def reducer_gets_default_first_bucket(ddp_source: str) -> bool:
    """Whether DDP's source passes dist._DEFAULT_FIRST_BUCKET_BYTES as the Reducer call's last argument
    with nothing conditional about it (the old rule)."""
    return re.search(r"_DEFAULT_FIRST_BUCKET_BYTES,?\s*\)", ddp_source) is not None


def bucket_layout(
    model,
    cap_mb: float = BUCKET_CAP_MIB,
    first_bucket_mb: float = DDP_FIRST_BUCKET_MIB,
    run_backward: Callable[[], None] | None = None,
) -> BucketLayout:
    """DDP and Decent-DP bucket layouts of `model`.

    `run_backward` (forward + backward on one batch) traces the real gradient-ready order; without
    it the reverse registration order is assumed (right for models used in definition order).
    `Workload.bucket_layout` passes its own batch.
    """
    if cap_mb <= 0 or first_bucket_mb <= 0:
        raise ValueError(f"bucket caps must be > 0 MB, got cap {cap_mb}, first {first_bucket_mb}")
    params = trainable_params(model)
    if not params:
        raise ValueError("the model has no trainable parameters")
    sizes = [(p.numel(), p.element_size()) for p in params]
    order = trace_backward_order(model, run_backward) if run_backward else list(reversed(range(len(params))))
    return layout_from_order(sizes, order, cap_mb, first_bucket_mb)

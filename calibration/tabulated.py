"""A measured all-reduce's own times, size by size, as the model's TabulatedCost for its group shape.

Why one builder: an nccl-tests run and a trace's buckets both measure one group's all-reduce at a few
sizes; both keep those times (the median where a size repeats) and price sizes beyond them by a line.
"""

from __future__ import annotations

import numpy as np

from runtime_model.core.scenario import TabulatedCost


def tabulated_cost(
    nbytes, times_s, fixed_s: float, per_byte_s: float, source: str, fixed_sd_s: float = 0.0,
    per_byte_rel_sd: float = 0.0,
) -> TabulatedCost:  # fmt: skip
    """The samples (nbytes[i], times_s[i]) size by size, medians where a size repeats; the latency part
    never above the smallest size's time (collectives.py splits a cost into it and the rest)."""
    by_size: dict[int, list[float]] = {}
    for b, t in zip(nbytes, times_s, strict=True):
        by_size.setdefault(int(b), []).append(float(t))
    sizes = tuple(sorted(by_size))
    times = tuple(float(np.median(by_size[s])) for s in sizes)
    return TabulatedCost(
        min(fixed_s, times[0]),
        per_byte_s,
        source,
        fixed_sd_s,
        per_byte_rel_sd,
        tuple(map(float, sizes)),
        times,
    )

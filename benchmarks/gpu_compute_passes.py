"""Repeated passes over the GPU compute benchmark's points, and how well the passes agree.

Why: on the lent H100 (a VM) one pass measured two host-bound points of one model 1.6x apart per op,
and TF32 Transformer-base slower bare than under DDP (results/gpu-compute/rescore.md). No per-op host
cost can meet both, and one pass cannot say whether the host or the point moved. A second pass runs the
points in reverse order, so a point measured early in one pass is measured late in the other: a host
drifting during the run shows as disagreement between passes, a point's own time as agreement. Every
measurement keeps its pass; the rescore scores the median over passes and shows their spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")
KEY_FIELDS = ("model", "units", "precision", "wrapper")


def passes(points: Sequence[T], repeats: int) -> list[tuple[int, T]]:
    """(pass, point) in measuring order: `repeats` passes over the points, every odd pass reversed."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    return [(r, p) for r in range(repeats) for p in (points if r % 2 == 0 else list(reversed(points)))]


def point_key(point: dict) -> tuple:
    return tuple(point[f] for f in KEY_FIELDS)


def by_point(points: Sequence[dict]) -> list[dict]:
    """One entry per distinct point, in first-measured order, over its passes that measured a wall time:
    {"point": the first such measurement, "walls_ms": per pass, "wall_ms": their median,
    "spread": (max - min) / median (0 for a single pass)}."""
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        if p.get("wall_ms"):
            groups.setdefault(point_key(p), []).append(p)
    out = []
    for measured in groups.values():
        walls = [p["wall_ms"] for p in measured]
        median = statistics.median(walls)
        out.append({
            "point": measured[0], "walls_ms": walls, "wall_ms": median,
            "spread": (max(walls) - min(walls)) / median,
        })  # fmt: skip
    return out

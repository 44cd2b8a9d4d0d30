"""Profiler errors, under rtmodel's one hierarchy (runtime_model.errors)."""

from __future__ import annotations

from runtime_model.errors import RankFailure, UserError

__all__ = ["ProfilingError", "RankFailure", "WorkloadError"]


class ProfilingError(UserError):
    """The profile cannot be taken as asked (bad option, impossible shape, unusable checkpoint)."""


class WorkloadError(ProfilingError):
    """The --model / --model-arg choice does not name a model we can build."""

"""Profiler errors, under rtmodel's one hierarchy (runtime_model.core.errors)."""

from __future__ import annotations

from rtmodel_harness.errors import WorkloadError
from runtime_model.core.errors import RankFailure, UserError

__all__ = ["ProfilingError", "RankFailure", "WorkloadError"]


class ProfilingError(UserError):
    """The profile cannot be taken as asked (bad option, impossible shape, unusable checkpoint)."""

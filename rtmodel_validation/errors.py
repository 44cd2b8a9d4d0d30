"""Validation errors, under rtmodel's one hierarchy (runtime_model.core.errors)."""

from __future__ import annotations

from runtime_model.core.errors import RankFailure, UserError

__all__ = ["RankFailure", "ShapeMismatch", "TopologyUnavailable", "ValidationError"]


class ValidationError(UserError):
    """The validation cannot run as asked (bad option, wrong profile)."""


class TopologyUnavailable(ValidationError):
    """The topology exists but cannot run here: not on this shape, or not on Decent-DP at all."""


class ShapeMismatch(ValidationError):
    """The profile was taken on a different cluster shape than the run has."""

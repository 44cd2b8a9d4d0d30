"""Errors of the torch harness, under rtmodel's one hierarchy (runtime_model.core.errors)."""

from __future__ import annotations

from runtime_model.core.errors import UserError


class WorkloadError(UserError):
    """The --model / --model-arg choice does not name a model we can build."""


class BackendError(UserError):
    """The requested backend cannot run here (NCCL without a CUDA GPU)."""

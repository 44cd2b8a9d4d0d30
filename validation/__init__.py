"""Validation: train the same model with PyTorch DDP and with Decent-DP, and set the measured
per-iteration times next to the runtime model's predictions for that exact shape.

Public API (re-exported lazily: `import validation` imports neither torch nor numpy):
    run_validation(profile_path, topology=None, recommended=False, ...) -> ValidationResult | None
    summarise_results(path) -> ResultsSummary
    read_parity_points(path) -> list[ParityPoint]     predicted vs measured mean (ms) per run, for plots
    ValidationResult, ValidationError
torch is imported only by the code that runs ranks (validation.runner, validation.worker,
rtmodel_decentdp, the Decent-DP registrations a training script imports too).
"""

from __future__ import annotations

from runtime_model.lazy_exports import lazy_getattr

_EXPORTS = {
    "run_validation": "validation.validate",
    "ValidationResult": "validation.results",
    "summarise_results": "validation.results",
    "ResultsSummary": "validation.results",
    "read_parity_points": "validation.results",
    "ParityPoint": "validation.results",
    "ValidationError": "validation.errors",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)

"""Validation: train the same model with PyTorch DDP and with Decent-DP, and set the measured
per-iteration times next to the runtime model's predictions for that exact shape.

Public API (re-exported lazily: `import rtmodel_validation` imports neither torch nor numpy):
    run_validation(profile_path, ValidateOptions(topology=..., ...)) -> ValidationResult | None
    summarise_results(path) -> ResultsSummary
    read_results(path) -> (list[ValidationResult], skipped lines)   every record of a results file, typed
    read_parity_points(path) -> list[ParityPoint]     predicted vs measured mean (ms) per run, for plots
    ValidateOptions, ValidationResult, ValidationError
torch is imported only by the code that runs ranks (rtmodel_validation.runner, rtmodel_validation.worker,
rtmodel_decentdp, the Decent-DP registrations a training script imports too).
"""

from __future__ import annotations

from runtime_model.core.lazy_exports import lazy_exports

_EXPORTS, __getattr__, __all__ = lazy_exports(
    __name__,
    {
        "validate": ("run_validation",),
        "options": ("ValidateOptions",),
        "results": (
            "ValidationResult", "read_results", "summarise_results", "ResultsSummary", "read_parity_points",
            "ParityPoint",
        ),
        "errors": ("ValidationError",),
    },
)

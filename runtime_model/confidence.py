"""How far to trust a prediction: the measured error of the source of its inputs.

Why measured, not chosen: "too close to call" must mean "inside the error we have seen when this kind
of input was checked against real runs". Presets were checked against the paper's published GPU
times (validation.paper.compare); a calibrated profile against real runs on the emulated cluster
(benchmarks/accuracy.py). The figures are kept as data (preset_data/accuracy.toml) and recomputed by
the tests, so they cannot drift from the model.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

PRESETS, PROFILE = "presets", "profile"


@dataclass(frozen=True)
class MeasuredError:
    """The mean and max |relative error| of predictions from one kind of input, and what was compared."""

    mean_abs_error: float
    max_abs_error: float
    predictions: int
    source: str

    def margin_reason(self, kind: str) -> str:
        what = "preset" if kind == PRESETS else "calibrated-profile"
        return (
            f"{self.mean_abs_error:.1%}, the mean error of {what} predictions over {self.predictions} "
            f"measured runs ({self.source})"
        )


@cache
def measured_errors() -> dict[str, MeasuredError]:
    text = resources.files("runtime_model.preset_data").joinpath("accuracy.toml").read_text()
    return {kind: MeasuredError(**entry) for kind, entry in tomllib.loads(text).items()}


def margin_for(kind: str) -> tuple[float, str]:
    """(margin, why) for predictions whose inputs come from `kind` (PRESETS or PROFILE)."""
    err = measured_errors()[kind]
    return err.mean_abs_error, err.margin_reason(kind)

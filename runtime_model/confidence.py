"""How far to trust a prediction: the measured error of the source of its inputs.

Why measured, not chosen: "too close to call" must mean "inside the error we have seen when this kind
of input was checked against real runs". Presets were checked against the paper's published GPU
times (validation.paper.compare); a calibrated profile against real runs on the emulated cluster
(benchmarks/accuracy.py). The figures are kept as data (preset_data/accuracy.toml) and recomputed by
the tests, so they cannot drift from the model.

Why on the speedup: the verdict is a ratio (topology vs All-Reduce), and a ratio's error is not the
error of either time (a compute error shared by both cancels; a link error in one does not). Each
source's error is measured on both: absolute times and predicted speedups; the margin is the latter.

Why composed: a profile measured at one shape and extrapolated, or one whose links were not measured
(a preset or a fitted line with a wide interval stands in), is less certain than the benchmark's
profiles, which were measured at the shape they predicted. `profile_margin` adds each such component's
own measured error, in quadrature, to the profile's.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache

from runtime_model import preset_data

PRESETS, PROFILE = "presets", "profile"


@dataclass(frozen=True)
class MeasuredError:
    """The mean and max |relative error| of predictions from one kind of input, and what was compared:
    on absolute iteration times and on predicted speedups over All-Reduce."""

    mean_abs_error: float
    max_abs_error: float
    predictions: int
    source: str
    speedup_mean_abs_error: float
    speedup_max_abs_error: float
    speedups: int

    def margin_reason(self, kind: str) -> str:
        what = "preset" if kind == PRESETS else "calibrated-profile"
        return (
            f"±{self.speedup_mean_abs_error:.1%} on the speedup, the mean error of {self.speedups} "
            f"{what} speedups over All-Reduce against measured runs ({self.source}; on iteration times "
            f"{self.mean_abs_error:.1%} over {self.predictions})"
        )


@cache
def measured_errors() -> dict[str, MeasuredError]:
    text = preset_data.read_text("accuracy.toml")
    return {kind: MeasuredError(**entry) for kind, entry in tomllib.loads(text).items()}


def margin_for(kind: str) -> tuple[float, str]:
    """(margin on the speedup, why) for predictions whose inputs come from `kind` (PRESETS or PROFILE)."""
    err = measured_errors()[kind]
    return err.speedup_mean_abs_error, err.margin_reason(kind)


@dataclass(frozen=True)
class MarginPart:
    """One component of a composed margin: what it covers and its relative error on the speedup."""

    what: str
    error: float


def combined(parts: list[MarginPart]) -> float:
    """Independent relative errors add in quadrature."""
    return sum(p.error**2 for p in parts) ** 0.5


def profile_margin(
    target_gpus: int,
    measured_gpus: int,
    links_used: dict[str, tuple[bool, float]],
) -> tuple[float, list[MarginPart]]:
    """The margin of profile-based advice at `target_gpus` and its parts.

    links_used: for each link class the target shape uses ("intra", "inter"), (measured?, the fit's
    relative 1-sigma on bandwidth). The parts:
    - the calibrated profiles' measured speedup error (at the shape they were measured at);
    - a link the profile did not measure: the presets' measured speedup error (a preset stands in);
    - a measured link whose fit is wider than that: the fit's own interval;
    - a target larger than the measured shape: the largest speedup error the profiles showed at their
      own shapes (the benchmark has no extrapolated runs, so the worst seen is the honest figure)."""
    prof, pre = measured_errors()[PROFILE], measured_errors()[PRESETS]
    parts = [MarginPart("calibrated profile at its measured shape", prof.speedup_mean_abs_error)]
    for cls, (measured, rel_sd) in sorted(links_used.items()):
        if not measured:
            parts.append(
                MarginPart(f"{cls}-node link from a preset, not measured", pre.speedup_mean_abs_error)
            )
        elif rel_sd > prof.speedup_mean_abs_error:
            parts.append(MarginPart(f"{cls}-node link measured, its fit's 1-sigma", rel_sd))
    if target_gpus > measured_gpus:
        parts.append(
            MarginPart(f"extrapolated from {measured_gpus} to {target_gpus} GPUs", prof.speedup_max_abs_error)
        )
    return combined(parts), parts


def describe_parts(parts: list[MarginPart]) -> str:
    return "; ".join(f"{p.what} ±{p.error:.1%}" for p in parts)

"""Validate's local-SGD run, decided before any rank starts: its options, its counts, its comparison.

Why here and torch-free: a bad --local-sgd-* value must be one line and exit 2 before N processes
import torch; the counts are shared by the plan (what the result says) and the ranks (what they run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rtmodel_validation.errors import ValidationError

if TYPE_CHECKING:
    from rtmodel_validation.analysis import Comparison, Measured
    from rtmodel_validation.record_parts import LocalSgdBreakdown
    from runtime_model.prediction.local_sgd import LocalSgd, LocalSgdPrediction

RUNNABLE_BITS = (None, 32, 16)  # what torch.distributed's all-reduce can carry (rtmodel_harness.local_sgd)


def local_sgd_options(
    inner_steps: int,
    overlap_steps: int | None = None,
    fragments: int | None = None,
    bits: int | None = None,
    replica: str | None = None,
) -> LocalSgd:
    """The local-SGD run's options, checked (LocalSgd's defaults for those not given) and runnable;
    ValidationError (one line, naming the flag) otherwise. Whether a run is asked at all, and H when it
    is not given, is the shell's one rule for every command (rtmodel_cli.local_sgd_options)."""
    from runtime_model.core.errors import InvalidCombination, InvalidValue
    from runtime_model.prediction.local_sgd import LocalSgd

    given = {"overlap_steps": overlap_steps, "fragments": fragments, "bits": bits, "replica": replica}
    try:
        opts = LocalSgd(inner_steps=inner_steps, **{k: v for k, v in given.items() if v is not None})
    except (InvalidValue, InvalidCombination) as exc:
        raise ValidationError(exc.message_for(_flag)) from None
    check_runnable(opts)
    return opts


def _flag(name: str) -> str:
    """validate's flag for an input LocalSgd names by its option (local_sgd_h -> --local-sgd-h)."""
    return "--" + name.replace("_", "-")


def check_runnable(opts: LocalSgd) -> None:
    """The model predicts 8- and 4-bit wires; a run cannot carry them (module doc of the harness)."""
    if opts.bits not in RUNNABLE_BITS:
        raise ValidationError(
            f"--local-sgd-bits {opts.bits} cannot be validated: torch.distributed has no quantizing "
            "all-reduce (INTELLECT-1 uses its own); validate runs 16 or 32 (rtmodel advise still predicts it)"
        )


def local_sgd_counts(iterations: int, warmup: int, inner_steps: int) -> tuple[int, int]:
    """(warm-up, timed) inner steps, both whole periods of H: the timed part holds every fragment's
    sync equally often, and the warm-up (at least one period) sets the outer group's communicator up."""
    periods = -(-iterations // inner_steps)
    warm_periods = -(-max(warmup, inner_steps) // inner_steps)
    return warm_periods * inner_steps, periods * inner_steps


def compare_local_sgd(predicted: LocalSgdPrediction, measured: Measured) -> Comparison:
    """The prediction (a mean per inner step; the model gives no percentiles for local SGD: NaN) next to
    the measurement, error on the mean as for the other runs."""
    from rtmodel_validation.analysis import Comparison, signed_error

    nan = float("nan")
    return Comparison(
        name=predicted.name,
        predicted_p50_s=nan,
        predicted_mean_s=float(predicted.mean_s),
        predicted_p99_s=nan,
        measured=measured,
        error=signed_error(float(predicted.mean_s), measured.mean_s),
    )


def prediction_breakdown(predicted: LocalSgdPrediction) -> LocalSgdBreakdown:
    """What goes into the prediction, per period (s): for reading an error off the record."""
    from rtmodel_validation.record_parts import LocalSgdBreakdown

    return LocalSgdBreakdown.of(predicted)

"""DDP's buckets' bytes where the trace does not record them, from the model the user names.

Why: PyTorch before 2.0 (or a trace without record_shapes) writes no `In msg nelems`/`Collective name`
on NCCL's or gloo's records, yet the all-reduce kernels' times are there. At the trace's own world size
those times are the prediction (its group's cost is tabulated size by size from them), so the bytes
only need to keep the buckets apart and total the gradients: --params/--param-mb/--model give the total,
split over the traced buckets in proportion to their measured times (each size then maps to its own
time, and other n see one effective rate). The provenance says the bytes are the user's, not measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.trace.trace_errors import TraceError
from runtime_model.core.errors import UserError


@dataclass(frozen=True)
class GradientBytes:
    """The gradients' bytes per iteration the user's options give, and how they said it."""

    total: float
    source: str  # e.g. "--params 25,557,032 x 4 bytes (fp32)"
    flag: str  # the option given, for a refusal ("--params")


def bucket_bytes(
    recorded: np.ndarray, times_s: np.ndarray, given: GradientBytes | None, path: str
) -> tuple[np.ndarray, str]:
    """(each bucket's bytes, where they came from): as recorded; else `given`'s total split in proportion
    to the buckets' measured times (equally where nothing was sent). TraceError where neither says them,
    UserError where both do (the option would not be used)."""
    if np.all(np.isfinite(recorded)):
        if given is not None:
            raise UserError(
                f"{given.flag} cannot be used with --trace {path}: its all-reduces record their sizes; drop it"
            )
        return recorded, "measured"
    if given is None:
        raise TraceError(
            f"--trace {path}: its all-reduces do not record their sizes (PyTorch before 2.0, or no "
            "record_shapes=True): give --params N, --param-mb MB or --model NAME for the gradients' bytes"
        )
    times = np.asarray(times_s, float)
    share = times / times.sum() if times.sum() > 0 else np.full(times.size, 1.0 / times.size)
    nbytes = np.maximum(1.0, np.round(given.total * share))
    how = "in proportion to their measured times" if times.sum() > 0 else "equally"
    return nbytes, (
        f"not recorded by the trace: {given.source} = {given.total / 1e6:,.1f} MB per iteration, split over "
        f"its {times.size} all-reduces {how} (at its own world size their measured times stand)"
    )

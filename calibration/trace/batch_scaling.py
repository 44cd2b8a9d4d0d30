"""A traced loop's compute at another per-GPU batch, from the trace's own kernels.

Why this way: the trace measured, inside forward's and backward's windows, how long the GPU's compute
kernels ran and how long it waited (for the host issuing them, for data). At a batch r times the traced
one the kernels' time scales by r (each kernel works over the batch) and the waits stay (the host issues
the same ops whatever the batch); the optimizer step and the buckets do not depend on the batch. Linear
in the batch: far below the traced batch the kernels stop shrinking (launch latency), which this does
not model, so the line says how far it scaled.
"""

from __future__ import annotations

from dataclasses import replace

from runtime_model.core.distributions import NormalCompute
from runtime_model.core.errors import UserError
from runtime_model.core.scenario import Compute, Scenario

MAX_RATIO = 16.0  # beyond this the trace says little about the kernels' behaviour (memory, launch floors)


def scaled_to_batch(
    scenario: Scenario, busy_s: tuple[float, float], traced: float, wanted: float
) -> tuple[Scenario, str]:
    """(scenario at `wanted` per GPU from one traced at `traced`, the line that says how)."""
    ratio = wanted / traced
    if not 1 / MAX_RATIO <= ratio <= MAX_RATIO:
        raise UserError(
            f"--batch-per-gpu {wanted:g} is {ratio:.3g}x the traced batch {traced:g}: the trace's kernels say "
            f"little beyond {MAX_RATIO:g}x either way; trace a batch nearer it"
        )
    c = scenario.compute
    fb, bb = busy_s
    forward = c.forward_s + fb * (ratio - 1.0)
    backward = c.backward_s + bb * (ratio - 1.0)
    factor = (forward + backward) / c.compute_s if c.compute_s > 0 else 1.0
    dist = c.distribution
    compute: Compute = replace(
        c,
        forward_s=forward,
        backward_s=backward,
        distribution=NormalCompute(dist.mean_s * factor, dist.sd_s * factor),
        source=c.source + f", scaled to {wanted:g} per GPU from the traced {traced:g}",
    )
    line = (
        f"compute scaled from the trace's own kernels to {wanted:g} per GPU (traced {traced:g}): their "
        f"{(fb + bb) * 1e3:,.1f} ms in forward and backward x {ratio:.3g}, the loop's {(c.compute_s - fb - bb) * 1e3:,.1f} ms "
        f"of gaps as traced: {c.compute_s * 1e3:,.1f} -> {compute.compute_s * 1e3:,.1f} ms; optimizer and buckets as traced"
    )
    return replace(scenario, compute=compute), line

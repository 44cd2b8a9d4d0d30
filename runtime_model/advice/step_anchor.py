"""Your measured DDP step as the anchor (issue 50): `advise --step-ms MS [--step-gpus N]`.

Why: a team that trains with DDP knows its iteration time at some n; the presets' compute estimate is a
guess the step can replace. The step at n is the model's All-Reduce prediction there, which grows with
the compute per iteration, so the compute is backed out as the one root of step(compute) = your step
(scipy.optimize.brentq), then predicts every other n and the gossip rows. The presets' own prediction
at that n is reported beside it: a residual beyond their measured margin says the presets do not
describe the cluster (its network most often: --nccl-tests or a profile measure it).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_model.core.constraints import COMPUTE_MS, STEP_MS
from runtime_model.core.errors import InvalidCombination, UserError


@dataclass(frozen=True)
class StepAnchor:
    """The step you measured, where, the compute backed out of it, and what the presets said there."""

    step_ms: float
    step_gpus: int
    compute_ms: float  # forward + backward per iteration that reproduces the step
    reproduced_ms: float
    presets_ms: float | None  # the presets' own step at step_gpus (None: your own model has no estimate)
    margin: float  # the presets' measured error on speedups, against which the residual is judged
    model_from: str = "the presets"  # whose prediction presets_ms is: the presets, or a profile or trace

    @property
    def residual(self) -> float | None:
        return None if self.presets_ms is None else self.presets_ms / self.step_ms - 1.0

    def line(self) -> str:
        head = (
            f"your DDP step {self.step_ms:,.4g} ms at {self.step_gpus} GPUs is reproduced with "
            f"{self.compute_ms:,.4g} ms of forward + backward per iteration"
        )
        if self.residual is None:
            return head
        verdict = (
            f"beyond their ±{self.margin:.1%} margin, so they do not describe this cluster; "
            + (
                "--nccl-tests or a profile measures its links"
                if self.model_from == "the presets"
                else "a compute or a link it measured differs from your training's"
            )
            if abs(self.residual) > self.margin
            else f"within their ±{self.margin:.1%} margin"
        )
        return f"{head}; {self.model_from} alone predicted {self.presets_ms:,.4g} ms there ({self.residual:+.0%}: {verdict})"

    def to_dict(self) -> dict:
        return {
            "step_ms": self.step_ms,
            "step_gpus": self.step_gpus,
            "compute_ms": self.compute_ms,
            "reproduced_ms": self.reproduced_ms,
            "presets_ms": self.presets_ms,
            "residual": self.residual,
        }


PRESET_LINKS = "the presets'"


def anchor_compute(
    step_ms_at,
    step_ms: float,
    step_gpus: int,
    presets_ms: float | None,
    margin: float,
    model_from: str = "the presets",
    links_from: str = PRESET_LINKS,
) -> StepAnchor:
    """`step_ms_at(compute_ms)`: the model's DDP step in ms at step_gpus with that compute. UserError when
    no compute in COMPUTE_MS reproduces the step (shorter than the exchange alone, or longer than a day);
    `links_from` says whose links priced the exchange (the refusal names what to check)."""
    from runtime_model.core.blas_threads import one_blas_thread

    with one_blas_thread():
        from scipy.optimize import brentq  # only here: the option is rare, the import half a second

    STEP_MS.check("step_ms", step_ms)
    lo, hi = COMPUTE_MS.low, COMPUTE_MS.high
    floor_ms = step_ms_at(lo)
    if floor_ms > step_ms:
        raise InvalidCombination(
            f"{{step_ms}} at {step_gpus} GPUs is shorter than the model's All-Reduce step with no compute at all "
            f"({floor_ms:,.4g} ms: the exchange and the optimizer): "
            + (
                "the presets' links are slower than yours; measure them (--nccl-tests FILE, or a profile)"
                if links_from == PRESET_LINKS
                else f"{links_from} links are slower than your step allows: check they were measured on "
                "this cluster's nodes, with the settings the step ran with"
            ),
            step_ms=step_ms,
        )
    if step_ms_at(hi) < step_ms:
        raise UserError(f"--step-ms {step_ms:g} needs more compute than {hi:g} ms per iteration")
    compute_ms = brentq(lambda c: step_ms_at(c) - step_ms, lo, hi, xtol=1e-9, rtol=1e-10, maxiter=200)
    return StepAnchor(step_ms, step_gpus, compute_ms, step_ms_at(compute_ms), presets_ms, margin, model_from)

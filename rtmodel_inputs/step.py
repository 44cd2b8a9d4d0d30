"""Your measured DDP step (`--step-ms MS [--step-gpus N]`) as one correction of the model's compute.

Why a factor, not a replacement: the model's compute is more than one number (DDP's bucket copies on the
host, Decent-DP's mixing, a host-bound forward); replacing it by a flat forward + backward dropped that
structure, so a step equal to the model's own prediction changed the verdict. Scaling forward + backward
by the one factor that reproduces the step keeps it: a step equal to the model's own is a factor of 1,
and changes nothing. The factor is found at the step's n, on the same measured network the answer uses,
and applied at every n the answer predicts.
"""

from __future__ import annotations

from rtmodel_inputs.compute_scaling import scaled_compute


def check_step(request: dict) -> None:
    """Before any work: a step count needs its step, and a step and --compute-ms are two answers to one
    question (each names both inputs)."""
    from runtime_model.core.errors import InvalidCombination

    step_ms, step_gpus = request.get("step_ms"), request.get("step_gpus")
    if step_ms is None and step_gpus is not None:
        raise InvalidCombination(
            "{step_gpus} says where your --step-ms was measured: give the step too", step_gpus=step_gpus
        )
    if step_ms is not None and request.get("compute_ms") is not None:
        raise InvalidCombination(
            "{step_ms} backs the compute out of your DDP step and {compute_ms} gives it: give one",
            step_ms=step_ms,
            compute_ms=request["compute_ms"],
        )


def anchor_step(
    at_step_n,
    request: dict,
    step_ms: float | None,
    step_gpus: int | None,
    presets_known: bool,
    margin=None,
    model_from: str = "the presets",
):
    """(step_anchor.StepAnchor, the factor on forward + backward) for your step. `at_step_n(n)`: the
    scenario the answer uses, at n GPUs (checked here with the names the user typed, --step-gpus for n);
    `presets_known`: the model has a compute estimate of its own to compare the step with; `margin`
    (confidence.Margin): the source's own, against which the residual is judged (default: the preset
    class's); `model_from`: whose prediction the step is compared with."""
    from runtime_model.advice.confidence import class_margin, source_class
    from runtime_model.advice.step_anchor import PRESET_LINKS, anchor_compute
    from runtime_model.core.constraints import AT_LEAST_ONE
    from runtime_model.core.errors import InvalidCombination, InvalidValue, UserError
    from runtime_model.prediction.iteration import allreduce_prediction

    n = request["gpus"] if step_gpus is None else step_gpus
    AT_LEAST_ONE.check("step_gpus", n)
    try:  # the shape at the step's n, checked once with the names the user typed
        at_step = at_step_n(n)
    except (InvalidValue, InvalidCombination) as exc:
        from rtmodel_inputs.request import flag_of

        raise UserError(
            exc.message_for(lambda name: "--step-gpus" if name == "gpus" else flag_of(name))
        ) from exc
    base_ms = at_step.compute.compute_s * 1e3

    def step_ms_at(compute_ms: float) -> float:
        scaled = scaled_compute(at_step, compute_ms / base_ms, at_step.compute.source)
        return allreduce_prediction(scaled).mean_s * 1e3

    equivalence = (margin or class_margin(source_class(at_step))).equivalence
    presets_ms = allreduce_prediction(at_step).mean_s * 1e3 if presets_known else None
    source = at_step.network.inter.source
    links = "your nccl-tests run's" if source.startswith("nccl-tests") else (
        "the profile's measured" if source.startswith("measured") else PRESET_LINKS
    )
    anchor = anchor_compute(step_ms_at, step_ms, n, presets_ms, equivalence, model_from, links)
    return anchor, anchor.compute_ms / base_ms


def scaled_to_step(scenario, factor: float):
    """`scenario` with forward + backward scaled by your step's factor, its compute source saying so."""
    why = f"{scenario.compute.source}; x {factor:.4g} to reproduce your DDP step (--step-ms)"
    return scaled_compute(scenario, factor, why)


def with_step(inputs, at_step_n, request: dict, model_from: str):
    """`inputs` (AdviceInputs of a profile, calibration or trace) with forward + backward scaled to your
    DDP step, found at the step's n on `at_step_n(n)` (the same source rebuilt there)."""
    from dataclasses import replace

    from rtmodel_inputs.inputs import STEP

    anchor, factor = anchor_step(
        at_step_n, request, request["step_ms"], request.get("step_gpus"), True, inputs.margin, model_from
    )
    sc = scaled_to_step(inputs.scenario, factor)
    provenance = {**inputs.provenance, "compute": sc.compute.source, "step anchor": anchor.line()}
    document = {**inputs.document, "step_anchor": anchor.to_dict()}
    return replace(
        inputs, scenario=sc, provenance=provenance, document=document, sources=(*inputs.sources, STEP)
    )

"""The whole answer from one set of inputs: the advice, DDP's own tuning beside it, and the crossovers.

Why here and not in the command: `rtmodel advise`, the plots that state a verdict, validate's prediction
and a notebook all want the same answer to the same inputs; the command only parses and renders.

    >>> from rtmodel_inputs import advise
    >>> advise(gpus=64).recommendation.topology  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rtmodel_inputs.inputs import AdviceInputs


@dataclass(frozen=True)
class Question:
    """What is asked of the inputs: which topologies, ranked by what, with which local SGD rows."""

    topologies: tuple[str, ...] | None = None
    objective: str | None = None  # iteration (default) | accuracy
    local_sgd: tuple = ()  # local_sgd.LocalSgd configurations to show beside the pick


def advise_from(inputs: AdviceInputs, question: Question = Question()):
    """advisor.Advice for `inputs`: the rows on inputs.scenario; where DDP's bucket view would change the
    verdict, the whole answer against the tuned DDP (the same measured network and compute); then the
    crossovers, which every view reads."""
    from runtime_model.advice.advisor import ITERATION, check_objective
    from runtime_model.advice.advisor import advise as run_advice
    from runtime_model.advice.crossover import with_crossovers

    objective = ITERATION if question.objective is None else check_objective(question.objective)
    asked = dict(
        margin=inputs.margin,
        topologies=list(question.topologies) if question.topologies else None,
        provenance=dict(inputs.provenance),
        objective=objective,
        local_sgd=list(question.local_sgd),
        memory=inputs.memory,
    )
    adv = run_advice(inputs.scenario, **asked)
    adv.notes.extend(inputs.notes)
    if inputs.tuned_ddp_scenario is not None and adv.baseline == "ddp":  # DDP fits: its own tuning
        adv = _with_tuned_ddp(adv, inputs.tuned_ddp_scenario, _bucket_view_asked(asked))
    return with_crossovers(adv)


def _bucket_view_asked(asked: dict) -> dict:
    """The tuned DDP's question: its memory without DDP's bucket copy (gradient_as_bucket_view)."""
    memory = asked.get("memory")
    if memory is None:
        return asked
    recipe = replace(memory.recipe, ddp_bucket_view=True)
    return {**asked, "memory": replace(memory, recipe=recipe)}


def _with_tuned_ddp(adv, tuned_sc, asked: dict):
    """DDP's bucket view beside the answer; where it changes the verdict, the whole answer against the
    tuned DDP (tuned_ddp.led_by_tuning), asked as the first one was (`asked`: advisor.advise's keywords)."""
    from runtime_model.advice.advisor import advise as run_advice
    from runtime_model.advice.tuned_ddp import led_by_tuning, tuned_ddp

    tuned = tuned_ddp(adv, tuned_sc)
    if tuned is None:
        return adv
    if not tuned.changes_verdict:
        return replace(adv, tuned_ddp=tuned)
    return led_by_tuning(replace(run_advice(tuned_sc, **asked), notes=adv.notes), tuned)


def advise(**options):
    """The Python entry point: `rtmodel advise`'s answer for these options (its flags' names with
    underscores, as a scenario file spells them: gpus=64, nccl_tests="run.txt", step_ms=72.0); what is not
    given takes the command's default. Local SGD's row is shown as the command shows it (H=30) unless
    local_sgd_h=0."""
    from rtmodel_inputs.fields import OPTION_NAMES
    from rtmodel_inputs.local_sgd import local_sgd_configs
    from rtmodel_inputs.sources import resolve_inputs
    from runtime_model.core.errors import UserError

    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise UserError(f"unknown input(s) {', '.join(unknown)}: expected some of {', '.join(OPTION_NAMES)}")
    inputs = resolve_inputs(options)
    question = Question(
        topologies=tuple(options.get("topologies") or ()) or None,
        objective=options.get("objective"),
        local_sgd=tuple(local_sgd_configs(options, by_default=True)),
    )
    return advise_from(inputs, question)

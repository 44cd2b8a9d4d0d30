"""`rtmodel advise`: predict All-Reduce and every gossip topology for one cluster, and recommend one.

Never imports torch: it answers offline from presets, or from a profile calibrated on the fly.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from rtmodel_cli.local_sgd_options import LocalSgdFlags, local_sgd_configs, takes_local_sgd
from rtmodel_cli.model_options import ModelInputs, takes_model_inputs
from rtmodel_cli.options import MarginOpt, PerGpuOpt, TopologiesOpt
from rtmodel_cli.output_format import Format, FormatOpt
from rtmodel_inputs.sources import (
    DEFAULT_GPUS,
    TUNED_DDP_SCENARIO,
    assumed_of,
    margin_of,
    scenario_for,
    scenario_request,
)

# The question advise answers, its own options (scenario-file keys too; the model's inputs are ModelInputs).
GpusOpt = Annotated[int | None, typer.Option(help=f"Number of GPUs (workers) n (default {DEFAULT_GPUS}).")]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(
        help="What to rank: 'iteration' (time per iteration; ties inside the margin go to the better "
        "consensus) or 'accuracy' (time to the same loss: options known to keep All-Reduce's "
        "iterations first, hopeless consensus never). Default: iteration."
    ),
]
StepMsOpt = Annotated[
    float | None,
    typer.Option(
        help="Your measured DDP iteration time in ms (from your training logs): the compute is backed out "
        "of it and the presets' own prediction there is shown beside it. At --step-gpus, else at --gpus."
    ),
]
StepGpusOpt = Annotated[int | None, typer.Option(help="The GPU count your --step-ms was measured at.")]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", help="Print every note on the inputs under the verdict.")
]
BriefOpt = Annotated[
    bool,
    typer.Option("--brief", help="Only the verdict, the fastest rows and the lines to run (15 lines at most)."),
]


def register(app: typer.Typer) -> None:
    app.command("advise")(advise)


@takes_model_inputs()
@takes_local_sgd
def advise(
    gpus: GpusOpt = None,
    *,
    inputs: ModelInputs,
    margin: MarginOpt = None,
    topology: TopologiesOpt = None,
    objective: ObjectiveOpt = None,
    step_ms: StepMsOpt = None,
    step_gpus: StepGpusOpt = None,
    batch_per_gpu: PerGpuOpt = None,
    verbose: VerboseOpt = False,
    brief: BriefOpt = False,
    format: FormatOpt = Format.table,
    local_sgd_flags: LocalSgdFlags,
):
    """Predict per-iteration time of All-Reduce, each gossip topology and local SGD; recommend one."""
    from rtmodel_cli import scenario_file

    given = {**inputs.as_dict(), "gpus": gpus, "margin": margin, "topology": topology, "objective": objective}
    given.update(step_ms=step_ms, step_gpus=step_gpus, batch_per_gpu=batch_per_gpu)
    given.update(local_sgd_flags.as_dict())
    if brief:
        from rtmodel_cli.brief import refuse_beside

        refuse_beside(verbose, None if format == Format.table else format.value)
    path = inputs.scenario
    opts, taken = scenario_file.merge(given, scenario_file.read(path) if path else {})
    with scenario_file.blamed(path, taken):
        _advise(opts, format, "brief" if brief else "verbose" if verbose else "")


def _advise(opts: dict, format: Format, view: str = "") -> None:
    """`advise` once the scenario file (if any) is merged under the command line's options."""
    from runtime_model.advice import report
    from runtime_model.advice.advisor import advise as run_advice
    from runtime_model.advice.crossover import with_crossovers
    from runtime_model.core.constraints import Interval

    objective = _objective(opts["objective"])
    local_sgd = local_sgd_configs(opts, by_default=True)  # advise shows H=30 unless told
    if opts["trace"]:  # your training's traces in place of presets and profiles (trace_inputs)
        from rtmodel_inputs.traces import traced_scenario

        sc, prov, notes, inputs = traced_scenario(opts, scenario_request(opts))
    else:
        sc, prov, notes, inputs = scenario_for(
            scenario_request(opts), opts["profile"], opts["presets"], opts["nccl_tests"], opts["calibration"]
        )
    if opts["margin"] is not None:
        Interval(0.0, 1.0, closed="left").check("margin", opts["margin"])
    margin = margin_of(sc, inputs, prov, opts["margin"])
    prov["margin"] = margin.why
    asked = dict(
        margin=margin, topologies=opts["topology"] or None, provenance=prov, objective=objective, local_sgd=local_sgd
    )
    adv = run_advice(sc, **asked)
    adv.notes.extend(notes)
    tuned_sc = inputs.pop(TUNED_DDP_SCENARIO, None)
    if tuned_sc is not None:
        adv = _with_tuned_ddp(adv, tuned_sc, asked)
    adv = with_crossovers(adv)
    if format == Format.json:
        sys.stdout.write(report.to_json(adv, inputs) + "\n")
    elif format == Format.csv:
        sys.stdout.write(report.to_csv(adv, inputs))
    elif view == "brief":
        from rtmodel_cli.brief import render_brief
        from rtmodel_cli.tables import terminal_console

        render_brief(adv, terminal_console(), assumed_of(inputs))
    else:
        from rtmodel_cli.tables import render_advice, terminal_console

        render_advice(adv, terminal_console(), verbose=view == "verbose", assumed=assumed_of(inputs))


def _with_tuned_ddp(adv, tuned_sc, asked: dict):
    """DDP's bucket view beside the answer; where it changes the verdict, the whole answer against the
    tuned DDP (tuned_ddp.led_by_tuning), asked as the first one was (`asked`: advisor.advise's keywords)."""
    from dataclasses import replace

    from runtime_model.advice.advisor import advise as run_advice
    from runtime_model.advice.tuned_ddp import led_by_tuning, tuned_ddp

    tuned = tuned_ddp(adv, tuned_sc)
    if tuned is None:
        return adv
    if not tuned.changes_verdict:
        return replace(adv, tuned_ddp=tuned)
    return led_by_tuning(replace(run_advice(tuned_sc, **asked), notes=adv.notes), tuned)


def _objective(given: str | None) -> str:
    """--objective, checked: one line naming the choices for anything else."""
    from runtime_model.advice.advisor import ITERATION, check_objective

    return ITERATION if given is None else check_objective(given)

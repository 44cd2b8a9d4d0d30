"""`rtmodel advise`: predict All-Reduce and every gossip topology for one cluster, and recommend one.

Never imports torch: it answers offline from presets, or from a profile calibrated on the fly.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from rtmodel_cli.gpu_counts import GpusOpt
from rtmodel_cli.local_sgd_options import LocalSgdFlags, takes_local_sgd
from rtmodel_cli.model_options import ModelInputs, takes_model_inputs
from rtmodel_cli.options import MarginOpt, PerGpuOpt, TopologiesOpt, split_names
from rtmodel_cli.output_format import Format, FormatOpt
from rtmodel_inputs.local_sgd import local_sgd_configs

# The question advise answers, its own options (scenario-file keys too; the model's inputs are ModelInputs).
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
    typer.Option(
        "--brief", help="Only the verdict, the fastest rows and the lines to run (15 lines at most)."
    ),
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
    topologies: TopologiesOpt = None,
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

    given = {**inputs.as_dict(), "gpus": gpus, "margin": margin, "objective": objective}
    given["topologies"] = split_names(topologies)  # the scenario file's key of the same name
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
    """`advise` once the scenario file (if any) is merged under the command line's options: the inputs
    resolved once (rtmodel_inputs), the answer drawn from them, then one view of it."""
    from rtmodel_inputs.answer import Question, advise_from
    from rtmodel_inputs.sources import resolve_inputs
    from runtime_model.advice import report

    local_sgd = local_sgd_configs(opts, by_default=True)  # advise shows H=30 unless told
    inputs = resolve_inputs(opts)
    question = Question(tuple(opts["topologies"] or ()) or None, opts["objective"], tuple(local_sgd))
    adv = advise_from(inputs, question)
    if format == Format.json:
        sys.stdout.write(report.to_json(adv, inputs.document) + "\n")
    elif format == Format.csv:
        sys.stdout.write(report.to_csv(adv, inputs.document))
    elif view == "brief":
        from rtmodel_cli.brief import render_brief
        from rtmodel_cli.shown_console import terminal_console

        render_brief(adv, terminal_console(), inputs.assumptions)
    else:
        from rtmodel_cli.shown_console import terminal_console
        from rtmodel_cli.tables import render_advice

        render_advice(adv, terminal_console(), verbose=view == "verbose", assumed=inputs.assumptions)

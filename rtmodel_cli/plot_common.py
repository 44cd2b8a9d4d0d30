"""What every `rtmodel plot` command shares: its --out, --data and --batch-per-gpu, writing the figure and
its numbers, and its model inputs merged with its --scenario file and turned into the presets' keywords.

Why a module of its own: plot.py (the preset sweeps) and plot_variance.py both use these, and neither
imports the other's names. matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli import scenario_file
from rtmodel_cli.command_files import command_input_files
from rtmodel_cli.model_options import ModelInputs
from rtmodel_inputs import your_model
from rtmodel_inputs.request import check_batch_per_gpu, network_kw, own_numbers, variation_kw
from rtmodel_util.files import check_output_path, output_lock, same_file, write_atomic
from runtime_model.core.errors import UserError

OutOpt = Annotated[Path, typer.Option("--out", help="Output file; .png or .svg.")]
OWN_OUTPUTS = ("out", "data")  # what a plot writes: never counted among the files it reads


def data_opt(columns: str):
    """The --data option of one plot command: its help names the columns that command's CSV holds."""
    return Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Also write the numbers drawn as CSV (.csv, long form; not --out nor an input file), "
            f"columns: {columns}. Empty cells: nothing drawn there.",
        ),
    ]


def check_out(out: Path) -> None:
    """Fail before any work if the output cannot be written as PNG or SVG (rtmodel_util.files:
    check_output_path), or would replace one of the files the command reads, however it was named (a
    flag, its --scenario file, a link: rtmodel_cli.command_files)."""
    if out.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--out must end in .png or .svg, got '{out}'")
    check_output_path(out, "--out", inputs=command_input_files(OWN_OUTPUTS))


def check_outputs(out: Path, data: Path | None) -> None:
    """Fail before any work if --out (check_out) or --data cannot be written: --data must end in .csv,
    and be neither the figure nor a file the command reads (a CSV written over either destroys it)."""
    check_out(out)
    if data is None:
        return
    if data.suffix.lower() != ".csv":
        raise UserError(f"--data must end in .csv, got '{data}'")
    if same_file(data, out):
        raise UserError(f"--data {data} is the figure's --out file; give another file for the numbers")
    check_output_path(data, "--data", inputs=command_input_files(OWN_OUTPUTS))


@contextlib.contextmanager
def writing(out: Path, data: Path | None = None) -> Iterator[None]:
    """Check --out and --data (check_outputs) and hold their locks (rtmodel_util.files.output_lock) for the
    block: a plot command wraps its work in it, so a second command writing the same file is refused
    before the work, not silently lost after it."""
    check_outputs(out, data)
    with contextlib.ExitStack() as stack:
        for path, flag in ((out, "--out"), (data, "--data")):
            if path is not None:
                stack.enter_context(output_lock(path, flag))
        yield


def render(make, out: Path, data: Path | None = None) -> None:
    """Check and lock `out` and `data` (writing), then draw and save the figure (save_drawn)."""
    with writing(out, data):
        save_drawn(make, out, data)


def save_drawn(make, out: Path, data: Path | None = None) -> None:
    """Inside a `writing` block of `out` and `data`: build the figure with `make()` and save it
    (rtmodel_plots.save: whole or not at all); with --data, write the numbers the figure carries
    (rtmodel_plots.plotted) as CSV, whole or not at all, after the figure."""
    import rtmodel_plots as plots

    fig = make()
    try:
        plots.save(fig, out)
    except OSError as exc:
        raise UserError(f"cannot write '{out}': {exc.strerror or exc}") from exc
    typer.echo(f"wrote {out}")
    if data is not None:
        table = plots.plotted(fig)
        try:
            write_atomic(data, table.csv_text())
        except OSError as exc:
            raise UserError(f"cannot write '{data}': {exc.strerror or exc}") from exc
        typer.echo(f"wrote {data} ({len(table.rows)} rows)")


def check_topology(topology: str | None) -> None:
    if topology is not None:
        from runtime_model.topology.registry import topology_info

        topology_info(topology)  # one line naming the choices when unknown


def merged(inputs: ModelInputs) -> tuple[ModelInputs, frozenset[str]]:
    """A plot's model inputs with its --scenario file's values under them (scenario_file.PLOT_KEYS:
    the keys a plot ignores are dropped, `profile` and `calibration` refused); and the names whose value came from the file."""
    path = inputs.scenario
    from_file = scenario_file.read(path) if path is not None else {}
    for key in scenario_file.MEASURED_KEYS:
        if key in from_file:
            raise scenario_file.ScenarioFileError(
                path, f"'{key}' is for `rtmodel advise`; plots sweep presets (use a file without it)"
            )
    from_file = {k: v for k, v in from_file.items() if k in scenario_file.PLOT_KEYS}
    opts, taken = scenario_file.merge(inputs.as_dict(), from_file)
    return dataclasses.replace(inputs, **opts), taken


def refuse_nccl_tests(o: ModelInputs) -> None:
    """The sweep plots draw presets at many n; an nccl-tests file (from a scenario file) is for the
    one-n plots and advise: one line rather than a figure that silently ignores it."""
    if o.nccl_tests is not None:
        raise UserError(
            "nccl_tests: the sweep plots draw presets; use `rtmodel plot crossover` or `rtmodel advise`"
        )


def preset_kw(o: ModelInputs, batch_per_gpu: float | None, min_gpus: int) -> tuple[ModelInputs, dict]:
    """The preset keywords of a sweep from a plot command's merged inputs. --batch-per-gpu and the
    variation (--straggler's COUNT against the smallest n swept) are checked here, before any work: the
    sweep turns --batch-per-gpu into a global batch that must hold at least one unit per GPU
    (presets.resolve checks the rest). With --params/--param-mb the library holds your model, and the
    inputs returned name it as the model."""
    from runtime_model.presets.to_model import load_library

    check_batch_per_gpu(batch_per_gpu, o.global_batch)

    given = o.as_dict()
    library, model = your_model.add(
        load_library(o.presets or ()), your_model.given(given), o.model, o.compute_ms, o.message_dtype
    )
    kw = {
        "gpu": o.gpu,
        "gpus_per_node": o.gpus_per_node,
        "intra": o.intra,
        "bucket_cap_mb": o.bucket_cap_mb,
        "ddp_bucket_view": o.ddp_bucket_view,
        "library": library,
        **{name: given[name] for name in scenario_file.PLOT_FROM_FILE_ONLY if given[name] is not None},
        **own_numbers(o.compute_ms, o.optimizer_ms, o.message_dtype, o.dispatch_us),
        **network_kw(o.nics_per_node, o.nccl_algo),
        **variation_kw(o.straggler, o.rank_cv, o.node_cv, min_gpus),
    }
    if batch_per_gpu is not None:
        kw["batch_per_gpu"] = batch_per_gpu
    elif o.global_batch is not None:
        kw["global_batch"] = o.global_batch
    return dataclasses.replace(o, model=model), kw


def plotted_inputs(o: ModelInputs, gpus: int, batch_per_gpu: float | None):
    """The AdviceInputs of a one-n plot: resolved as `rtmodel advise` resolves them (rtmodel_inputs), so a
    plot of one cluster draws the very answer advise gives for the same options."""
    from rtmodel_inputs.sources import resolve_inputs

    if batch_per_gpu is not None and (o.profile is not None or o.calibration is not None):
        flag = "--profile" if o.calibration is None else "--calibration"
        raise UserError(f"--batch-per-gpu cannot be used with {flag}: the profile measured its batch")
    return resolve_inputs({**o.as_dict(), "gpus": gpus, "batch_per_gpu": batch_per_gpu})


def plotted_scenario(o: ModelInputs, gpus: int, batch_per_gpu: float | None):
    """(scenario, margin, where its network came from) of a one-n plot (plotted_inputs)."""
    inputs = plotted_inputs(o, gpus, batch_per_gpu)
    return inputs.scenario, inputs.margin, _where(o, inputs.scenario)


def plotted_answer(o: ModelInputs, gpus: int, batch_per_gpu: float | None):
    """(advice, where its network came from) of a one-n plot: advise's whole answer to the same options
    (rtmodel_inputs.answer.advise_from: the tuned DDP and the crossovers too), so the plot names advise's pick."""
    from rtmodel_inputs.answer import advise_from

    inputs = plotted_inputs(o, gpus, batch_per_gpu)
    return advise_from(inputs), _where(o, inputs.scenario)


def _where(o: ModelInputs, sc) -> str:
    """Where a one-n plot's network came from, for its title."""
    if o.trace:
        return f"trace {Path(o.trace[0]).name}"
    if o.profile is not None or o.calibration is not None:
        what, path = ("profile", o.profile) if o.calibration is None else ("calibration", o.calibration)
        return f"{what} {Path(path).name}"
    if o.nccl_tests is not None:
        return f"nccl-tests {Path(o.nccl_tests).name}"
    return f"preset {sc.network.name}"

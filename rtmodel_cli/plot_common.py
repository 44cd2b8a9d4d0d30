"""What every `rtmodel plot` command shares: its --out and --batch-per-gpu, writing the figure, and its
model inputs merged with its --scenario file and turned into the presets' keywords.

Why a module of its own: plot.py (the preset sweeps) and plot_variance.py both use these, and neither
imports the other's names. matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli import scenario_file
from rtmodel_cli.model_options import ModelInputs
from rtmodel_inputs import your_model
from rtmodel_inputs.request import check_batch_per_gpu, network_kw, own_numbers, variation_kw
from rtmodel_util.files import check_output_path
from runtime_model.core.errors import UserError

OutOpt = Annotated[Path, typer.Option("--out", help="Output file; .png or .svg.")]


def check_out(out: Path) -> None:
    """Fail before any work if the output cannot be written as PNG or SVG (paths.check_output_path),
    or would replace one of the files the command reads."""
    if out.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--out must end in .png or .svg, got '{out}'")
    check_output_path(out, "--out", inputs=command_input_files())


def command_input_files() -> dict[str, str]:
    """Every option of the running command that names an existing file, by flag (--out aside): a figure
    must never replace the profile, results or scenario it was drawn from, whichever option brought it."""
    from rtmodel_cli.failing import command_options

    found: dict[str, str] = {}
    for name, value in command_options().items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if name != "out" and isinstance(item, str | Path) and _is_file(item):
                found.setdefault(f"--{name.replace('_', '-')}", str(item))
    return found


def _is_file(path: str | Path) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL: not an existing input
        return False


def render(make, out: Path) -> None:
    """Check `out`, build the figure with `make()` and save it."""
    import rtmodel_plots as plots

    check_out(out)
    fig = make()
    try:
        plots.save(fig, out)
    except OSError as exc:
        raise UserError(f"cannot write '{out}': {exc.strerror or exc}") from exc
    typer.echo(f"wrote {out}")


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


def plotted_scenario(o: ModelInputs, gpus: int, batch_per_gpu: float | None):
    """(scenario, margin, where its network came from) of a one-n plot: from presets, or the profile
    calibrated on the fly (or its --calibration file) with its own margin, as `rtmodel advise` builds them."""
    from rtmodel_inputs.sources import margin_of

    if o.trace:  # your training's traces (trace_inputs), as advise reads them
        from rtmodel_inputs.sources import scenario_request
        from rtmodel_inputs.traces import traced_scenario

        opts = {**o.as_dict(), "gpus": gpus, "batch_per_gpu": batch_per_gpu}
        sc, prov, _notes, inputs = traced_scenario(opts, scenario_request(opts))
        return sc, margin_of(sc, inputs, prov), f"trace {Path(o.trace[0]).name}"
    if o.profile is None and o.calibration is None:
        from rtmodel_plots.sweeps import preset_scenario

        o, kw = preset_kw(o, batch_per_gpu, gpus)
        sc = preset_scenario(
            gpus, model=o.model or "transformer-base", network=o.network, cluster=o.cluster, **kw
        )
        if o.nccl_tests is None:
            return sc, margin_of(sc, {}, {}), f"preset {sc.network.name}"
        from rtmodel_inputs.nccl_tests import with_nccl_tests

        sc, _line = with_nccl_tests(sc, Path(o.nccl_tests))
        return sc, margin_of(sc, {}, {}), f"nccl-tests {Path(o.nccl_tests).name}"
    from rtmodel_inputs.sources import scenario_for, scenario_request

    measured = Path(o.profile if o.calibration is None else o.calibration)
    if batch_per_gpu is not None:
        flag = "--profile" if o.calibration is None else "--calibration"
        raise UserError(f"--batch-per-gpu cannot be used with {flag}: the profile measured its batch")
    sc, prov, _notes, inputs = scenario_for(
        scenario_request({**o.as_dict(), "gpus": gpus}),
        None if o.profile is None else Path(o.profile),
        o.presets,
        o.nccl_tests,
        None if o.calibration is None else Path(o.calibration),
    )
    what = "profile" if o.calibration is None else "calibration"
    return sc, margin_of(sc, inputs, prov), f"{what} {measured.name}"

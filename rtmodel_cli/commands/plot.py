"""`rtmodel plot ...`: the figures of rtmodel_plots as PNG or SVG files, and with --data the numbers drawn
as a long-form CSV (each command's help names its columns).

Why a separate module with `register(app)`: the main CLI stays free of matplotlib (imported only
when a plot command runs), and every input mistake becomes one line and a non-zero exit.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli import scenario_file
from rtmodel_cli.gpu_counts import GpuSweep, takes_gpu_sweep
from rtmodel_cli.local_sgd_options import LocalSgdFlags, local_sgd_configs, takes_local_sgd
from rtmodel_cli.model_options import ModelInputs, takes_model_inputs
from rtmodel_cli.options import PerGpuOpt, TopologiesOpt, TopologyOpt, split_names
from rtmodel_cli.plot_common import (
    OutOpt,
    check_topology,
    data_opt,
    merged,
    preset_kw,
    refuse_nccl_tests,
    render,
)
from runtime_model.core.defaults import DEFAULT_GPUS
from runtime_model.core.errors import UserError

# `plot speedup` draws a panel per network or cluster and a row per model: plural flags of its own (one
# name, one meaning: --network is one network everywhere), each a comma list or repeated.
NetworksOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--networks",
        metavar="NAME[,NAME...]",
        help="Inter-node network presets, one panel each: a comma list or the flag repeated (default ib-100).",
    ),
]
ModelsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--models",
        metavar="NAME[,NAME...]",
        help="Model presets, one row of panels each: a comma list or the flag repeated (default "
        "transformer-base).",
    ),
]
ClustersOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--clusters",
        metavar="NAME[,NAME...]",
        help="Named cluster presets, one panel each (instead of --networks): a comma list or the flag repeated.",
    ),
]
SpeedupDataOpt = data_opt(
    "model, network, cluster (the panel's), x_name (gpus), x, topology, iteration_ms, speedup; one row per "
    "panel, n and topology, topology 'allreduce' being All-Reduce's own time (speedup 1)"
)
FactorsDataOpt = data_opt(
    "x_name (gpus), x, topology, iteration_ms, speedup, factor (overlap, links, variance, uneven; net: "
    "their sum, the diamond), saved_ms; one row per bar and factor"
)
WhatIfDataOpt = data_opt(
    "what_if, x_name (gpus), x, topology (the one the curve takes at that n), iteration_ms, speedup; one row "
    "per what-if and n, topology 'allreduce' being All-Reduce's time in that what-if (speedup 1)"
)
PaperDataOpt = data_opt(
    "cluster, x_name (gpus), x, topology (the method), bar (published or predicted), iteration_ms, error "
    "(predicted / published - 1, on predicted bars); one row per bar"
)
ParityDataOpt = data_opt(
    "label (the method), measured, predicted, unit (ms), error (predicted / measured - 1); one row per point"
)
# The inputs a sweep has no flag for: the plots' file-only ones, --profile, --calibration and --nccl-tests
# (the one-n plots', variance and crossover, alone).
SWEEP_WITHOUT = (*scenario_file.PLOT_FROM_FILE_ONLY, *scenario_file.MEASURED_KEYS, "nccl_tests")


def _draw_sweep(
    o: ModelInputs, gpus: list[int], batch_per_gpu: float | None, out: Path, data: Path | None, draw
) -> None:
    """A sweep plot's one path: merge the --scenario file under the inputs, check the preset keywords
    before any work, then `draw(merged_inputs, preset_keywords)` into --out (and --data)."""
    o, taken = merged(o)
    with scenario_file.blamed(o.scenario, taken):
        refuse_nccl_tests(o)
        o, kw = preset_kw(o, batch_per_gpu, min(gpus))
        render(lambda: draw(o, kw), out, data)


def _as_list(value: str | list[str] | None) -> list[str] | None:
    """A scenario file names one network, model or cluster; `plot speedup` takes a list of them."""
    return [value] if isinstance(value, str) else value


def _split_lists(inputs: ModelInputs) -> ModelInputs:
    """`plot speedup`'s plural flags as lists of names (`--networks a,b` as `--networks a --networks b`)."""
    lists = {name: split_names(getattr(inputs, name)) for name in ("network", "model", "cluster")}
    return dataclasses.replace(inputs, **lists)


@takes_model_inputs(
    without=SWEEP_WITHOUT, instead={"network": NetworksOpt, "model": ModelsOpt, "cluster": ClustersOpt}
)
@takes_gpu_sweep
@takes_local_sgd
def speedup(
    out: OutOpt,
    data: SpeedupDataOpt = None,
    topologies: TopologiesOpt = None,
    batch_per_gpu: PerGpuOpt = None,
    *,
    sweep: GpuSweep,
    inputs: ModelInputs,
    local_sgd_flags: LocalSgdFlags,
):
    """Speedup over All-Reduce vs number of GPUs, per topology; marks where decentralization pays.
    A --local-sgd-* option adds local SGD's line (none without one; --local-sgd-h 0 is none)."""
    import rtmodel_plots as plots

    # no line unless a --local-sgd-* option asks
    local_sgd = local_sgd_configs(local_sgd_flags.as_dict(), by_default=False)
    gl = sweep.counts()
    o, taken = merged(_split_lists(inputs))
    networks, clusters = _as_list(o.network), _as_list(o.cluster)
    if networks and clusters:
        if not {"network", "cluster"} & taken or len(networks) > 1:
            raise UserError("give --networks or --clusters, not both")
    with scenario_file.blamed(o.scenario, taken):
        refuse_nccl_tests(o)
        o, kw = preset_kw(o, batch_per_gpu, min(gl))
        if networks and clusters:  # a file's network replaces the cluster's, as in advise
            kw["network"], networks = networks[0], None
        render(
            lambda: plots.speedup_vs_gpus(
                gl,
                networks or None,
                _as_list(o.model) or "transformer-base",  # after preset_kw: your model's name
                clusters=clusters or None,
                topologies=split_names(topologies),
                local_sgd=local_sgd,
                **kw,
            ),
            out,
            data,
        )


@takes_model_inputs(without=SWEEP_WITHOUT)
@takes_gpu_sweep
def factors(
    out: OutOpt,
    data: FactorsDataOpt = None,
    topology: TopologyOpt = None,
    batch_per_gpu: PerGpuOpt = None,
    *,
    sweep: GpuSweep,
    inputs: ModelInputs,
):
    """The three factors (overlap window, heterogeneous links, variance) as stacked bars, in ms: one n
    (--gpus, default 64) gives a bar per topology; a --gpus-range or --gpus-list a bar per n (of --topology)."""
    import rtmodel_plots as plots

    gl = sweep.counts(default=f"{DEFAULT_GPUS}:{DEFAULT_GPUS}")
    what = gl[0] if len(gl) == 1 else gl
    check_topology(topology)

    def draw(o, kw):
        model = o.model or "transformer-base"
        return plots.factor_breakdown_bars(what, o.network, model, topology=topology, cluster=o.cluster, **kw)

    _draw_sweep(inputs, gl, batch_per_gpu, out, data, draw)


@takes_model_inputs(without=SWEEP_WITHOUT)
@takes_gpu_sweep
def what_if(
    out: OutOpt,
    data: WhatIfDataOpt = None,
    topology: TopologyOpt = None,
    batch_per_gpu: PerGpuOpt = None,
    *,
    sweep: GpuSweep,
    inputs: ModelInputs,
):
    """Speedup curves under what-ifs: inter-node bandwidth x0.5 and x2, compute x2, 5 and 100 MB buckets."""
    import rtmodel_plots as plots

    gl = sweep.counts()
    check_topology(topology)

    def draw(o, kw):
        model = o.model or "transformer-base"
        return plots.what_if(gl, o.network, model, topology=topology, cluster=o.cluster, **kw)

    _draw_sweep(inputs, gl, batch_per_gpu, out, data, draw)


def paper(out: OutOpt, data: PaperDataOpt = None):
    """The model next to the paper's published per-iteration times (Wang et al., ICLR 2025, Fig. 6)."""
    import rtmodel_plots as plots
    from rtmodel_literature import paper as paper_mod

    render(lambda: plots.paper_comparison(paper_mod.compare()), out, data)


def parity(
    out: OutOpt,
    results: Annotated[
        Path,
        typer.Option(
            help="Validation results JSONL (from `rtmodel validate`): predicted and measured mean iteration time per run."
        ),
    ],
    data: ParityDataOpt = None,
    title: Annotated[str, typer.Option(help="Figure title.")] = "Predicted vs measured per-iteration time",
):
    """Predicted vs measured mean iteration time with the y = x line and ±5% / ±10% bands."""
    import rtmodel_plots as plots
    from rtmodel_validation.results import (
        read_parity_points,  # the one reader of that file; the figure takes data
    )

    def make():
        points = read_parity_points(results)
        synthetic = sorted({p.source for p in points} - {"measured"})
        note = f"NOT MEASURED: source = {', '.join(synthetic)}" if synthetic else None
        return plots.parity(
            [p.predicted_ms for p in points],
            [p.measured_ms for p in points],
            [p.method for p in points],
            title=title,
            note=note,
        )

    render(make, out, data)


def register(app: typer.Typer) -> None:
    """Add the `plot` sub-app to the main `rtmodel` app."""
    from rtmodel_cli.plot_crossover import crossover
    from rtmodel_cli.plot_variance import variance

    plot = typer.Typer(
        help="Draw the model's predictions as figures (PNG or SVG); --data FILE.csv also writes the numbers drawn.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    plot.command("speedup")(speedup)
    plot.command("factors")(factors)
    plot.command("what-if")(what_if)
    plot.command("paper")(paper)
    plot.command("parity")(parity)
    plot.command("variance")(variance)
    plot.command("crossover")(crossover)
    app.add_typer(plot, name="plot")

"""`rtmodel plot ...`: the figures of rtmodel_plots as PNG or SVG files.

Why a separate module with `register(app)`: the main CLI stays free of matplotlib (imported only
when a plot command runs), and every input mistake becomes one line and a non-zero exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli import scenario_file, your_model
from rtmodel_cli.options import (
    BucketMibOpt,
    ClusterOpt,
    ComputeMsOpt,
    GlobalBatchOpt,
    GpuOpt,
    GpusPerNodeOpt,
    IntraOpt,
    MessageDtypeOpt,
    ModelOpt,
    NcclAlgoOpt,
    NetworkOpt,
    NicsPerNodeOpt,
    NodeCvOpt,
    OptimizerMsOpt,
    ParamMbOpt,
    ParamsOpt,
    PresetsOpt,
    RankCvOpt,
    ScenarioOpt,
    StragglerOpt,
    TopologiesOpt,
    network_kw,
    own_numbers,
    variation_kw,
)
from rtmodel_cli.paths import check_output_path
from runtime_model.errors import InvalidValue, UserError

GpusOpt = Annotated[
    str,
    typer.Option(
        "--gpus",
        help="GPU counts: a:b = doubling from a up to b (8:1024 = 8,16,...,1024), or a comma list (8,12,16).",
    ),
]
OutOpt = Annotated[Path, typer.Option("--out", help="Output file; .png or .svg.")]
PerGpuOpt = Annotated[
    float | None,
    typer.Option(
        help="Batch per GPU, at least 1 (weak scaling: global batch grows with n); overrides --global-batch."
    ),
]


class BadGpus(UserError):
    """A --gpus value that is not a count, a range a:b or a comma list."""


def parse_gpus(text: str) -> list[int]:
    """'8:1024' -> [8, 16, ..., 1024] (doubling from a up to b); '8,12,16' -> that list; items may mix."""
    from runtime_model.scenario import check_gpus  # lazily: numpy is not imported for `rtmodel --help`

    out: list[int] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            raise BadGpus(
                f"--gpus '{text}': empty item; use a:b (e.g. 8:1024) or a comma list (e.g. 8,16,32)"
            )
        try:
            if ":" in item:
                a_text, b_text = item.split(":")
                a, b = int(a_text), int(b_text)
                if a < 1 or b < a:
                    raise BadGpus(f"--gpus range '{item}' needs 1 <= a <= b")
                out.extend(a << i for i in range((b // a).bit_length()) if a << i <= b)
            else:
                out.append(int(item))
        except ValueError as exc:
            if isinstance(exc, BadGpus):
                raise
            raise BadGpus(f"--gpus '{text}': '{item}' is not a count or a range a:b (e.g. 8:1024)") from None
    for n in out:  # the model's own range (1 to runtime_model.defaults.MAX_GPUS), with its message
        try:
            check_gpus("gpus", n)
        except InvalidValue as exc:
            raise BadGpus(exc.message_for(lambda _: "--gpus")) from None
    return sorted(set(out))


def _check_out(out: Path) -> None:
    """Fail before any work if the output cannot be written as PNG or SVG (paths.check_output_path)."""
    if out.suffix.lower() not in (".png", ".svg"):
        raise UserError(f"--out must end in .png or .svg, got '{out}'")
    check_output_path(out, "--out")


def _render(make, out: Path) -> None:
    """Check `out`, build the figure with `make()` and save it."""
    import rtmodel_plots as plots

    _check_out(out)
    fig = make()
    try:
        plots.save(fig, out)
    except OSError as exc:
        raise UserError(f"cannot write '{out}': {exc.strerror or exc}") from exc
    typer.echo(f"wrote {out}")


def _check_topology(topology: str | None) -> None:
    if topology is not None:
        from runtime_model.topologies import topology_info

        topology_info(topology)  # one line naming the choices when unknown


# What a scenario file sets in a plot: the model's inputs. Not `gpus`, `margin`, `topology` or `objective`
# (the plot's own --gpus and --topology say what is drawn, per iteration, against the advisor's margin);
# `profile` is refused.
PLOT_IGNORES = ("gpus", "margin", "topology", "objective")
FROM_FILE_ONLY = ("precision", "mfu", "compute_cv")  # no plot flag; passed on to presets.resolve


def _merged(options: dict) -> tuple[dict, frozenset[str]]:
    """A plot command's options (its locals) with its --scenario file's values under them."""
    path = options["scenario"]
    from_file = scenario_file.read(path) if path is not None else {}
    if "profile" in from_file:
        raise scenario_file.ScenarioFileError(
            path, "'profile' is for `rtmodel advise`; plots sweep presets (use a file without it)"
        )
    from_file = {k: v for k, v in from_file.items() if k not in PLOT_IGNORES}
    given = {k: options.get(k) for k in scenario_file.KEYS if k not in PLOT_IGNORES}
    opts, taken = scenario_file.merge(given, from_file)
    return {**options, **opts}, taken


def _preset_kw(o: dict, min_gpus: int) -> dict:
    """The preset keywords of a sweep from a plot command's merged options. --batch-per-gpu and the
    variation (--straggler's COUNT against the smallest n swept) are checked here, before any work: the
    sweep turns --batch-per-gpu into a global batch that must hold at least one unit per GPU
    (presets.resolve checks the rest). With --params/--param-mb the library holds your model and
    o["model"] becomes its name."""
    from runtime_model.constraints import Interval
    from runtime_model.presets import load_library

    if o["batch_per_gpu"] is not None:
        Interval(1.0, None, closed="left").check("batch_per_gpu", o["batch_per_gpu"])

    library, o["model"] = your_model.add(
        load_library(o["presets"] or ()),
        your_model.given(o),
        o["model"],
        o["compute_ms"],
        o["message_dtype"],
    )
    kw = {
        "gpu": o["gpu"],
        "gpus_per_node": o["gpus_per_node"],
        "intra": o["intra"],
        "bucket_cap_mb": o["bucket_cap_mb"],
        "library": library,
        **{name: o[name] for name in FROM_FILE_ONLY if o[name] is not None},
        **own_numbers(o["compute_ms"], o["optimizer_ms"], o["message_dtype"]),
        **network_kw(o["nics_per_node"], o["nccl_algo"]),
        **variation_kw(o["straggler"], o["rank_cv"], o["node_cv"], min_gpus),
    }
    if o["batch_per_gpu"] is not None:
        kw["batch_per_gpu"] = o["batch_per_gpu"]
    elif o["global_batch"] is not None:
        kw["global_batch"] = o["global_batch"]
    return kw


def _draw_sweep(options: dict, gpus: list[int], draw) -> None:
    """A sweep plot's one path: check the topology, merge the --scenario file under the options, check the
    preset keywords before any work, then `draw(merged_options, preset_keywords)` into --out."""
    _check_topology(options.get("topology"))
    o, taken = _merged(options)
    with scenario_file.blamed(options["scenario"], taken):
        kw = _preset_kw(o, min(gpus))
        _render(lambda: draw(o, kw), options["out"])


def _as_list(value: str | list[str] | None) -> list[str] | None:
    """A scenario file names one network, model or cluster; `plot speedup` takes a list of them."""
    return [value] if isinstance(value, str) else value


def register(app: typer.Typer) -> None:
    """Add the `plot` sub-app to the main `rtmodel` app."""
    plot = typer.Typer(help="Draw the model's predictions as figures (PNG or SVG).", no_args_is_help=True)

    @plot.command("speedup")
    def speedup(
        out: OutOpt,
        gpus: GpusOpt = "8:1024",
        network: Annotated[
            list[str] | None,
            typer.Option(help="Inter-node network preset; repeat for one panel each (default ib-100)."),
        ] = None,
        model: Annotated[
            list[str] | None,
            typer.Option(help="Model preset; repeat for one row of panels each (default transformer-base)."),
        ] = None,
        cluster: Annotated[
            list[str] | None,
            typer.Option(help="Named cluster preset; repeat for one panel each (instead of --network)."),
        ] = None,
        params: ParamsOpt = None,
        param_mb: ParamMbOpt = None,
        gpu: GpuOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        intra: IntraOpt = None,
        global_batch: GlobalBatchOpt = None,
        batch_per_gpu: PerGpuOpt = None,
        bucket_cap_mb: BucketMibOpt = None,
        presets: PresetsOpt = None,
        topology: TopologiesOpt = None,
        compute_ms: ComputeMsOpt = None,
        optimizer_ms: OptimizerMsOpt = None,
        message_dtype: MessageDtypeOpt = None,
        nics_per_node: NicsPerNodeOpt = None,
        nccl_algo: NcclAlgoOpt = None,
        straggler: StragglerOpt = None,
        rank_cv: RankCvOpt = None,
        node_cv: NodeCvOpt = None,
        scenario: ScenarioOpt = None,
    ):
        """Speedup over All-Reduce vs number of GPUs, per topology; marks where decentralization pays."""
        import rtmodel_plots as plots

        gl = parse_gpus(gpus)
        o, taken = _merged(locals())
        networks, clusters = _as_list(o["network"]), _as_list(o["cluster"])
        if networks and clusters:
            if not {"network", "cluster"} & taken or len(networks) > 1:
                raise UserError("give --network or --cluster, not both")
        with scenario_file.blamed(scenario, taken):
            kw = _preset_kw(o, min(gl))
            if networks and clusters:  # a file's network replaces the cluster's, as in advise
                kw["network"], networks = networks[0], None
            _render(
                lambda: plots.speedup_vs_gpus(
                    gl,
                    networks or None,
                    _as_list(o["model"]) or "transformer-base",  # after _preset_kw: your model's name
                    clusters=clusters or None,
                    topologies=topology,
                    **kw,
                ),
                out,
            )

    @plot.command("factors")
    def factors(
        out: OutOpt,
        gpus: Annotated[
            str,
            typer.Option(
                "--gpus", help="One count (a bar per topology) or several, a:b or a comma list (a bar per n)."
            ),
        ] = "64",
        network: NetworkOpt = None,
        model: ModelOpt = None,
        cluster: ClusterOpt = None,
        params: ParamsOpt = None,
        param_mb: ParamMbOpt = None,
        topology: Annotated[
            str | None,
            typer.Option(help="With several --gpus: this topology (default: the fastest at each n)."),
        ] = None,
        gpu: GpuOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        intra: IntraOpt = None,
        global_batch: GlobalBatchOpt = None,
        batch_per_gpu: PerGpuOpt = None,
        bucket_cap_mb: BucketMibOpt = None,
        presets: PresetsOpt = None,
        compute_ms: ComputeMsOpt = None,
        optimizer_ms: OptimizerMsOpt = None,
        message_dtype: MessageDtypeOpt = None,
        nics_per_node: NicsPerNodeOpt = None,
        nccl_algo: NcclAlgoOpt = None,
        straggler: StragglerOpt = None,
        rank_cv: RankCvOpt = None,
        node_cv: NodeCvOpt = None,
        scenario: ScenarioOpt = None,
    ):
        """The three factors (overlap window, heterogeneous links, variance) as stacked bars, in ms."""
        import rtmodel_plots as plots

        gl = parse_gpus(gpus)
        what = gl[0] if len(gl) == 1 else gl
        _draw_sweep(
            locals(),
            gl,
            lambda o, kw: plots.factor_breakdown_bars(
                what,
                o["network"],
                o["model"] or "transformer-base",
                topology=topology,
                cluster=o["cluster"],
                **kw,
            ),
        )

    @plot.command("what-if")
    def what_if(
        out: OutOpt,
        gpus: GpusOpt = "8:1024",
        network: NetworkOpt = None,
        model: ModelOpt = None,
        cluster: ClusterOpt = None,
        params: ParamsOpt = None,
        param_mb: ParamMbOpt = None,
        topology: Annotated[
            str | None, typer.Option(help="This topology (default: the fastest at each n).")
        ] = None,
        gpu: GpuOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        intra: IntraOpt = None,
        global_batch: GlobalBatchOpt = None,
        batch_per_gpu: PerGpuOpt = None,
        bucket_cap_mb: BucketMibOpt = None,
        presets: PresetsOpt = None,
        compute_ms: ComputeMsOpt = None,
        optimizer_ms: OptimizerMsOpt = None,
        message_dtype: MessageDtypeOpt = None,
        nics_per_node: NicsPerNodeOpt = None,
        nccl_algo: NcclAlgoOpt = None,
        straggler: StragglerOpt = None,
        rank_cv: RankCvOpt = None,
        node_cv: NodeCvOpt = None,
        scenario: ScenarioOpt = None,
    ):
        """Speedup curves under what-ifs: inter-node bandwidth x0.5 and x2, compute x2, 5 and 100 MB buckets."""
        import rtmodel_plots as plots

        gl = parse_gpus(gpus)
        _draw_sweep(
            locals(),
            gl,
            lambda o, kw: plots.what_if(
                gl,
                o["network"],
                o["model"] or "transformer-base",
                topology=topology,
                cluster=o["cluster"],
                **kw,
            ),
        )

    @plot.command("paper")
    def paper(out: OutOpt):
        """The model next to the paper's published per-iteration times (Wang et al., ICLR 2025, Fig. 6)."""
        import rtmodel_plots as plots
        from validation import paper as paper_mod

        _render(lambda: plots.paper_comparison(paper_mod.compare()), out)

    @plot.command("parity")
    def parity(
        out: OutOpt,
        results: Annotated[
            Path,
            typer.Option(
                help="Validation results JSONL (from `rtmodel validate`): predicted and measured mean iteration time per run."
            ),
        ],
        title: Annotated[
            str, typer.Option(help="Figure title.")
        ] = "Predicted vs measured per-iteration time",
    ):
        """Predicted vs measured mean iteration time with the y = x line and ±5% / ±10% bands."""
        import rtmodel_plots as plots

        def make():
            df = plots.load_validation_results(results)
            synthetic = sorted(set(df["source"]) - {"measured"})
            note = f"NOT MEASURED: source = {', '.join(synthetic)}" if synthetic else None
            return plots.parity(df["predicted_ms"], df["measured_ms"], df["method"], title=title, note=note)

        _render(make, out)

    from rtmodel_cli.plot_variance import register_variance

    register_variance(plot)
    app.add_typer(plot, name="plot")

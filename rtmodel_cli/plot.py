"""`rtmodel plot ...`: the figures of rtmodel_plots as PNG or SVG files.

Why a separate module with `register(app)`: the main CLI stays free of matplotlib (imported only
when a plot command runs), and every input mistake becomes one line and a non-zero exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli.options import (
    BucketMibOpt,
    ClusterOpt,
    GlobalBatchOpt,
    GpuOpt,
    GpusPerNodeOpt,
    IntraOpt,
    ModelOpt,
    NetworkOpt,
    PresetsOpt,
    TopologiesOpt,
)
from rtmodel_cli.paths import check_output_path
from runtime_model import defaults
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


def _preset_kw(
    gpu, gpus_per_node, intra, global_batch, batch_per_gpu, bucket_cap_mb, presets: list[Path] | None
) -> dict:
    """The preset keywords of a sweep. --batch-per-gpu is checked here, before any work: the sweep turns
    it into a global batch that must hold at least one unit per GPU (presets.resolve checks the rest)."""
    from runtime_model.constraints import Interval
    from runtime_model.presets import load_library

    if batch_per_gpu is not None:
        Interval(1.0, None, closed="left").check("batch_per_gpu", batch_per_gpu)

    kw = {
        "gpu": gpu,
        "gpus_per_node": gpus_per_node,
        "intra": intra,
        "bucket_cap_mb": bucket_cap_mb,
        "library": load_library(presets or ()),
    }
    if batch_per_gpu is not None:
        kw["batch_per_gpu"] = batch_per_gpu
    elif global_batch is not None:
        kw["global_batch"] = global_batch
    return kw


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
        gpu: GpuOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        intra: IntraOpt = None,
        global_batch: GlobalBatchOpt = None,
        batch_per_gpu: PerGpuOpt = None,
        bucket_cap_mb: BucketMibOpt = defaults.BUCKET_CAP_MIB,
        presets: PresetsOpt = None,
        topology: TopologiesOpt = None,
    ):
        """Speedup over All-Reduce vs number of GPUs, per topology; marks where decentralization pays."""
        import rtmodel_plots as plots

        gl = parse_gpus(gpus)
        if network and cluster:
            raise UserError("give --network or --cluster, not both")
        kw = _preset_kw(gpu, gpus_per_node, intra, global_batch, batch_per_gpu, bucket_cap_mb, presets)
        _render(
            lambda: plots.speedup_vs_gpus(
                gl,
                network or None,
                model or "transformer-base",
                clusters=cluster or None,
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
        model: ModelOpt = "transformer-base",
        cluster: ClusterOpt = None,
        topology: Annotated[
            str | None,
            typer.Option(help="With several --gpus: this topology (default: the fastest at each n)."),
        ] = None,
        gpu: GpuOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        intra: IntraOpt = None,
        global_batch: GlobalBatchOpt = None,
        batch_per_gpu: PerGpuOpt = None,
        bucket_cap_mb: BucketMibOpt = defaults.BUCKET_CAP_MIB,
        presets: PresetsOpt = None,
    ):
        """The three factors (overlap window, heterogeneous links, variance) as stacked bars, in ms."""
        import rtmodel_plots as plots

        gl = parse_gpus(gpus)
        _check_topology(topology)
        kw = _preset_kw(gpu, gpus_per_node, intra, global_batch, batch_per_gpu, bucket_cap_mb, presets)
        what = gl[0] if len(gl) == 1 else gl
        _render(
            lambda: plots.factor_breakdown_bars(
                what, network, model, topology=topology, cluster=cluster, **kw
            ),
            out,
        )

    @plot.command("what-if")
    def what_if(
        out: OutOpt,
        gpus: GpusOpt = "8:1024",
        network: NetworkOpt = None,
        model: ModelOpt = "transformer-base",
        cluster: ClusterOpt = None,
        topology: Annotated[
            str | None, typer.Option(help="This topology (default: the fastest at each n).")
        ] = None,
        gpu: GpuOpt = None,
        gpus_per_node: GpusPerNodeOpt = None,
        intra: IntraOpt = None,
        global_batch: GlobalBatchOpt = None,
        batch_per_gpu: PerGpuOpt = None,
        bucket_cap_mb: BucketMibOpt = defaults.BUCKET_CAP_MIB,
        presets: PresetsOpt = None,
    ):
        """Speedup curves under what-ifs: inter-node bandwidth x0.5 and x2, compute x2, 5 and 100 MB buckets."""
        import rtmodel_plots as plots

        gl = parse_gpus(gpus)
        _check_topology(topology)
        kw = _preset_kw(gpu, gpus_per_node, intra, global_batch, batch_per_gpu, bucket_cap_mb, presets)
        _render(lambda: plots.what_if(gl, network, model, topology=topology, cluster=cluster, **kw), out)

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

    app.add_typer(plot, name="plot")

"""`rtmodel plot variance`: speedup over All-Reduce vs one straggler's slowdown and vs i.i.d. compute jitter.

Why a module of its own: unlike the other plots it also takes a profile (a calibrated scenario, varied
the same way as the presets' one), so it builds its scenario like `rtmodel advise` does; plot.py stays
the home of the preset sweeps.
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
    NetworkOpt,
    NodeCvOpt,
    OptimizerMsOpt,
    ParamMbOpt,
    ParamsOpt,
    PresetsOpt,
    ProfileOpt,
    RankCvOpt,
    ScenarioOpt,
    StragglerOpt,
    TopologiesOpt,
    own_numbers,
    variation_kw,
)
from rtmodel_cli.plot import OutOpt, PerGpuOpt, _check_out, _check_topology, _merged, _preset_kw, _render
from runtime_model.constraints import Interval
from runtime_model.errors import UserError

STRAGGLER_MAX = Interval(1.0, 100.0, closed="right")  # the sweep starts at 1 (no straggler)
CV_MAX = Interval(0.0, 1.0, closed="right")  # the sweep starts at 0 (no jitter)


def register_variance(plot: typer.Typer) -> None:
    """Add `variance` to the `plot` sub-app."""

    @plot.command("variance")
    def variance(
        out: OutOpt,
        straggler_max: Annotated[
            float,
            typer.Option(
                help=f"Largest slowdown of the one slow rank in panel (a), {STRAGGLER_MAX.describe()}."
            ),
        ] = 3.0,
        cv_max: Annotated[
            float, typer.Option(help=f"Largest i.i.d. compute CV in panel (b), {CV_MAX.describe()}.")
        ] = 0.5,
        gpus: Annotated[int, typer.Option(help="Number of GPUs n.")] = 64,
        network: NetworkOpt = None,
        model: ModelOpt = None,
        cluster: ClusterOpt = None,
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
        straggler: StragglerOpt = None,
        rank_cv: RankCvOpt = None,
        node_cv: NodeCvOpt = None,
        profile: ProfileOpt = None,
        scenario: ScenarioOpt = None,
    ):
        """Speedup over All-Reduce vs (a) one rank's persistent slowdown 1..--straggler-max and (b) the
        i.i.d. compute CV 0..--cv-max, at one n. Panel (a) replaces any --straggler; (b) keeps it."""
        import rtmodel_plots as plots
        from rtmodel_plots.variance import POINTS, grid
        from runtime_model.scenario import check_gpus

        _check_out(out)
        STRAGGLER_MAX.check("straggler_max", straggler_max)
        CV_MAX.check("cv_max", cv_max)
        check_gpus("gpus", gpus)
        for name in topology or ():
            _check_topology(name)
        o, taken = _merged(locals())
        with scenario_file.blamed(scenario, taken):
            sc = _scenario(o, gpus)
            factors, cvs = grid(straggler_max, 1.0, POINTS), grid(cv_max, 0.0, POINTS)
            _render(lambda: plots.variance_panels(sc, factors, cvs, topologies=topology), out)


def _scenario(o: dict, gpus: int):
    """The scenario both panels vary: from presets, or the profile calibrated on the fly (as in advise)."""
    if o["profile"] is None:
        from rtmodel_plots.sweeps import preset_scenario

        kw = _preset_kw(o, gpus)
        return preset_scenario(gpus, model=o["model"] or "transformer-base", network=o["network"],
                               cluster=o["cluster"], **kw)  # fmt: skip
    from rtmodel_cli.advise import REQUEST_KEYS, scenario_for

    if o["batch_per_gpu"] is not None:
        raise UserError("--batch-per-gpu cannot be used with --profile: the profile measured its batch")
    request = {name: o.get(name) for name in REQUEST_KEYS}
    request["gpus"] = gpus
    own = {**own_numbers(o["compute_ms"], o["optimizer_ms"], o["message_dtype"]), **your_model.given(o)}
    varied = variation_kw(o["straggler"], o["rank_cv"], o["node_cv"], gpus)
    return scenario_for({**request, **own, **varied}, Path(o["profile"]), o["presets"])[0]

"""`rtmodel plot variance`: speedup over All-Reduce vs one straggler's slowdown and vs i.i.d. compute jitter.

Why a module of its own: unlike the other plots it also takes a profile or its calibration file (a
calibrated scenario, varied the same way as the presets' one), so it builds its scenario like `rtmodel advise` does; plot.py stays
the home of the preset sweeps.
"""

from __future__ import annotations

from typing import Annotated

import typer

from rtmodel_cli import scenario_file
from rtmodel_cli.gpu_counts import GpusOpt
from rtmodel_cli.model_options import ModelInputs, takes_model_inputs
from rtmodel_cli.options import PerGpuOpt, TopologiesOpt, split_names
from rtmodel_cli.plot_common import (
    OutOpt,
    check_topology,
    data_opt,
    merged,
    plotted_scenario,
    save_drawn,
    writing,
)
from runtime_model.core.constraints import Interval
from runtime_model.core.defaults import DEFAULT_GPUS

STRAGGLER_MAX = Interval(1.0, 100.0, closed="right")  # the sweep starts at 1 (no straggler)
CV_MAX = Interval(0.0, 1.0, closed="right")  # the sweep starts at 0 (no jitter)
# No flag for how the collectives use the links either (--nics-per-node, --nccl-algo): a profile measured
# them, and with presets a scenario file may still set them.
WITHOUT = (*scenario_file.PLOT_FROM_FILE_ONLY, "nics_per_node", "nccl_algo")
VarianceDataOpt = data_opt(
    "x_name (the panel: straggler_factor or compute_cv), x, topology, iteration_ms, speedup; one row per "
    "point drawn, topology 'allreduce' being All-Reduce's own time at that x (speedup 1)"
)


@takes_model_inputs(without=WITHOUT)
def variance(
    out: OutOpt,
    data: VarianceDataOpt = None,
    straggler_max: Annotated[
        float,
        typer.Option(help=f"Largest slowdown of the one slow rank in panel (a), {STRAGGLER_MAX.describe()}."),
    ] = 3.0,
    cv_max: Annotated[
        float, typer.Option(help=f"Largest i.i.d. compute CV in panel (b), {CV_MAX.describe()}.")
    ] = 0.5,
    gpus: GpusOpt = DEFAULT_GPUS,
    topologies: TopologiesOpt = None,
    batch_per_gpu: PerGpuOpt = None,
    *,
    inputs: ModelInputs,
):
    """Speedup over All-Reduce vs (a) one rank's persistent slowdown 1..--straggler-max and (b) the
    i.i.d. compute CV 0..--cv-max, at one n. Panel (a) replaces any --straggler; (b) keeps it."""
    import rtmodel_plots as plots
    from rtmodel_plots.variance import POINTS, grid
    from runtime_model.core.scenario import check_gpus

    with writing(out, data):  # checked and locked before any work (plot_common.writing)
        STRAGGLER_MAX.check("straggler_max", straggler_max)
        CV_MAX.check("cv_max", cv_max)
        check_gpus("gpus", gpus)
        topologies = split_names(topologies)
        for name in topologies or ():
            check_topology(name)
        o, taken = merged(inputs)
        with scenario_file.blamed(o.scenario, taken):
            sc = _scenario(o, gpus, batch_per_gpu)
            factors, cvs = grid(straggler_max, 1.0, POINTS), grid(cv_max, 0.0, POINTS)
            save_drawn(lambda: plots.variance_panels(sc, factors, cvs, topologies=topologies), out, data)


def _scenario(o: ModelInputs, gpus: int, batch_per_gpu: float | None):
    """The scenario both panels vary: from presets, or the profile calibrated on the fly (as in advise)."""
    return plotted_scenario(o, gpus, batch_per_gpu)[0]

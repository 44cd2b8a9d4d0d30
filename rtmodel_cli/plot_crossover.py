"""`rtmodel plot crossover`: the pick's speedup over All-Reduce against the inter-node bandwidth, with the
band inside which it is too close to call and this cluster's bandwidth (the preset's or the profile's).

Why a module of its own: like `plot variance` it takes a profile and answers at one n, so it builds its
answer as `rtmodel advise` does (plot_common.plotted_answer); the advice's crossovers
(runtime_model.advice.crossover) mark where the verdict flips.
"""

from __future__ import annotations

from rtmodel_cli import scenario_file
from rtmodel_cli.gpu_counts import GpusOpt
from rtmodel_cli.model_options import ModelInputs, takes_model_inputs
from rtmodel_cli.options import PerGpuOpt
from rtmodel_cli.plot_common import OutOpt, data_opt, merged, plotted_answer, save_drawn, writing
from rtmodel_cli.plot_variance import WITHOUT
from runtime_model.core.defaults import DEFAULT_GPUS

CrossoverDataOpt = data_opt(
    "kind (curve; flip: where it crosses 1; this cluster: its bandwidth; too close to call: the band's two "
    "edges; what a preset can miss by: that band's two edges), x_name (inter_bandwidth_gbit_s), x, "
    "topology, speedup"
)


@takes_model_inputs(without=WITHOUT)
def crossover(
    out: OutOpt,
    data: CrossoverDataOpt = None,
    gpus: GpusOpt = DEFAULT_GPUS,
    batch_per_gpu: PerGpuOpt = None,
    *,
    inputs: ModelInputs,
):
    """Speedup of the pick (or, where All-Reduce is kept, the best gossip option) over All-Reduce from
    1/64x to 64x this cluster's inter-node bandwidth; marks where it flips and the too-close band."""
    import rtmodel_plots as plots
    from rtmodel_util.shown import say
    from runtime_model.advice.crossover import crossover_topology, no_crossover_reason
    from runtime_model.core.scenario import check_gpus

    with writing(out, data):  # checked and locked before any work (plot_common.writing)
        check_gpus("gpus", gpus)
        o, taken = merged(inputs)
        with scenario_file.blamed(o.scenario, taken):
            answer, where = plotted_answer(o, gpus, batch_per_gpu)
            if crossover_topology(answer) is None:  # the bands alone: say why in a line, as the figure does
                say(f"note: no curve drawn: {no_crossover_reason(answer)}")
            save_drawn(lambda: plots.crossover_curve(answer, where), out, data)

"""What-if curves: how the speedup over All-Reduce moves if the network, the compute or the buckets change.

Why each curve is compared with All-Reduce in its own what-if world: a faster network speeds up
All-Reduce too, so only the ratio in the same world says whether decentralization would still pay.
"""

from __future__ import annotations

from collections.abc import Sequence

from rtmodel_plots.errors import PlotError
from rtmodel_plots.long_form import ALLREDUCE, SWEEP_COLUMNS, PlotTable, attach
from rtmodel_plots.progress import CurveProgress
from rtmodel_plots.style import log2_gpu_axis, new_figure, speedup_y_axis
from rtmodel_plots.sweeps import DEFAULT_WHAT_IFS, WhatIf, best_per_gpus, pays_from, sweep
from runtime_model.core.defaults import MARGIN

# --data: the sweep's columns after the what-if's label; a curve's topology is the one picked at that n
COLUMNS = ("what_if", *SWEEP_COLUMNS)


def what_if(
    gpus_list: Sequence[int],
    network: str | None = None,
    model: str = "transformer-base",
    *,
    variants: Sequence[WhatIf] = DEFAULT_WHAT_IFS,
    topology: str | None = None,
    margin: float = MARGIN,
    data: dict | None = None,
    **preset_kw,
):
    """Speedup over All-Reduce vs n under what-ifs: inter-node bandwidth x0.5 / x2, compute x2, bucket size.

    Each curve is the best topology's speedup (or `topology`'s) in that what-if world, against
    All-Reduce in the same world. Pass a dict as `data` to get the DataFrames back, keyed by label;
    `plotted(fig)` gives the points drawn (COLUMNS; "allreduce" rows: its time in that world).
    preset_kw: what `sweep` takes besides (cluster, gpu, gpus_per_node, batch_per_gpu, ...).
    """
    gpus_list = sorted(set(int(g) for g in gpus_list))
    if not gpus_list:
        raise PlotError("no GPU counts given")
    table = PlotTable(COLUMNS)
    fig = new_figure(7.6, 4.8)
    ax = fig.subplots()
    styles = ["-", "--", "--", "-.", ":", ":"]
    colors = ["black", "#C44E52", "#4C72B0", "#55A868", "#8172B3", "#DD8452"]
    speedups: list[float] = []
    progress = CurveProgress(len(variants), "what-ifs")
    for idx, v in enumerate(variants):
        kw = dict(preset_kw)
        if v.bucket_cap_mb is not None:
            kw["bucket_cap_mb"] = v.bucket_cap_mb
        df = sweep(
            gpus_list,
            model=model,
            network=network,
            topologies=[topology] if topology else None,
            transform=v.apply,
            factors=data is not None,
            **kw,
        )
        if data is not None:
            data[v.label] = df
        pick = best_per_gpus(df).set_index("gpus").reindex(gpus_list)
        speedups.extend(pick["speedup"].dropna())
        n0 = pays_from(df, margin)
        label = v.label + (f"  (pays from n={n0})" if n0 is not None else "  (never pays)")
        ax.plot(
            gpus_list,
            pick["speedup"],
            ls=styles[idx % len(styles)],
            color=colors[idx % len(colors)],
            marker="o",
            ms=3.5,
            lw=2.2 if idx == 0 else 1.5,
            label=label,
        )
        _record(table, v.label, gpus_list, pick, df)
        progress.step(v.label)
    ax.axhline(1.0, color="black", ls="--", lw=0.9)
    ax.text(gpus_list[-1] * 1.2, 1.0, "All-Reduce ", va="bottom", ha="right", fontsize=8, color="0.3")
    log2_gpu_axis(ax, gpus_list)
    speedup_y_axis(ax, speedups)
    ax.set_ylabel(f"speedup over All-Reduce (x), {'best topology' if topology is None else topology}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    where = preset_kw.get("cluster") or network or "ib-100"
    fig.suptitle(f"What-if: {model} on {where}", fontsize=11)
    return attach(fig, table)


def _record(table: PlotTable, label: str, gpus_list: list[int], pick, df) -> None:
    """A what-if's curve as drawn (the pick at each n, empty where none fits) and All-Reduce's time there."""
    table.add_points(
        what_if=label,
        x_name="gpus",
        x=gpus_list,
        topology=pick["topology"],
        iteration_ms=pick["topology_ms"],
        speedup=pick["speedup"],
    )
    ar = df.drop_duplicates("gpus").set_index("gpus").reindex(gpus_list)
    table.add_points(
        what_if=label,
        x_name="gpus",
        x=gpus_list,
        topology=ALLREDUCE,
        iteration_ms=ar["allreduce_ms"],
        speedup=1.0,
    )

"""Speedup over All-Reduce vs number of GPUs, and where decentralization starts to pay.

Why one panel per (model, network or cluster) with shared axes: the question is how the answer
moves with the cluster, so panels must be comparable at a glance; the dotted line marks the first
n from which the best topology stays ahead by the advisor's margin.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from rtmodel_plots.errors import PlotError
from rtmodel_plots.long_form import ALLREDUCE, SWEEP_COLUMNS, PlotTable, attach, draw_speedup_line
from rtmodel_plots.progress import CurveProgress
from rtmodel_plots.style import lines_legend, log2_gpu_axis, new_figure, speedup_y_axis, topology_style
from rtmodel_plots.sweeps import best_per_gpus, pays_from, sweep
from runtime_model.core.defaults import MARGIN

# --data: the sweep's columns after the panel's model and its network or cluster (the other one empty)
COLUMNS = ("model", "network", "cluster", *SWEEP_COLUMNS)


def speedup_vs_gpus(
    gpus_list: Sequence[int],
    networks: str | Sequence[str] | None = None,
    models: str | Sequence[str] = "transformer-base",
    *,
    clusters: str | Sequence[str] | None = None,
    topologies: Sequence[str] | None = None,
    margin: float = MARGIN,
    data: dict | None = None,
    **preset_kw,
):
    """Speedup over All-Reduce vs number of GPUs, one line per topology; one panel per (model, network/cluster).

    Rows are models, columns are networks (or named clusters, if given). A dashed line marks 1.0
    (All-Reduce); a dotted vertical line marks where decentralization starts to pay (best topology
    >= 1 + margin from there on). Pass a dict as `data` to get the swept DataFrames back, keyed by
    (model, network-or-cluster); `plotted(fig)` gives the points drawn (COLUMNS; "allreduce" rows: its
    own time). preset_kw's `local_sgd`: local-SGD configurations (runtime_model.prediction.local_sgd.LocalSgd)
    drawn beside the topologies, in black dash-dot (another training algorithm: never the pays mark). preset_kw: gpu, gpus_per_node, intra, batch_per_gpu, global_batch, ...
    """
    gpus_list = sorted(set(int(g) for g in gpus_list))
    if not gpus_list:
        raise PlotError("no GPU counts given")
    models = _as_list(models)
    if clusters is not None:
        columns, key = _as_list(clusters), "cluster"
    else:
        columns, key = _as_list(networks if networks is not None else "ib-100"), "network"
    table = PlotTable(COLUMNS)
    fig = new_figure(4.6 * len(columns) + 0.6, 3.6 * len(models) + 0.9)
    axes = fig.subplots(len(models), len(columns), squeeze=False, sharex=True, sharey=True)
    seen: dict[str, object] = {}
    speedups: list[float] = []
    progress = CurveProgress(len(models) * len(columns), "panels")
    for i, model in enumerate(models):
        for j, col in enumerate(columns):
            ax = axes[i][j]
            # the factor columns only for a caller who asked for the frames (the figure draws speedups)
            df = sweep(
                gpus_list,
                model=model,
                topologies=topologies,
                factors=data is not None,
                **{key: col},
                **preset_kw,
            )
            if data is not None:
                data[(model, col)] = df
            speedups.extend(df["speedup"].dropna())
            panel = {"model": model, **_where(key, col, preset_kw)}
            for topo, line in _draw_lines(ax, df, table, panel).items():
                seen.setdefault(topo, line)
            _mark_pays(ax, df, margin)
            log2_gpu_axis(ax, gpus_list)
            progress.step(f"{model} on {col}")
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{model} · {col}", fontsize=10)
            if j == 0:
                ax.set_ylabel("speedup over All-Reduce (x)")
            if i < len(models) - 1:
                ax.set_xlabel("")
    speedup_y_axis(axes[0][0], speedups)
    handles = list(seen.values()) + [_dashed_handle()]
    lines_legend(fig, handles)
    fig.suptitle(_speedup_title(preset_kw), fontsize=11)
    return attach(fig, table)


def _as_list(x) -> list:
    if x is None:
        return [None]
    return [x] if isinstance(x, str) else list(x)


def _where(key: str, col, preset_kw: dict) -> dict:
    """A panel's network and cluster columns: its own, and a network a cluster's panel was given."""
    if key == "cluster":
        return {"network": preset_kw.get("network"), "cluster": col}
    return {"network": col, "cluster": None}


def _draw_lines(ax, df: pd.DataFrame, table: PlotTable, panel: dict) -> dict:
    """A panel's line per topology and the dashed All-Reduce line at 1 (its rows: All-Reduce's own time),
    each recorded in `table` from the very values drawn; returns the lines by topology."""
    lines = {}
    for topo, part in df.groupby("topology", sort=False):
        part = part.sort_values("gpus")
        color, marker, ls = topology_style(topo)
        if part["family"].iloc[0] == "local-sgd":
            color, marker, ls = "black", "*", "-."
        lines[topo] = draw_speedup_line(ax, table, part, "gpus", "gpus", topo, (color, marker, ls), **panel)
    ax.axhline(1.0, color="black", ls="--", lw=1.0)
    ar = df.drop_duplicates("gpus").sort_values("gpus")
    table.add_points(
        **panel,
        x_name="gpus",
        x=ar["gpus"],
        topology=ALLREDUCE,
        iteration_ms=ar["allreduce_ms"],
        speedup=1.0,
    )
    return lines


def _dashed_handle():
    from matplotlib.lines import Line2D

    return Line2D([], [], color="black", ls="--", lw=1.0, label="All-Reduce (speedup 1.0)")


def _speedup_title(preset_kw: dict) -> str:
    from runtime_model.presets import to_model as presets

    extra = [str(preset_kw["gpu"])] if preset_kw.get("gpu") else []
    per_gpu = preset_kw.get("batch_per_gpu")
    if isinstance(per_gpu, dict):
        units = (preset_kw.get("library") or presets.builtin_library()).models
        extra.append(
            "weak scaling: "
            + ", ".join(
                f"{v:g} {units[m].unit}s/GPU ({m})" if m in units else f"{v:g}/GPU ({m})"
                for m, v in per_gpu.items()
            )
        )
    elif per_gpu:
        extra.append(f"weak scaling, {per_gpu:g} per GPU")
    elif preset_kw.get("global_batch"):
        extra.append(f"fixed global batch {preset_kw['global_batch']:g}")
    else:
        extra.append("each model's fixed default global batch")
    what = "gossip topologies" + (" and local SGD" if preset_kw.get("local_sgd") else "")
    return f"Predicted per-iteration speedup of {what} over All-Reduce\n({'; '.join(extra)})"


def _mark_pays(ax, df: pd.DataFrame, margin: float) -> None:
    n0 = pays_from(df, margin)
    best = best_per_gpus(df)
    box = {"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.7", "alpha": 0.9}
    if n0 is None:
        text = f"never >= {1 + margin:.2f}x here" if not best.empty else "no topology fits"
        ax.text(0.03, 0.96, text, transform=ax.transAxes, va="top", fontsize=8.5, bbox=box)
        return
    row = best[best["gpus"] == n0].iloc[0]
    ax.axvline(n0, color="0.35", ls=":", lw=1.3)
    first = n0 == best["gpus"].min()
    text = (
        f"pays at every n swept\n(n={n0}: {row['topology']} {row['speedup']:.2f}x)"
        if first
        else f"pays from n = {n0}\n({row['topology']} {row['speedup']:.2f}x)"
    )
    ax.text(0.03, 0.96, text, transform=ax.transAxes, va="top", fontsize=8.5, bbox=box)

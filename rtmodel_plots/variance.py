"""Speedup over All-Reduce under compute variation: one persistently slow rank, and i.i.d. jitter.

Why two panels: the two kinds of variation act in opposite directions on gossip
(runtime_model/core/variation.py). All-Reduce waits every iteration for the slowest of all n ranks, gossip
only for its group, so gossip escapes much of the i.i.d. jitter: its speedup grows with the CV (b). A
persistent straggler is different: in a connected schedule every rank runs, in the long run, at the
slowest rank's pace, so no topology escapes it and the speedup falls towards what communication alone
buys (a). Each panel changes one thing of one scenario (presets or a calibrated profile) and compares
with All-Reduce in the same world.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from rtmodel_plots.errors import PlotError
from rtmodel_plots.long_form import ALLREDUCE, SWEEP_COLUMNS, PlotTable, attach, draw_speedup_line
from rtmodel_plots.style import lines_legend, new_figure, speedup_y_axis, topology_style
from runtime_model.core.distributions import NormalCompute
from runtime_model.core.scenario import Compute, Scenario

DEFAULT_STRAGGLER_MAX = 3.0
DEFAULT_CV_MAX = 0.5
POINTS = 9
# --data: the sweep's columns; x_name names the panel: (a) straggler_factor, (b) compute_cv
COLUMNS = SWEEP_COLUMNS
X_NAMES = {"factor": "straggler_factor", "cv": "compute_cv"}


def grid(high: float, low: float, points: int = POINTS) -> list[float]:
    """`points` evenly spaced values from `low` to `high` (the x values of one panel)."""
    return [float(x) for x in np.linspace(low, high, points)]


def _each_compute(scenario: Scenario, edit) -> Scenario:
    """`scenario` with `edit` applied to DDP's compute and to Decent-DP's own compute, when it has one."""
    gossip = None if scenario.gossip_compute is None else edit(scenario.gossip_compute)
    return replace(scenario, compute=edit(scenario.compute), gossip_compute=gossip)


def with_straggler(scenario: Scenario, factor: float) -> Scenario:
    """Rank 0 (node 0) `factor` times slower than the rest; the scenario's other variation (rank spread,
    node term, measured per-rank speeds, i.i.d. part) is kept, so factor 1 is the scenario itself."""

    def edit(c: Compute) -> Compute:
        return replace(c, variation=replace(c.variation, straggler_factor=float(factor), straggler_count=1))

    return _each_compute(scenario, edit)


def with_iid_cv(scenario: Scenario, cv: float) -> Scenario:
    """The i.i.d. part of compute as Normal(mean, mean x cv), same mean (a profile's measured samples
    are replaced by a Normal too, and its measured step spread dropped: the panel's cv is all the i.i.d.
    variation); the persistent and node-correlated parts are kept."""

    def edit(c: Compute) -> Compute:
        mean = c.distribution.mean_s
        return replace(c, distribution=NormalCompute(mean, mean * float(cv)), step_spread=None)

    return _each_compute(scenario, edit)


def _rows(scenario: Scenario, key: str, value: float, topologies: Sequence[str] | None) -> list[dict]:
    from runtime_model.advice.advisor import advise

    adv = advise(scenario, topologies=list(topologies) if topologies else None)
    ar_ms = adv.allreduce.mean_s * 1e3
    rows = []
    for r in adv.rows:
        ok = r.applicable and r.prediction is not None
        rows.append({
            key: value, "topology": r.topology, "applicable": r.applicable, "runnable": r.runnable,
            "allreduce_ms": ar_ms,
            "topology_ms": r.prediction.mean_s * 1e3 if ok else math.nan,
            "speedup": r.speedup if ok else math.nan,
        })  # fmt: skip
    return rows


def variance_sweeps(
    scenario: Scenario,
    factors: Sequence[float] | None = None,
    cvs: Sequence[float] | None = None,
    *,
    topologies: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(df_straggler, df_cv): the advisor at each straggler slowdown of rank 0 and at each i.i.d. CV.

    One row per (x, topology); columns: factor (or cv), topology, applicable, runnable (Decent-DP can
    run it), allreduce_ms, topology_ms, speedup (All-Reduce's mean / the topology's mean; NaN where the
    topology does not fit). Defaults: factors 1 .. 3 and CVs 0 .. 0.5, 9 points each.
    """
    factors = grid(DEFAULT_STRAGGLER_MAX, 1.0) if factors is None else list(factors)
    cvs = grid(DEFAULT_CV_MAX, 0.0) if cvs is None else list(cvs)
    if not factors or not cvs:
        raise PlotError("no straggler factors or CVs to sweep")
    by_factor = [row for f in factors for row in _rows(with_straggler(scenario, f), "factor", f, topologies)]
    by_cv = [row for cv in cvs for row in _rows(with_iid_cv(scenario, cv), "cv", cv, topologies)]
    return pd.DataFrame(by_factor), pd.DataFrame(by_cv)


def variance_panels(
    scenario: Scenario,
    factors: Sequence[float] | None = None,
    cvs: Sequence[float] | None = None,
    *,
    topologies: Sequence[str] | None = None,
    data: dict | None = None,
):
    """Two panels: speedup over All-Reduce of each runnable topology vs (a) the slowdown of one rank and
    (b) the i.i.d. compute CV, at the scenario's n. Pass a dict as `data` to get the two DataFrames back
    (keys "straggler" and "cv"); `plotted(fig)` gives the points drawn (COLUMNS; "allreduce" rows: its
    time at each x)."""
    df_straggler, df_cv = variance_sweeps(scenario, factors, cvs, topologies=topologies)
    table = PlotTable(COLUMNS)
    if data is not None:
        data["straggler"], data["cv"] = df_straggler, df_cv
    fig = new_figure(10.4, 4.6)
    axes = fig.subplots(1, 2, sharey=True)
    seen: dict[str, object] = {}
    speedups: list[float] = []
    panels = (
        (axes[0], df_straggler, "factor", "(a) one persistent straggler",
         "slowdown of rank 0 (x; every other rank 1x)"),
        (axes[1], df_cv, "cv", "(b) i.i.d. compute jitter", "i.i.d. compute CV (sd / mean, every rank)"),
    )  # fmt: skip
    for ax, df, key, title, xlabel in panels:
        for topo, line in _draw_panel(ax, df, key, table, speedups).items():
            seen.setdefault(topo, line)
        ar = df.drop_duplicates(key)
        ax.text(
            0.03,
            0.04,
            f"All-Reduce {ar['allreduce_ms'].iloc[0]:.1f} -> {ar['allreduce_ms'].iloc[-1]:.1f} ms/iter",
            transform=ax.transAxes,
            fontsize=8,
            color="0.3",
        )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("speedup over All-Reduce (x, mean iteration time)")
    speedup_y_axis(axes[0], speedups)
    handles = [*seen.values(), axes[0].get_lines()[-1]]
    lines_legend(fig, handles)
    sh = scenario.shape
    fig.suptitle(
        f"Speedup over All-Reduce under compute variation: {sh.gpus} GPUs = {sh.nodes} nodes x "
        f"{sh.gpus_per_node}, network {scenario.network.name}",
        fontsize=11,
    )
    return attach(fig, table)


def _draw_panel(ax, df: pd.DataFrame, key: str, table: PlotTable, speedups: list[float]) -> dict:
    """One panel's line per runnable topology (extending `speedups`) and the dashed All-Reduce line at 1,
    each recorded in `table` from the very values drawn; returns the lines by topology."""
    shown = df[df["applicable"] & df["runnable"] & np.isfinite(df["speedup"])]
    speedups.extend(shown["speedup"])
    lines = {}
    for topo, part in shown.groupby("topology", sort=False):
        lines[topo] = draw_speedup_line(ax, table, part, key, X_NAMES[key], topo, topology_style(topo))
    ax.axhline(1.0, color="black", ls="--", lw=1.0, label="All-Reduce (speedup 1.0)")
    ar = df.drop_duplicates(key)
    table.add_points(
        x_name=X_NAMES[key], x=ar[key], topology=ALLREDUCE, iteration_ms=ar["allreduce_ms"], speedup=1.0
    )
    return lines

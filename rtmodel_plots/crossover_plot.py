"""Speedup over All-Reduce against the inter-node bandwidth: where the verdict flips, the band inside
which it is too close to call, and where this cluster sits (the preset's figure, with the band a preset
network can miss by, or the measured one). Why: a user whose cluster is not a preset sees at once whether the verdict depends on
the bandwidth they do not know."""

from __future__ import annotations

import textwrap

import numpy as np

from rtmodel_plots.long_form import PlotTable, attach
from rtmodel_plots.style import new_figure
from runtime_model.advice.crossover import BANDWIDTH, PRESET_NETWORK_SPREAD, SPAN, bandwidth_speedups

POINTS = 49  # 1/64x .. 64x in steps of 2^(1/4)
# --data: what each row is (kind), where it sits and the speedup drawn there (empty for a vertical line or
# band): "curve" points, the "flip" dot, "this cluster" line, the "too close to call" band's two edges
# (speedup 1 -/+ margin) and, for a preset network, the two edges of "what a preset can miss by"
COLUMNS = ("kind", "x_name", "x", "topology", "speedup")
X_NAME = "inter_bandwidth_gbit_s"


def crossover_curve(advice, where: str):
    """The figure for one advice (its scenario, pick, margin and crossovers; crossover.with_crossovers):
    `where` names the current bandwidth's source ("preset tcp-25g", "profile: measured");
    `plotted(fig)` gives what is drawn (COLUMNS)."""
    from runtime_model.advice.crossover import crossover_topology, no_crossover_reason

    sc = advice.scenario
    topology = crossover_topology(advice)
    current = sc.network.inter.bandwidth_Bps * 8 / 1e9
    gbit = np.geomspace(current / SPAN, current * SPAN, POINTS)
    table = PlotTable(COLUMNS)
    fig = new_figure(7.2, 4.6)
    ax = fig.subplots()
    margin = advice.verdict_margin  # s / (1 + m) <= 1 <= s / (1 - m): s within 1 -/+ m
    ax.axhspan(
        1 - margin, 1 + margin, color="0.85", alpha=0.6, lw=0, label=f"too close to call (±{margin:.1%})"
    )
    _mark(table, "too close to call", [None, None], [1 - margin, 1 + margin])
    ax.axhline(1.0, color="black", ls="--", lw=0.9)
    if topology is not None:
        speedups = bandwidth_speedups(sc, topology, gbit, advice.baseline)
        ax.plot(gbit, speedups, color="#C44E52", lw=2.0, label=f"{topology} / All-Reduce")
        _mark(table, "curve", gbit, speedups, topology)
        crossing = next((c for c in advice.crossovers if c.quantity == BANDWIDTH and c.at is not None), None)
        if crossing is not None:
            ax.plot(
                [crossing.at], [1.0], "o", color="black", ms=6, label=f"flips at {crossing.at:,.3g} Gbit/s"
            )
            _mark(table, "flip", [crossing.at], [1.0], topology)
    else:  # say why, on the figure, below the 1x line where a curve would be
        why = textwrap.fill("no curve: " + no_crossover_reason(advice), 70)
        box = {"facecolor": "white", "edgecolor": "0.6", "boxstyle": "round,pad=0.4"}
        ax.text(0.5, 0.25, why, transform=ax.transAxes, ha="center", va="center", fontsize=8, bbox=box)
    ax.axvline(current, color="#4C72B0", lw=1.4, label=f"this cluster: {current:,.3g} Gbit/s ({where})")
    _mark(table, "this cluster", [current], [None])
    if sc.network.inter.source.startswith("preset"):  # a guess: a crossover inside this is too close to call
        ax.axvspan(
            current / PRESET_NETWORK_SPREAD,
            current * PRESET_NETWORK_SPREAD,
            color="#4C72B0",
            alpha=0.08,
            lw=0,
            label=f"what a preset network can miss by ({PRESET_NETWORK_SPREAD:g}x)",
        )
        _mark(
            table,
            "what a preset can miss by",
            [current / PRESET_NETWORK_SPREAD, current * PRESET_NETWORK_SPREAD],
            [None, None],
        )
    ax.set_xscale("log")
    _plain_x(ax)
    ax.set_xlabel("inter-node bandwidth per NIC (Gbit/s, achievable)")
    ax.set_ylabel("speedup over All-Reduce (x)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    title = f"{sc.shape.gpus} GPUs = {sc.shape.nodes} nodes x {sc.shape.gpus_per_node}"
    fig.suptitle(f"Where the verdict flips: {title}", fontsize=11)
    return attach(fig, table)


def _mark(table: PlotTable, kind: str, xs, speedups, topology: str | None = None) -> None:
    """Rows for one thing drawn: its kind, where it sits on the bandwidth axis and its speedup."""
    table.add_points(kind=kind, x_name=X_NAME, x=xs, topology=topology, speedup=speedups)


def _plain_x(ax) -> None:
    """The bandwidth axis labelled 1, 2, 5, 10 ... (not 10^0); the speedup axis stays linear."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())

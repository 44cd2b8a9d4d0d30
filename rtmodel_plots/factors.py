"""The three-factor breakdown: where the time saved (or lost) vs All-Reduce comes from.

Why stacked bars in ms rather than shares: the factors can have opposite signs (heterogeneous links
may cost while the overlap window saves), and an absolute scale shows whether the net saving matters
next to the All-Reduce iteration time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rtmodel_plots.errors import PlotError
from rtmodel_plots.long_form import SWEEP_COLUMNS, PlotTable, attach
from rtmodel_plots.style import FACTOR_COLORS, FACTOR_LABELS, new_figure
from rtmodel_plots.sweeps import best_per_gpus, sweep

# --data: one row per bar and factor; saved_ms is that part's height, "net" the diamond (their sum)
COLUMNS = (*SWEEP_COLUMNS, "factor", "saved_ms")
NET = "net"


def factor_breakdown_bars(
    gpus: int | Sequence[int],
    network: str | None = None,
    model: str = "transformer-base",
    *,
    topology: str | None = None,
    cluster: str | None = None,
    topologies: Sequence[str] | None = None,
    **preset_kw,
):
    """The factors (overlap window, heterogeneous links, compute variance, uneven exchanges) as stacked
    bars, in ms.

    One n: a bar per topology (inapplicable ones leave an empty slot marked n/a). Several n: a bar
    per n for `topology`, or for the fastest topology at each n if none is named. Each part is what
    that factor saves per iteration vs All-Reduce (negative = costs); a black diamond marks the net
    saving (= All-Reduce time - topology time) with the speedup written above. Losses larger than
    the All-Reduce time itself (more than 2x slower) are cut at the axis and labelled, so that one
    hopeless topology does not flatten the rest. `plotted(fig)` gives the bars' numbers (COLUMNS;
    empty for an n/a slot).
    """
    many = not isinstance(gpus, int | np.integer)
    gpus_list = sorted(set(int(g) for g in (gpus if many else [gpus])))
    if not gpus_list:
        raise PlotError("no GPU counts given")
    topo_filter = [topology] if (many and topology) else topologies
    df = sweep(gpus_list, model=model, network=network, cluster=cluster, topologies=topo_filter, **preset_kw)
    bars, names, xlabel, what = _bar_rows(df, gpus_list, many, topology)
    table = _table(bars)
    fig = new_figure(max(6.4, 1.1 * len(names) + 2.6), 5.0)
    ax = fig.subplots()
    x = np.arange(len(names))
    pos_base, neg_base = _stack_factors(ax, x, bars)
    total = bars["saved_ms"].to_numpy(dtype=float)
    ok = np.isfinite(total)
    floor = -float(np.nanmax(bars["allreduce_ms"])) if ok.any() else -1.0  # a loss of T_AR = 2x slower
    low = max(float(neg_base.min()), floor)
    high = max(float(pos_base.max()), float(np.nanmax(total)) if ok.any() else 0.0, 0.0)
    span = max(high - low, 1e-9)
    clipped = neg_base < floor
    inside = ok & ~clipped
    ax.plot(
        x[inside], total[inside], "D", color="black", ms=6, label="net saving (sum of the parts)", zorder=5
    )
    if (ok & clipped).any():
        ax.plot(
            x[ok & clipped],
            np.full((ok & clipped).sum(), floor + 0.015 * (0 - floor)),
            "v",
            color="black",
            ms=7,
            label="net saving below the axis",
            zorder=5,
        )
    _label_bars(ax, x, bars, (ok, clipped, pos_base), floor, span, many and topology is None, many)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, names, rotation=0 if many else 15, ha="center" if many else "right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("time saved vs All-Reduce (ms / iteration)")
    ax.set_ylim(low - 0.04 * span if low < 0 else -0.04 * span, high + 0.24 * span)
    ax.grid(True, axis="y", alpha=0.3)
    fig.legend(loc="outside lower center", ncol=4, fontsize=8.5, frameon=False)
    where = cluster or network or "ib-100"
    fig.suptitle(f"Where the speedup comes from: {model} on {where}\n{what}", fontsize=10.5)
    return attach(fig, table)


def _bar_rows(df, gpus_list: list[int], many: bool, topology: str | None):
    """(one sweep row per bar, the bars' names, the x-axis label, what the bars show) for the title."""
    if many:
        bars = best_per_gpus(df) if topology is None else df[df["topology"] == topology].sort_values("gpus")
        bars = bars.set_index("gpus").reindex(gpus_list).reset_index()
        what = topology or "the fastest topology Decent-DP runs at each n (what advise picks from)"
        return bars, [str(g) for g in gpus_list], "GPUs (n)", what
    bars = df.reset_index(drop=True)
    what = f"n = {gpus_list[0]}, All-Reduce {bars['allreduce_ms'].iloc[0]:.1f} ms / iteration"
    return bars, list(bars["topology"]), "topology", what


def _table(bars) -> PlotTable:
    """Each bar's parts as `_stack_factors` stacks them, and its net saving (the diamond)."""
    table = PlotTable(COLUMNS)
    for row in bars.itertuples():
        for factor in (*FACTOR_COLORS, NET):
            table.add(
                x_name="gpus",
                x=row.gpus,
                topology=row.topology,
                iteration_ms=row.topology_ms,
                speedup=row.speedup,
                factor=factor,
                saved_ms=getattr(row, "saved_ms" if factor == NET else f"{factor}_ms"),
            )
    return table


def _label_bars(ax, x, bars, marks, floor: float, span: float, name_it: bool, many: bool) -> None:
    """Above each bar its net saving and speedup (its topology when `name_it`; at one n, "not picked" for
    a library Decent-DP does not run), "n/a" in an empty slot, "off scale" on a bar cut at the axis.
    marks: (which bars have a value, which are cut, the tops of their positive stacks)."""
    ok, clipped, pos_base = marks
    for xi, row, good, top, cut in zip(x, bars.itertuples(), ok, pos_base, clipped, strict=True):
        if not good:
            ax.text(xi, 0.02 * span, "n/a", ha="center", va="bottom", fontsize=8.5, color="0.4")
            continue
        label = f"{row.saved_ms:+.1f} ms\n{row.speedup:.2f}x"
        if not many and not row.runnable:
            label += f"\n{row.library}: not picked"
        if name_it:
            label = f"{row.topology}\n" + label
        ax.text(xi, max(top, row.saved_ms, 0.0) + 0.03 * span, label, ha="center", va="bottom", fontsize=8.5)
        if cut:
            ax.text(
                xi,
                floor + 0.06 * span,
                "off scale",
                ha="center",
                va="bottom",
                fontsize=7,
                color="white",
                fontweight="bold",
            )


def _stack_factors(ax, x: np.ndarray, bars) -> tuple[np.ndarray, np.ndarray]:
    """Stack each factor's saving on the positive side and its cost on the negative side of each bar;
    returns the tops of the two stacks (pos_base >= 0 >= neg_base)."""
    pos_base = np.zeros(len(x))
    neg_base = np.zeros(len(x))
    for factor in FACTOR_COLORS:
        v = np.nan_to_num(bars[f"{factor}_ms"].to_numpy(dtype=float))
        ax.bar(
            x,
            v,
            0.62,
            bottom=np.where(v >= 0, pos_base, neg_base),
            color=FACTOR_COLORS[factor],
            label=FACTOR_LABELS[factor],
            edgecolor="white",
            lw=0.6,
        )
        pos_base += np.where(v >= 0, v, 0)
        neg_base += np.where(v < 0, v, 0)
    return pos_base, neg_base

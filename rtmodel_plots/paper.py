"""The model next to the per-iteration times published by Wang et al. (ICLR 2025, Figure 6).

Why published and predicted bars side by side with the signed error on top: the paper gives times,
not ratios, so the check is on the absolute numbers the model produces, cluster by cluster.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rtmodel_plots.errors import PlotError
from rtmodel_plots.long_form import PlotTable, attach
from rtmodel_plots.style import new_figure, topology_style

# --data: one row per bar (bar: published or predicted); error = predicted / published - 1, the label
# above a predicted bar (empty where none is written)
COLUMNS = ("cluster", "x_name", "x", "topology", "bar", "iteration_ms", "error")


def paper_comparison(df: pd.DataFrame):
    """Model vs the paper's published per-iteration times (`rtmodel_literature.paper.compare()`), per cluster.

    Per GPU count, published (hatched) and predicted (solid) bars per method, the signed error of
    the prediction written above it. Source: Wang et al., ICLR 2025, Figure 6. `plotted(fig)` gives the
    bars' numbers (COLUMNS).
    """
    need = {"cluster", "gpus", "method", "published_ms", "predicted_ms", "error"}
    if df is None or df.empty or not need <= set(df.columns):
        raise PlotError(f"paper comparison needs a non-empty frame with columns {sorted(need)}")
    from matplotlib.patches import Patch

    table = PlotTable(COLUMNS)
    clusters = list(dict.fromkeys(df["cluster"]))
    methods = list(dict.fromkeys(df["method"]))
    fig = new_figure(5.4 * len(clusters) + 0.4, 4.8)
    axes = fig.subplots(1, len(clusters), squeeze=False)[0]
    width = 0.8 / (2 * len(methods))
    for ax, cl in zip(axes, clusters, strict=True):
        part = df[df["cluster"] == cl]
        ns = sorted(part["gpus"].unique())
        top = np.nanmax(part[["published_ms", "predicted_ms"]].to_numpy(dtype=float))
        for mi, method in enumerate(methods):
            color = topology_style(method)[0] if method != "allreduce" else "#333333"
            rows = part[part["method"] == method].set_index("gpus").reindex(ns)
            base = np.arange(len(ns)) - 0.4 + (2 * mi) * width
            ax.bar(
                base + width / 2,
                rows["published_ms"],
                width,
                color=color,
                alpha=0.35,
                hatch="///",
                edgecolor=color,
            )
            ax.bar(base + 1.5 * width, rows["predicted_ms"], width, color=color)
            for xb, pred, err in zip(base + 1.5 * width, rows["predicted_ms"], rows["error"], strict=True):
                if np.isfinite(pred) and np.isfinite(err):
                    ax.text(
                        xb,
                        pred + 0.015 * top,
                        f"{err:+.0%}",
                        ha="center",
                        va="bottom",
                        fontsize=8,
                        rotation=90,
                    )
            _record(table, cl, method, ns, rows)
        ax.set_xticks(np.arange(len(ns)), [str(n) for n in ns])
        ax.set_xlabel("GPUs (n)")
        ax.set_ylabel("per-iteration time (ms)")
        ax.set_ylim(0, top * 1.22)
        med = np.nanmedian(np.abs(part["error"]))
        ax.set_title(f"{cl}  (median |error| {med:.0%})", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    handles = [Patch(color=topology_style(m)[0] if m != "allreduce" else "#333333", label=m) for m in methods]
    handles += [
        Patch(fc="white", ec="0.3", hatch="///", label="published"),
        Patch(fc="0.3", label="predicted (label: error)"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8.5, frameon=False)
    fig.suptitle(
        "Model vs published per-iteration times (Wang et al., ICLR 2025, Fig. 6; Transformer, "
        "25k-token batch)",
        fontsize=10.5,
    )
    return attach(fig, table)


def _record(table: PlotTable, cluster: str, method: str, ns, rows: pd.DataFrame) -> None:
    """A method's published and predicted bars at each n of a cluster, and the error labels written."""
    common = {"cluster": cluster, "x_name": "gpus", "x": ns, "topology": method}
    table.add_points(**common, bar="published", iteration_ms=rows["published_ms"], error=None)
    pred, err = rows["predicted_ms"].to_numpy(dtype=float), rows["error"].to_numpy(dtype=float)
    labelled = np.where(np.isfinite(pred) & np.isfinite(err), err, np.nan)
    table.add_points(**common, bar="predicted", iteration_ms=pred, error=labelled)

"""Predicted vs measured (parity), drawn from the pairs the caller gives.

Why a parity plot with ±5% / ±10% bands: the model is judged on mean per-iteration time (throughput),
and whether the error stays inside the advisor's too-close-to-call margin is what matters, whatever
the scale. Points whose `source` is not "measured" are kept but must be flagged by the caller.
Why the figure takes lists, not a results file: reading validation results is validation's
(`rtmodel_validation.results.read_parity_points`); the shell or a notebook reads them and passes the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rtmodel_plots.errors import PlotError
from rtmodel_plots.long_form import PlotTable, attach
from rtmodel_plots.style import TOPOLOGY_STYLE, new_figure, plain_log_axes, topology_style

# --data: one row per point drawn (pairs that are not finite and positive are left out, as in the figure);
# error = predicted / measured - 1
COLUMNS = ("label", "measured", "predicted", "unit", "error")


def parity(
    predicted: Sequence[float],
    measured: Sequence[float],
    labels: Sequence[str] | None = None,
    *,
    unit: str = "ms",
    title: str = "Predicted vs measured per-iteration time",
    note: str | None = None,
    reference: str = "measured",
    quantity: str = "mean per-iteration time",
):
    """Predicted vs measured with the y = x line and ±5% / ±10% bands; points coloured by label.

    A box gives the share of points within 5% and 10% and the median |error| (error =
    predicted / measured - 1). Axes are log-log when the values span more than a decade.
    `reference` names the x-axis data (e.g. "published"); `note` is printed in red under the title
    (say there when the points were not measured). `plotted(fig)` gives the points drawn
    (COLUMNS).
    """
    p, m, labels = _drawable(predicted, measured, labels)
    table = PlotTable(COLUMNS)
    err = p / m - 1
    fig = new_figure(5.8, 5.4)
    ax = fig.subplots()
    lo, hi = min(p.min(), m.min()), max(p.max(), m.max())
    log = hi / lo > 10
    lo, hi = (
        (lo / 1.3, hi * 1.3)
        if log
        else (max(0.0, lo - 0.12 * (hi - lo) - 0.05 * hi), hi + 0.12 * (hi - lo) + 0.05 * hi)
    )
    xs = np.geomspace(max(lo, 1e-12), hi, 200) if log else np.linspace(lo, hi, 200)
    ax.fill_between(xs, xs * 0.9, xs * 1.1, color="#4C72B0", alpha=0.10, lw=0, label="±10%")
    ax.fill_between(xs, xs * 0.95, xs * 1.05, color="#4C72B0", alpha=0.20, lw=0, label="±5%")
    ax.plot(xs, xs, color="black", lw=1.0, label=f"predicted = {reference}")
    for k, lab in enumerate(dict.fromkeys(labels)):
        sel = labels == lab
        color, marker = (
            topology_style(lab)[:2]
            if lab in TOPOLOGY_STYLE
            else ("#333333" if lab == "allreduce" else f"C{k}", "o" if lab != "allreduce" else "s")
        )
        ax.scatter(
            m[sel],
            p[sel],
            s=34,
            color=color,
            marker=marker,
            edgecolor="white",
            lw=0.6,
            zorder=3,
            label=str(lab),
        )
        table.add_points(label=str(lab), measured=m[sel], predicted=p[sel], unit=unit, error=err[sel])
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_axes(ax)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel(f"{reference} {quantity} ({unit})")
    ax.set_ylabel(f"predicted {quantity} ({unit})")
    ax.grid(True, alpha=0.3)
    _stats_box(ax, err)
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=11)
    if note:
        ax.set_title(note, fontsize=8.5, color="#8B0000")
    return attach(fig, table)


def _drawable(predicted, measured, labels):
    """(predicted, measured, labels) of the pairs drawn: finite and positive; PlotError for lists that do
    not pair up or leave nothing to draw."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    if p.shape != m.shape or p.ndim != 1:
        raise PlotError(f"predicted and measured must be equal-length lists, got {p.shape} and {m.shape}")
    ok = np.isfinite(p) & np.isfinite(m) & (p > 0) & (m > 0)
    if not ok.any():
        raise PlotError("no finite, positive (predicted, measured) pairs to plot")
    labels = np.asarray(list(labels) if labels is not None else ["run"] * len(p), dtype=object)
    if labels.shape != p.shape:
        raise PlotError(f"labels must have one entry per point, got {labels.shape[0]} for {p.shape[0]}")
    return p[ok], m[ok], labels[ok]


def _stats_box(ax, err: np.ndarray) -> None:
    """The share of points within 5% and 10% and the median |error|, bottom right."""
    stats = (
        f"{len(err)} points\nwithin ±5%: {np.mean(np.abs(err) <= 0.05):.0%}\n"
        f"within ±10%: {np.mean(np.abs(err) <= 0.10):.0%}\nmedian |error|: {np.median(np.abs(err)):.1%}"
    )
    ax.text(
        0.97,
        0.03,
        stats,
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=8.5,
        bbox={"boxstyle": "round,pad=0.35", "fc": "white", "ec": "0.7"},
    )

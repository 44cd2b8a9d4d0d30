"""How every figure looks and is written: fixed colours per topology and factor, shared axes, `save`.

Why Figures built with the object-oriented API (`matplotlib.figure.Figure`, never pyplot): no global
state and no GUI backend (saving renders with Agg), nothing leaks between calls, and a notebook shows
the returned Figure as it is. matplotlib is imported inside the functions so that importing the CLI
(`rtmodel advise`) never pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rtmodel_plots.errors import PlotError

FIGURE_FORMATS = ("png", "svg")
FACTOR_COLORS = {"overlap": "#4C72B0", "links": "#DD8452", "variance": "#55A868", "uneven": "#8172B3"}
FACTOR_LABELS = {
    "overlap": "overlap window",
    "links": "heterogeneous links",
    "variance": "compute variance",
    "uneven": "uneven exchanges",
}
TOPOLOGY_STYLE = {  # (colour, marker, line style), fixed so that every figure draws a topology the same way
    "complete": ("#8C8C8C", "s", "-"),
    "ring": ("#DD8452", "v", "-"),
    "one-peer-exp": ("#4C72B0", "o", "-"),
    "alternating-exp-ring": ("#C44E52", "D", "-"),
    "base-2": ("#55A868", "^", "--"),  # equals one-peer-exp at n = 2^p: dashed so both stay visible
    "static-exp": ("#8172B3", "P", "-"),
}
FALLBACK_COLORS = ("#937860", "#DA8BC3", "#CCB974", "#64B5CD")


def topology_style(name: str) -> tuple[str, str, str]:
    """(colour, marker, line style) of a topology; unknown names get a stable fallback."""
    if name in TOPOLOGY_STYLE:
        return TOPOLOGY_STYLE[name]
    return FALLBACK_COLORS[sum(map(ord, name)) % len(FALLBACK_COLORS)], "X", "-."


def new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def log2_gpu_axis(ax, gpus: Sequence[int]) -> None:
    """GPU counts on a log2 x axis, each swept n a labelled tick."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log", base=2)
    ticks = sorted(set(int(g) for g in gpus))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks], rotation=45 if len(ticks) > 8 else 0)
    ax.set_xlim(ticks[0] / 1.25, ticks[-1] * 1.25)
    ax.set_xlabel("GPUs (n)")


def speedup_y_axis(ax, speedups: Sequence[float]) -> None:
    """Log2 y (a 2x win and a 2x loss look alike) when speedups span more than 4x; ticks as plain numbers."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    vals = np.asarray([v for v in speedups if np.isfinite(v) and v > 0], dtype=float)
    lo = min(vals.min(), 0.9) if vals.size else 0.9
    hi = max(vals.max(), 1.1) if vals.size else 1.1
    if hi / lo > 4:
        ax.set_yscale("log", base=2)
        subs = (1.0, 1.5) if hi / lo < 20 else (1.0,)  # 1, 1.5, 2, 3, 4, 6 ... on narrow ranges
        ax.yaxis.set_major_locator(LogLocator(base=2, subs=subs, numticks=12))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylim(lo / 1.25, hi * 1.25)
    else:
        pad = 0.06 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)


def lines_legend(fig, handles) -> None:
    """The figure's legend of its lines, under the panels, at most four to a row."""
    labels = [h.get_label() for h in handles]
    fig.legend(
        handles, labels, loc="outside lower center", ncol=min(len(handles), 4), fontsize=9, frameon=False
    )


def plain_log_axes(ax) -> None:
    """Log axes labelled 10, 20, 50, 100 ... instead of 2x10^1."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def save(fig, path: str | Path) -> Path:
    """Write a Figure as PNG or SVG (chosen by the extension); PlotError for any other extension.

    Rendered to bytes first, then written whole or not at all (rtmodel_util.files.write_atomic, the one
    writer of every output): on a full disk the old figure stays and no partial file is left."""
    from rtmodel_util.files import write_atomic

    path = Path(path)
    ext = path.suffix.lower().lstrip(".")
    if ext not in FIGURE_FORMATS:
        raise PlotError(f"output must end in .png or .svg, got '{path.name}'")
    write_atomic(path, figure_bytes(fig, ext))
    return path


def figure_bytes(fig, fmt: str) -> bytes:
    """A Figure rendered as `fmt` ("png" or "svg"), in memory."""
    import io

    if fmt not in FIGURE_FORMATS:
        raise PlotError(f"a figure is written as {' or '.join(FIGURE_FORMATS)}, not {fmt!r}")
    buf = io.BytesIO()
    fig.savefig(
        buf, format=fmt, dpi=150 if fmt == "png" else None, bbox_inches="tight"
    )  # keep wide legends and titles whole
    return buf.getvalue()

"""Predicted vs measured (parity), and the validation results it is drawn from.

Why a parity plot with ±5% / ±10% bands: the model is judged on mean per-iteration time (throughput),
and whether the error stays inside the advisor's too-close-to-call margin is what matters, whatever
the scale. Points whose `source` is not "measured" are kept but must be flagged by the caller.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from rtmodel_plots.errors import PlotError
from rtmodel_plots.style import TOPOLOGY_STYLE, new_figure, plain_log_axes, topology_style


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
    (say there when the points were not measured).
    """
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
    p, m, labels = p[ok], m[ok], labels[ok]
    err = p / m - 1
    fig = new_figure(5.8, 5.4)
    ax = fig.subplots()
    lo, hi = min(p.min(), m.min()), max(p.max(), m.max())
    log = hi / lo > 10
    lo, hi = (lo / 1.3, hi * 1.3) if log else (max(0.0, lo - 0.12 * (hi - lo) - 0.05 * hi), hi + 0.12 * (hi - lo)
                                                 + 0.05 * hi)
    xs = np.geomspace(max(lo, 1e-12), hi, 200) if log else np.linspace(lo, hi, 200)
    ax.fill_between(xs, xs * 0.9, xs * 1.1, color="#4C72B0", alpha=0.10, lw=0, label="±10%")
    ax.fill_between(xs, xs * 0.95, xs * 1.05, color="#4C72B0", alpha=0.20, lw=0, label="±5%")
    ax.plot(xs, xs, color="black", lw=1.0, label=f"predicted = {reference}")
    for k, lab in enumerate(dict.fromkeys(labels)):
        sel = labels == lab
        color, marker = topology_style(lab)[:2] if lab in TOPOLOGY_STYLE else (
            "#333333" if lab == "allreduce" else f"C{k}", "o" if lab != "allreduce" else "s")
        ax.scatter(m[sel], p[sel], s=34, color=color, marker=marker, edgecolor="white", lw=0.6, zorder=3,
                   label=str(lab))
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
    stats = (f"{len(p)} points\nwithin ±5%: {np.mean(np.abs(err) <= 0.05):.0%}\n"
             f"within ±10%: {np.mean(np.abs(err) <= 0.10):.0%}\nmedian |error|: {np.median(np.abs(err)):.1%}")
    ax.text(0.97, 0.03, stats, transform=ax.transAxes, ha="right", va="bottom", fontsize=8.5,
            bbox={"boxstyle": "round,pad=0.35", "fc": "white", "ec": "0.7"})
    ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=11)
    if note:
        ax.set_title(note, fontsize=8.5, color="#8B0000")
    return fig



def load_validation_results(path: str | Path) -> pd.DataFrame:
    """Parity points from a results JSONL: columns label, method, predicted_ms, measured_ms, source.

    Reads the records `rtmodel validate` appends (kind "rtmodel-validation": an "allreduce" and a
    "decentralized" comparison, each with predicted_mean_s and measured.mean_s — the mean per-iteration
    time, i.e. throughput, which validations are judged on), and a simple flat form for results from
    elsewhere, one JSON object per line:
        {"method": "one-peer-exp", "predicted_mean_s": 0.051, "measured_mean_s": 0.049,
         "label": "16 GPUs", "source": "measured"}
    Blank lines and lines starting with # are skipped. "source" (default "measured") is carried
    through so that a plot can say when its points were not measured.

    Why not `validation.results.read_records`: that reader skips lines that are not JSON and every
    line not of kind "rtmodel-validation" (the flat form above); a parity plot must fail on a bad
    line instead of silently drawing fewer points.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PlotError(f"cannot read validation results '{path}': {exc.strerror or exc}") from None
    points = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PlotError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
        if not isinstance(rec, dict):
            raise PlotError(f"{path}:{lineno}: expected a JSON object per line")
        points.extend(_points_from_record(rec))
    if not points:
        raise PlotError(f"{path}: no records with predicted and measured mean times "
                        "(rtmodel validate records, or lines with predicted_mean_s and measured_mean_s)")
    return pd.DataFrame(points)


def _number(x) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _pair(d: dict) -> tuple[float, float] | None:
    """(predicted mean s, measured mean s) of a comparison dict, in either accepted spelling."""
    pred = _number(d.get("predicted_mean_s"))
    meas = _number(d.get("measured_mean_s"))
    if meas is None and isinstance(d.get("measured"), dict):
        meas = _number(d["measured"].get("mean_s"))
    return (pred, meas) if pred is not None and meas is not None else None


def _label(rec: dict) -> str:
    if rec.get("label"):
        return str(rec["label"])
    shape = rec.get("shape")
    if isinstance(shape, dict) and "world_size" in shape:
        return f"{shape['world_size']} ranks / {shape.get('nodes', '?')} node(s)"
    return ""


def _points_from_record(rec: dict) -> list[dict]:
    label, source = _label(rec), str(rec.get("source", "measured"))
    pair = _pair(rec)
    if pair is not None:
        method = str(rec.get("method") or rec.get("topology") or "run")
        return [{"label": label, "method": method, "predicted_ms": pair[0] * 1e3, "measured_ms": pair[1] * 1e3,
                 "source": source}]
    out = []
    for key, name in (("allreduce", "allreduce"), ("decentralized", rec.get("topology"))):
        val = rec.get(key)
        if isinstance(val, dict) and (pair := _pair(val)) is not None:
            out.append({"label": label, "method": str(val.get("name") or name or key),
                        "predicted_ms": pair[0] * 1e3, "measured_ms": pair[1] * 1e3, "source": source})
    return out

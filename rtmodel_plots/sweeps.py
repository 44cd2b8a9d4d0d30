"""The data layer of the figures: presets swept over GPU counts into tidy DataFrames, and what-ifs.

Why a tidy frame (one row per GPU count and topology, times in ms): every figure draws from the same
numbers, and a notebook can tabulate or check them directly. Topologies that do not fit a shape
(e.g. one-peer-exp at a non-power-of-2 n) are NaN there and show as gaps. "Pays" means the best
topology is at least `runtime_model.core.defaults.MARGIN` faster: the advisor's too-close-to-call margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from rtmodel_plots.errors import PlotError
from runtime_model.core.defaults import MARGIN
from runtime_model.core.scenario import Scenario
from runtime_model.prediction.local_sgd import LocalSgd
from runtime_model.topology.registry import TopologyNotApplicable


@dataclass(frozen=True)
class WhatIf:
    """One what-if: multipliers on the inter-node link and on compute, and a bucket size (None = preset's)."""

    label: str
    inter_bandwidth: float = 1.0
    inter_latency: float = 1.0
    compute: float = 1.0
    bucket_cap_mb: float | None = None

    def apply(self, scenario: Scenario) -> Scenario:
        sc = scenario
        if self.inter_bandwidth != 1.0 or self.inter_latency != 1.0:
            sc = replace(sc, network=sc.network.scaled(self.inter_bandwidth, self.inter_latency))
        if self.compute != 1.0:
            sc = sc.compute_scaled(self.compute)
        return sc


DEFAULT_WHAT_IFS = (
    WhatIf("as configured"),
    WhatIf("inter-node bandwidth x0.5", inter_bandwidth=0.5),
    WhatIf("inter-node bandwidth x2", inter_bandwidth=2.0),
    WhatIf("compute x2 (slower GPU / 2x batch)", compute=2.0),
    WhatIf("buckets 5 MB", bucket_cap_mb=5.0),
    WhatIf("buckets 100 MB", bucket_cap_mb=100.0),
)


def preset_scenario(
    gpus: int,
    *,
    model: str = "transformer-base",
    network: str | None = None,
    cluster: str | None = None,
    gpus_per_node: int | None = None,
    batch_per_gpu: float | dict[str, float] | None = None,
    **preset_kw,
) -> Scenario:
    """A preset scenario at `gpus`, with GPUs per node capped at n (8 GPUs on 8-GPU nodes = one node).

    batch_per_gpu: weak scaling (global batch = batch_per_gpu x n, in the model's unit; a dict gives
    one value per model); otherwise the preset's fixed global batch (strong scaling, as in the
    paper's Figure 6).
    """
    from runtime_model.presets import to_model as presets
    library = preset_kw.pop("library", None) or presets.builtin_library()
    clusters = library.clusters
    if gpus_per_node is not None:
        k = gpus_per_node  # 0 is a mistake for presets.resolve to name, not "not given"
    else:
        k = clusters[cluster].gpus_per_node if cluster in clusters else library.defaults.gpus_per_node
    if isinstance(batch_per_gpu, dict):
        if model not in batch_per_gpu:
            raise PlotError(f"batch_per_gpu has no entry for model '{model}'")
        batch_per_gpu = batch_per_gpu[model]
    if batch_per_gpu is not None:
        if not batch_per_gpu > 0:
            raise PlotError(f"--batch-per-gpu must be > 0, got {batch_per_gpu}")
        preset_kw["global_batch"] = batch_per_gpu * gpus
    request = presets.PresetRequest(
        gpus, gpus_per_node=min(k, gpus), network=network, cluster=cluster, model=model, **preset_kw
    )
    choice = presets.resolve(request, library=library)
    return presets.scenario_from_choice(choice, library)


def sweep(
    gpus_list: Iterable[int],
    *,
    model: str = "transformer-base",
    network: str | None = None,
    topologies: Sequence[str] | None = None,
    transform: Callable[[Scenario], Scenario] | None = None,
    local_sgd: Sequence[LocalSgd] | None = None,
    factors: bool = True,
    **preset_kw,
) -> pd.DataFrame:
    """Advise at every n; one row per (gpus, topology), times in ms, NaN where a topology does not fit.

    Columns: gpus, topology, family ("gossip", or "local-sgd" for each `local_sgd` configuration), applicable,
    reason, allreduce_ms, topology_ms, speedup, overlap_ms, links_ms, variance_ms, uneven_ms, saved_ms (= the
    factors' sum = allreduce_ms - topology_ms; NaN for local SGD, which has no factors), runnable (Decent-DP
    runs it: what advise picks from) and library (what runs it: Decent-DP, SGP, BlueFog, local SGD).
    `transform` edits each scenario before advising (what-ifs); `preset_kw` goes to `preset_scenario`
    (cluster, gpu, gpus_per_node, batch_per_gpu, ...).
    Without `factors` the factor columns are NaN and the times come from the means alone
    (topology_predictions.predict_means, the same numbers): what a figure of speedups draws, at about
    half the recurrences' work.
    """
    from runtime_model.advice.families import local_sgd_rows
    from runtime_model.prediction.topology_predictions import predict_many, predict_means

    ns = [int(n) for n in gpus_list]
    scenarios = [preset_scenario(n, model=model, network=network, **preset_kw) for n in ns]  # cluster in it
    if transform is not None:
        scenarios = [transform(sc) for sc in scenarios]
    rows = []
    # one pass over n: the recurrences that share draws run together; the times alone (no consensus, NIC
    # bytes or verdict: topology_predictions.py)
    names = list(topologies) if topologies else None
    if factors:
        plans, preds, _ = predict_many(scenarios, names, spreads=False)
        timed = ((p.mean_s, p.factors) for p in preds)
    else:
        plans, means = predict_means(scenarios, names)
        timed = ((mean, None) for mean in means)
    for n, (sc, ar, models) in zip(ns, plans, strict=True):
        ar_ms = ar.mean_s * 1e3
        for name, m in models.items():
            applicable = not isinstance(m, TopologyNotApplicable)
            mean_s, f = next(timed) if applicable else (math.nan, None)
            rows.append(
                {
                    "gpus": n,
                    "topology": name,
                    "family": "gossip",
                    "applicable": applicable,
                    "reason": m.decent_dp_note if applicable else str(m),
                    "allreduce_ms": ar_ms,
                    "topology_ms": mean_s * 1e3,
                    "speedup": ar.mean_s / mean_s if applicable else math.nan,
                    "overlap_ms": f.overlap_s * 1e3 if f else math.nan,
                    "links_ms": f.links_s * 1e3 if f else math.nan,
                    "variance_ms": f.variance_s * 1e3 if f else math.nan,
                    "uneven_ms": f.uneven_s * 1e3 if f else math.nan,
                    "saved_ms": f.total_s * 1e3 if f else math.nan,
                    "runnable": applicable and m.decent_dp_runnable,  # what advise can pick (Decent-DP runs it)
                    "library": m.exchange.library if applicable else None,
                }
            )
        rows.extend(_local_sgd_row(n, ar_ms, r) for r in local_sgd_rows(sc, ar.mean_s, list(local_sgd or [])))
    if not rows:
        raise PlotError("no GPU counts to sweep")
    return pd.DataFrame(rows)


def _local_sgd_row(n: int, allreduce_ms: float, row) -> dict:
    """A local-SGD configuration's sweep row (families.LocalSgdRow): no factors, no reason."""
    nan = math.nan
    return {
        "gpus": n,
        "topology": row.prediction.name,
        "family": "local-sgd",
        "applicable": True,
        "reason": None,
        "allreduce_ms": allreduce_ms,
        "topology_ms": row.prediction.mean_s * 1e3,
        "speedup": row.speedup,
        **dict.fromkeys(("overlap_ms", "links_ms", "variance_ms", "uneven_ms", "saved_ms"), nan),
        "runnable": True,
        "library": "local SGD",
    }


def best_per_gpus(df: pd.DataFrame) -> pd.DataFrame:
    """Per n, the row of the fastest applicable gossip topology that Decent-DP runs (highest speedup):
    what advise picks from, so no plot credits a row the verdict would not name (SGP's and BlueFog's
    rows are drawn, not picked); local SGD, another training algorithm, is drawn beside it but never
    marks where decentralization pays."""
    ok = df[df["applicable"] & np.isfinite(df["speedup"])]
    if "family" in ok:
        ok = ok[ok["family"] == "gossip"]
    if "runnable" in ok:
        ok = ok[ok["runnable"].astype(bool)]
    return ok.loc[ok.groupby("gpus")["speedup"].idxmax()].sort_values("gpus").reset_index(drop=True)


def pays_from(df: pd.DataFrame, margin: float = MARGIN) -> int | None:
    """Smallest n from which the best topology is at least `margin` faster at every larger n swept."""
    best = best_per_gpus(df)
    wins = (best["speedup"] >= 1 + margin).to_numpy()
    if not wins.size or not wins[-1]:
        return None
    i = len(wins) - 1
    while i > 0 and wins[i - 1]:
        i -= 1
    return int(best["gpus"].iloc[i])

"""The model next to the paper's published per-iteration times (our cited copy in data/).
The paper's DDP runs with gradient_as_bucket_view=True (WangZesen/Decentralized-Training-Exp
transformer/src/allreduce_train.py: DDP(model, broadcast_buffers=False, gradient_as_bucket_view=True)),
so its rows are priced that way.

Why: a sanity check of the presets, not a tuning target. Each cluster is a preset (physical data
plus one MFU figure from gpus.toml); no constant is fitted per row.
"""

from __future__ import annotations

import io
from importlib import resources

import pandas as pd

from runtime_model.advice.advisor import advise
from runtime_model.presets import to_model as presets

# The paper's Figure 6 columns and the topology each corresponds to in our model.
COLUMNS = {"allreduce_ms": "allreduce", "decent_exp_ms": "one-peer-exp", "decent_aer_ms": "alternating-exp-ring"}


def published() -> pd.DataFrame:
    text = resources.files("rtmodel_literature.data").joinpath("paper_measurements.csv").read_text()
    return pd.read_csv(io.StringIO(text), comment="#")


def paper_advice(rec, topologies: list[str], model: str = "transformer-base", global_batch: float = 25_000):
    """The advice for one published row's cluster and size, as the paper ran it (DDP with the bucket view)."""
    choice = presets.resolve(presets.PresetRequest(rec.gpus, cluster=rec.cluster, model=model, global_batch=global_batch, ddp_bucket_view=True))
    return advise(presets.scenario_from_choice(choice), topologies=topologies)


def compare(model: str = "transformer-base", global_batch: float = 25_000) -> pd.DataFrame:
    """One row per (cluster, gpus, method): published ms, predicted ms, signed relative error."""
    rows = []
    for rec in published().itertuples():
        adv = paper_advice(rec, ["one-peer-exp", "alternating-exp-ring"], model, global_batch)
        predicted = {"allreduce": adv.allreduce.mean_s}
        predicted.update({r.topology: r.prediction.mean_s for r in adv.rows if r.applicable})
        for col, topo in COLUMNS.items():
            measured = getattr(rec, col)
            pred_ms = predicted[topo] * 1e3 if topo in predicted else float("nan")
            rows.append({
                "cluster": rec.cluster, "gpus": rec.gpus, "method": topo,
                "published_ms": measured, "predicted_ms": pred_ms,
                "error": (pred_ms - measured) / measured,
            })
    return pd.DataFrame(rows)


def speedup_errors(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (cluster, gpus, topology): published and predicted speedup over All-Reduce and the
    relative error of the predicted one (what the advisor's verdict states: confidence.py)."""
    rows = []
    for (cluster, gpus), g in df.groupby(["cluster", "gpus"]):
        pub = dict(zip(g["method"], g["published_ms"], strict=True))
        pred = dict(zip(g["method"], g["predicted_ms"], strict=True))
        for topo in COLUMNS.values():
            if topo == "allreduce":
                continue
            published_x = pub["allreduce"] / pub[topo]
            predicted_x = pred["allreduce"] / pred[topo]
            rows.append({
                "cluster": cluster, "gpus": gpus, "method": topo, "published_x": published_x,
                "predicted_x": predicted_x, "error": (predicted_x - published_x) / published_x,
            })
    return pd.DataFrame(rows)

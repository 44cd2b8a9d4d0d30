"""The model next to the paper's published per-iteration times (our cited copy in data/), each row priced
as the authors' code ran it.

The recipe (WangZesen/accum-adam-nips2024 at 77e43c8, the only public code with Figure 6's launch
shapes: transformer/script/train/16xT4.sh ... 32xA100.sh):
- precision: every transformer config sets `use_amp = false`, and transformer/src/train.py sets
  `torch.backends.cuda.matmul.allow_tf32 = True`: plain fp32 on the T4 (Turing has no TF32), TF32 on the
  A100 (the cluster presets' `precision`);
- DDP: `DDP(model, broadcast_buffers=False, gradient_as_bucket_view=True)`, default 25 MB buckets;
- batch: `max_tokens_per_local_batch = max_tokens_per_batch // world_size` with max_tokens_per_batch =
  25,000 (transformer/src/conf.py), so each GPU gets 25,000 // n tokens (local_tokens).
The 2025 repository WangZesen/Decentralized-Training-Exp sets `use_amp = true`, but has only 4xA40 and
8xA100 scripts, none of Figure 6's T4 shapes; we take the 2024 one (docs/paper.md).

Why: a sanity check of the presets, not a tuning target. Each cluster is a preset (physical data
plus one MFU figure from gpus.toml); no constant is fitted per row.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from importlib import resources

import pandas as pd

from runtime_model.advice.advisor import advise
from runtime_model.presets import to_model as presets

# The paper's Figure 6 columns and the topology each corresponds to in our model.
COLUMNS = {"allreduce_ms": "allreduce", "decent_exp_ms": "one-peer-exp", "decent_aer_ms": "alternating-exp-ring"}


def published() -> pd.DataFrame:
    text = resources.files("rtmodel_literature.data").joinpath("paper_measurements.csv").read_text()
    return pd.read_csv(io.StringIO(text), comment="#")


MAX_TOKENS_PER_BATCH = 25_000  # transformer/config/train/transformer_base.toml: max_token_per_batch


def local_tokens(gpus: int, global_batch: int = MAX_TOKENS_PER_BATCH) -> int:
    """One GPU's token budget as the authors' conf.py computes it: max_tokens_per_batch // world_size."""
    return global_batch // gpus


def paper_choice(
    rec,
    model: str = "transformer-base",
    global_batch: int = MAX_TOKENS_PER_BATCH,
    padding_efficiency: float = 1.0,
):
    """One published row's cluster and size as the paper ran it (the cluster preset's precision, DDP with
    the bucket view, each GPU's integer share of the batch): the resolved presets.PresetChoice.
    `padding_efficiency`: the share of the batch's slots holding real tokens (1: none; see compare)."""
    batch = local_tokens(rec.gpus, global_batch) * rec.gpus
    request = presets.PresetRequest(
        rec.gpus,
        cluster=rec.cluster,
        model=model,
        global_batch=batch,
        ddp_bucket_view=True,
        padding_efficiency=padding_efficiency,
    )
    return presets.resolve(request)


def paper_advice(
    rec,
    topologies: list[str],
    model: str = "transformer-base",
    global_batch: int = MAX_TOKENS_PER_BATCH,
    padding_efficiency: float = 1.0,
):
    """The advice for one published row's cluster and size, as the paper ran it (paper_choice)."""
    choice = paper_choice(rec, model, global_batch, padding_efficiency)
    return advise(presets.scenario_from_choice(choice), topologies=topologies)


def compare(
    model: str = "transformer-base",
    global_batch: int = MAX_TOKENS_PER_BATCH,
    padding: Mapping[int, float] | None = None,
) -> pd.DataFrame:
    """One row per (cluster, gpus, method): published ms, predicted ms, signed relative error.

    `padding`: the padding efficiency at each per-GPU token budget (local_tokens), as `python -m
    profiler.padding` measures it on a corpus. None (the default) prices unpadded batches: the authors'
    sampler pads (transformer/src/data/sampler.py), but their corpus's lengths are not public, so its
    padding is a what-if (docs/paper.md), not part of the checked recipe."""
    rows = []
    for rec in published().itertuples():
        efficiency = 1.0 if padding is None else padding[local_tokens(rec.gpus, global_batch)]
        adv = paper_advice(rec, ["one-peer-exp", "alternating-exp-ring"], model, global_batch, efficiency)
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

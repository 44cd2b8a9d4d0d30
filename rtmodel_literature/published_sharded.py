"""The sharded time model (runtime_model/prediction/sharded.py) next to published FSDP throughputs at
several GPU counts (data/published_sharded.csv: sources, settings and skipped rows in its header).

Why this shape of check: a source's own measurement at its smallest GPU count gives the compute per step
(the model inverted there: the compute C whose predicted step equals the published one), so the other
counts test only what the model adds: the collectives' cost on the preset links, their overlap with the
compute, and the sharded optimizer. Nothing is fitted to the checked rows; every setting (dtypes, units
kept after forward, activation checkpointing) is read from the source's code or tables.

Beside each error, `flat` is the error of predicting no change from the base row (perfect scaling): what a
model that knows nothing of communication scores on the same rows.
`python -m rtmodel_literature.published_sharded` prints the table and the summary.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
from scipy.optimize import brentq

from runtime_model.core.scenario import Bucket, BucketLayout, ClusterShape, Compute, Scenario
from runtime_model.prediction.sharded import ShardedOptions, sharded_prediction
from runtime_model.presets.preset_loading import builtin_library
from runtime_model.presets.to_model import network_preset

DATA = "published_sharded.csv"
ELEMENT_BYTES = 4  # fp32 master parameters: what the optimizer steps on (FSDP's sharded parameters)
OPTIMIZER = "adamw"  # preset_data/traffic.toml: torch AdamW's bytes per parameter per step
DEV, HELD_BACK = "dev", "held-back"


@dataclass(frozen=True)
class Row:
    """One published throughput and the settings the source ran it with (the data file's columns)."""

    series: str
    set: str
    role: str  # "base": gives the compute; "check": predicted
    source: str
    table: str
    gpu: str
    hbm_GBps: float
    network: str
    intra: str
    nics_per_node: int
    gpus_per_node: int
    model: str
    params: int
    layers: int
    block_params: int
    seq_len: int
    micro_batch: int
    method: str
    gather_bytes: int
    reduce_bytes: int
    kept: str  # "root" or "root+last-block"
    forward_share: float
    gpus: int
    tokens_per_s_per_gpu: float

    @property
    def tokens_per_gpu(self) -> int:
        return self.seq_len * self.micro_batch

    @property
    def step_s(self) -> float:
        """The published time per step: the tokens one GPU processes per step at its throughput."""
        return self.tokens_per_gpu / self.tokens_per_s_per_gpu


def rows() -> list[Row]:
    """The data file's rows (comment lines skipped), typed."""
    text = resources.files("rtmodel_literature.data").joinpath(DATA).read_text()
    reader = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))
    out = []
    for raw in reader:
        values = {}
        for name, kind in Row.__annotations__.items():
            cast = {"int": int, "float": float}.get(kind, str)
            values[name] = cast(raw[name])
        out.append(Row(**values))
    return out


def units(row: Row) -> tuple[Bucket, ...]:
    """The FSDP units in gradient-ready order: one per block (the last block first), then the root (the
    embeddings, ready last); each ready when the backward has covered its share of the parameters."""
    sizes = [row.block_params] * row.layers + [row.params - row.layers * row.block_params]
    ready = np.cumsum(sizes) / row.params
    ready[-1] = 1.0
    return tuple(Bucket(s * ELEMENT_BYTES, float(r)) for s, r in zip(sizes, ready, strict=True))


def options(row: Row) -> ShardedOptions:
    """The row's dtypes and units kept after forward (indices in ready order: the root is last, the last
    block first)."""
    root = row.layers
    kept = (0, root) if row.kept == "root+last-block" else (root,)
    return ShardedOptions(gather_bytes=row.gather_bytes, reduce_bytes=row.reduce_bytes, kept_units=kept)


def optimizer_s(row: Row) -> float:
    """The whole model's optimizer step on one GPU (sharded.py divides it by the shards): AdamW's bytes
    per parameter (traffic.toml) at the GPU's streamed memory bandwidth (gpus.toml memory_efficiency)."""
    library = builtin_library()
    per_param = library.traffic(OPTIMIZER).bytes_per_param
    efficiency = library.gpu(row.gpu).memory_efficiency
    return row.params * per_param / (row.hbm_GBps * 1e9 * efficiency)


def scenario(row: Row, compute_s: float) -> Scenario:
    """The row's cluster on the preset links, with `compute_s` of forward + backward per step."""
    layout = units(row)
    net = network_preset(row.network, row.intra, nics_per_node=row.nics_per_node)
    comp = Compute(compute_s * row.forward_share, compute_s * (1 - row.forward_share), optimizer_s(row))
    shape = ClusterShape(row.gpus, row.gpus_per_node)
    return Scenario(shape, net, comp, BucketLayout(layout, layout, ELEMENT_BYTES), description=row.series)


def predicted_step_s(row: Row, compute_s: float) -> float:
    return sharded_prediction(scenario(row, compute_s), row.method, options(row)).mean_s


def base_compute_s(base: Row) -> float:
    """The compute per step at which the model's step on the base row equals the published one (the step
    grows with the compute, so the root is unique)."""
    return brentq(lambda c: predicted_step_s(base, c) - base.step_s, 0.0, base.step_s, xtol=1e-12)


@dataclass(frozen=True)
class Check:
    """One published row next to the model's prediction from its series' base row."""

    row: Row
    base: Row
    compute_s: float
    predicted_step_s: float

    @property
    def predicted_tokens_per_s(self) -> float:
        return self.row.tokens_per_gpu / self.predicted_step_s

    @property
    def error(self) -> float:
        """Predicted over published tokens/s per GPU, minus 1."""
        return self.predicted_tokens_per_s / self.row.tokens_per_s_per_gpu - 1

    @property
    def flat_error(self) -> float:
        """The error of predicting the base row's throughput unchanged."""
        return self.base.tokens_per_s_per_gpu / self.row.tokens_per_s_per_gpu - 1


@lru_cache(maxsize=1)
def all_checks() -> tuple[Check, ...]:
    """Every check row priced from its series' base row (cached)."""
    table = rows()
    bases = {r.series: r for r in table if r.role == "base"}
    out = []
    for series, base in bases.items():
        compute = base_compute_s(base)
        for row in (r for r in table if r.series == series and r.role == "check"):
            out.append(Check(row, base, compute, predicted_step_s(row, compute)))
    return tuple(out)


@dataclass(frozen=True)
class Summary:
    """|error| over a set of checks, in percent, the model's and the flat prediction's."""

    rows: int
    mean_abs_pct: float
    max_abs_pct: float
    flat_mean_abs_pct: float
    flat_max_abs_pct: float


def summary(checks=None, subset: str | None = None) -> Summary:
    """Mean and max |error| (percent) over the checks, or over one `set` (DEV or HELD_BACK)."""
    picked = [c for c in (all_checks() if checks is None else checks) if subset in (None, c.row.set)]
    errors = 100 * np.abs([c.error for c in picked])
    flat = 100 * np.abs([c.flat_error for c in picked])
    return Summary(
        len(picked), float(errors.mean()), float(errors.max()), float(flat.mean()), float(flat.max())
    )


def format_table(checks) -> str:
    """One line per check (< 100 columns): published and predicted tokens/s per GPU, the errors."""
    lines = [
        f"{'series':14} {'set':9} {'method':6} {'base':>5} {'gpus':>5} {'published':>10} {'model':>10} {'err':>7} {'flat':>7}"
    ]
    for c in checks:
        r = c.row
        lines.append(
            f"{r.series:14} {r.set:9} {r.method:6} {c.base.gpus:5d} {r.gpus:5d} {r.tokens_per_s_per_gpu:10,.0f} "
            f"{c.predicted_tokens_per_s:10,.0f} {100 * c.error:+6.1f}% {100 * c.flat_error:+6.1f}%"
        )
    return "\n".join(lines)


def main() -> None:
    """python -m rtmodel_literature.published_sharded: every check and the summaries."""
    checks = all_checks()
    print(format_table(checks))
    for subset in (DEV, HELD_BACK, None):
        s = summary(checks, subset)
        print(
            f"{subset or 'all'}: {s.rows} rows, |err| mean {s.mean_abs_pct:.1f} % max {s.max_abs_pct:.1f} %; "
            f"flat: mean {s.flat_mean_abs_pct:.1f} % max {s.flat_max_abs_pct:.1f} %"
        )


if __name__ == "__main__":
    main()

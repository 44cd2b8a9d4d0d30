"""From per-rank iteration times to the numbers a validation reports (pure numpy, no torch).

Why the mean: throughput is total time / iterations, so the error and the verdict are on the mean
per-iteration time. Time-varying topologies (ring, alternating-exp-ring) alternate fast intra-node and
slow inter-node rounds, so their per-iteration times are bimodal and the p50 falls anywhere between
the modes; it is still reported (pooled over ranks and iterations, like the model's) but not judged. The spread across ranks
(max / min of per-rank medians) shows whether some rank was systematically slower.

Why a run-to-run spread: one run's mean is itself a sample. Its standard error comes from batch means
(the rank-averaged iteration times cut into BATCHES contiguous blocks: neighbouring iterations are
correlated, blocks much less), and the measured speedup carries both runs' errors. When the speedup's
+-2 sigma interval reaches across the margin, one run cannot settle the verdict, and validate says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from runtime_model.core.defaults import MARGIN

if TYPE_CHECKING:
    from runtime_model.prediction.iteration import IterationPrediction


@dataclass(frozen=True)
class Measured:
    """Measured per-iteration wall time of one run (all ranks' timed iterations pooled)."""

    p50_s: float
    p90_s: float
    mean_s: float
    min_s: float
    max_s: float
    samples: int
    per_rank_median_s: tuple[float, ...]
    rank_spread: float  # max / min of per-rank medians (1.0 = all ranks alike)
    mean_se_s: float = 0.0  # standard error of mean_s by batch means (module doc); 0 with too few iterations


@dataclass(frozen=True)
class Comparison:
    """One run: the model's prediction next to the measurement; error = (predicted - measured) / measured."""

    name: str
    predicted_p50_s: float
    predicted_mean_s: float
    predicted_p99_s: float
    measured: Measured
    error: float  # signed, on the mean: > 0 the model is pessimistic, < 0 optimistic
    # peak memory per rank in bytes (None where not measured) and how it was measured or why not
    # (rtmodel_harness.peak_memory); the memory model's peak per rank and its source (rtmodel_validation.sharded);
    # records from before them read back None
    peak_memory_bytes: tuple[int | None, ...] | None = None
    peak_memory_source: str | None = None
    predicted_peak_memory_bytes: float | None = None
    predicted_peak_memory_source: str | None = None


@dataclass(frozen=True)
class Verdict:
    """Did the model's ordering (topology faster / All-Reduce faster / too close) hold in the measurement?"""

    predicted_speedup: float  # All-Reduce mean / topology mean, predicted
    measured_speedup: float
    predicted: str  # "topology faster" | "allreduce faster" | "too close"
    measured: str
    held: bool
    margin: float
    measured_speedup_rel_se: float = 0.0  # relative standard error of measured_speedup (module doc)
    settled: bool = True  # does the measured ordering hold across the speedup's +-2 sigma?


BATCHES = 4  # batch means: enough blocks for a spread, long enough blocks to decorrelate


def batch_means_se(per_rank_times_s: list[list[float]]) -> float:
    """Standard error of the mean iteration time from BATCHES contiguous blocks of the rank-averaged
    series (0.0 when there are fewer iterations than blocks)."""
    length = min(len(t) for t in per_rank_times_s)
    if length < BATCHES:
        return 0.0
    series = np.mean([np.asarray(t[:length], dtype=float) for t in per_rank_times_s], axis=0)
    block = length // BATCHES
    means = series[: block * BATCHES].reshape(BATCHES, block).mean(axis=1)
    return float(means.std(ddof=1) / np.sqrt(BATCHES))


def measure(per_rank_times_s: list[list[float]]) -> Measured:
    """Statistics of one run from each rank's timed iterations."""
    if not per_rank_times_s or any(len(t) == 0 for t in per_rank_times_s):
        raise ValueError("every rank must report at least one timed iteration")
    pooled = np.concatenate([np.asarray(t, dtype=float) for t in per_rank_times_s])
    medians = tuple(float(np.median(t)) for t in per_rank_times_s)
    return Measured(
        p50_s=float(np.median(pooled)),
        p90_s=float(np.quantile(pooled, 0.9)),
        mean_s=float(pooled.mean()),
        min_s=float(pooled.min()),
        max_s=float(pooled.max()),
        samples=int(pooled.size),
        per_rank_median_s=medians,
        rank_spread=max(medians) / min(medians) if min(medians) > 0 else float("inf"),
        mean_se_s=batch_means_se(per_rank_times_s),
    )


def signed_error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def compare(name: str, predicted: IterationPrediction, measured: Measured) -> Comparison:
    """The model's prediction for one run next to its measurement (error on the mean)."""
    return Comparison(
        name=name,
        predicted_p50_s=float(predicted.p50_s),
        predicted_mean_s=float(predicted.mean_s),
        predicted_p99_s=float(predicted.p99_s),
        measured=measured,
        error=signed_error(float(predicted.mean_s), measured.mean_s),
    )


def ordering(speedup: float, margin: float = MARGIN) -> str:
    """Classify a speedup (All-Reduce time / topology time) with a relative margin on the time saved."""
    gain = 1.0 - 1.0 / speedup  # (T_AR - T_topo) / T_AR
    if gain > margin:
        return "topology faster"
    if gain < -margin:
        return "allreduce faster"
    return "too close"


def verdict(allreduce: Comparison, topology: Comparison, margin: float = MARGIN) -> Verdict:
    pred = allreduce.predicted_mean_s / topology.predicted_mean_s
    meas = allreduce.measured.mean_s / topology.measured.mean_s
    p, m = ordering(pred, margin), ordering(meas, margin)
    rel_se = float(
        np.hypot(
            allreduce.measured.mean_se_s / allreduce.measured.mean_s,
            topology.measured.mean_se_s / topology.measured.mean_s,
        )
    )
    settled = ordering(meas * (1 - 2 * rel_se), margin) == m == ordering(meas * (1 + 2 * rel_se), margin)
    return Verdict(pred, meas, p, m, p == m, margin, rel_se, settled)

"""Per-iteration compute time C = t_F + t_B as a distribution, and the order statistics the model needs.

Why: All-Reduce waits for the slowest of all n workers, gossip for the slowest of its group, so the
model needs E[max of g i.i.d. draws] and quantiles of that maximum, computed from the distribution
itself (exact order statistics), never from a tuned constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from runtime_model.core.errors import UserError

_erf = np.vectorize(math.erf, otypes=[float])


@lru_cache(maxsize=1)
def _standard_normal():
    """statistics.NormalDist(), imported on first use: statistics pulls fractions, decimal and random
    (a fiftieth of `advise`'s CPU), and most answers never take a Normal's quantile."""
    from statistics import NormalDist

    return NormalDist()


def normal_inv_cdf(p: float) -> float:
    """The standard Normal's p-quantile (statistics.NormalDist's: exact to double precision)."""
    return _standard_normal().inv_cdf(p)


class ComputeDistribution:
    """Interface: a distribution of one worker's compute time per iteration (seconds)."""

    mean_s: float
    sd_s: float

    def ppf(self, q):
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        """i.i.d. draws (used by the gossip recurrence's Monte-Carlo): from_raw(raw_draw(rng, size))."""
        return self.from_raw(self.raw_draw(rng, size))

    def raw_key(self) -> object:
        """What a draw's randomness is besides the stream: distributions with equal keys turn one raw draw
        into each one's own samples (recurrence.run_jobs batches their runs on it)."""
        raise NotImplementedError

    def raw_draw(self, rng: np.random.Generator, size) -> np.ndarray:
        raise NotImplementedError

    def from_raw(self, raw: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def cdf(self, x):
        raise NotImplementedError

    def scaled(self, factor: float) -> ComputeDistribution:
        raise NotImplementedError

    def expected_max(self, g: int) -> float:
        """E[max of g i.i.d. draws] = integral_0^1 Q(w^(1/g)) dw (substitution w = F(x)^g)."""
        raise NotImplementedError

    def quantile_of_max(self, p: float, g: int) -> float:
        """p-quantile of the max of g draws: P(max <= x) = F(x)^g, so x = Q(p^(1/g))."""
        return float(self.ppf(p ** (1.0 / g)))

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class NormalCompute(ComputeDistribution):
    """C ~ Normal(mean, sd), truncated at 0 only implicitly (sd << mean in practice)."""

    mean_s: float
    sd_s: float

    def __post_init__(self):
        if not (self.mean_s >= 0) or not (self.sd_s >= 0):
            raise UserError(f"compute mean and sd must be >= 0, got {self.mean_s}, {self.sd_s}")

    def ppf(self, q):
        q = np.asarray(q, dtype=float)
        if self.sd_s == 0:
            return np.full_like(q, self.mean_s)
        z = np.vectorize(normal_inv_cdf, otypes=[float])(q) if q.ndim else normal_inv_cdf(float(q))
        return self.mean_s + self.sd_s * z

    def cdf(self, x):
        x = np.asarray(x, dtype=float)
        if self.sd_s == 0:
            return (x >= self.mean_s).astype(float)
        return 0.5 * (1.0 + _erf((x - self.mean_s) / (self.sd_s * math.sqrt(2.0))))

    def raw_key(self) -> object:
        return "normal"

    def raw_draw(self, rng: np.random.Generator, size) -> np.ndarray:
        return rng.standard_normal(size)

    def from_raw(self, raw: np.ndarray) -> np.ndarray:
        return self.mean_s + self.sd_s * raw

    def scaled(self, factor: float) -> NormalCompute:
        return NormalCompute(self.mean_s * factor, self.sd_s * factor)

    def expected_max(self, g: int) -> float:
        return self.mean_s + self.sd_s * _standard_normal_expected_max(int(g))

    def describe(self) -> str:
        return f"Normal(mean={self.mean_s * 1e3:.3f} ms, sd={self.sd_s * 1e3:.3f} ms)"


_GRID = np.linspace(-12.0, 12.0, 24001)  # step 1e-3: the integrand is smooth, the tails negligible
_LOG_PDF = -0.5 * _GRID**2 - 0.5 * math.log(2 * math.pi)
# math.erf element by element as _erf does, without np.vectorize's per-call overhead (at import, every run)
_LOG_CDF = np.log(
    np.clip(0.5 * (1.0 + np.array([math.erf(v) for v in (_GRID / math.sqrt(2.0)).tolist()])), 1e-300, 1.0)
)


@lru_cache(maxsize=4096)
def _standard_normal_expected_max(g: int) -> float:
    """E[max of g standard normals] = integral x * g * phi(x) * Phi(x)^(g-1) dx (trapezoid, error < 1e-6)."""
    if g <= 1:
        return 0.0
    density = g * np.exp((g - 1) * _LOG_CDF + _LOG_PDF)
    return float(np.trapezoid(_GRID * density, _GRID))


@dataclass(frozen=True)
class EmpiricalCompute(ComputeDistribution):
    """The measured samples themselves (what the profiler saw, across ranks and iterations)."""

    samples_s: tuple[float, ...]

    def __post_init__(self):
        arr = np.asarray(self.samples_s, dtype=float)
        if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise UserError("empirical compute samples must be a non-empty list of finite times >= 0")
        object.__setattr__(self, "samples_s", tuple(sorted(arr.tolist())))
        # the samples as one array, made once: the recurrence draws from them every iteration of every run
        object.__setattr__(self, "_array", np.asarray(self.samples_s))
        object.__setattr__(self, "_mean_s", float(np.mean(self._array)))

    @property
    def mean_s(self) -> float:  # type: ignore[override]
        return self._mean_s

    @property
    def sd_s(self) -> float:  # type: ignore[override]
        return float(np.std(self._array, ddof=1)) if len(self.samples_s) > 1 else 0.0

    def ppf(self, q):
        return np.quantile(self._array, q, method="inverted_cdf")

    def raw_key(self) -> object:
        return ("empirical", self._array.size)

    def raw_draw(self, rng: np.random.Generator, size) -> np.ndarray:
        # rng.choice(samples, size, replace=True) draws exactly these indices, at twice the cost
        return rng.integers(self._array.size, size=size)

    def from_raw(self, raw: np.ndarray) -> np.ndarray:
        return self._array.take(raw)

    def cdf(self, x):
        return np.searchsorted(self._array, x, side="right") / len(self.samples_s)

    def scaled(self, factor: float) -> EmpiricalCompute:
        return EmpiricalCompute(tuple(s * factor for s in self.samples_s))

    def expected_max(self, g: int) -> float:
        """Exact for the empirical distribution: P(max = x_(i)) = (i/N)^g - ((i-1)/N)^g."""
        x = self._array
        n = x.size
        i = np.arange(1, n + 1) / n
        weights = i**g - (i - 1.0 / n) ** g
        return float(np.dot(weights, x))

    def describe(self) -> str:
        return f"Empirical({len(self.samples_s)} samples, mean={self.mean_s * 1e3:.3f} ms, sd={self.sd_s * 1e3:.3f} ms)"


SUM_GRID = 400  # quantiles per side when two distributions' sum is formed on a grid (160,000 points)


@lru_cache(maxsize=64)  # sweeps ask for the same pair at every GPU count
def plus_deviation(dist: ComputeDistribution, spread: ComputeDistribution | None) -> ComputeDistribution:
    """The distribution of C + (S - E[S]) for independent C ~ dist and S ~ spread: C with another part's
    spread around its own mean (a rank's optimizer step, drawn each iteration), its mean unchanged.
    Exact for two Normals; otherwise the sum of every pair of points (each side its samples, or SUM_GRID
    mid-quantiles where it has more or is not empirical), clipped at 0."""
    if spread is None or spread.sd_s == 0:
        return dist
    if isinstance(dist, NormalCompute) and isinstance(spread, NormalCompute):
        return NormalCompute(dist.mean_s, math.hypot(dist.sd_s, spread.sd_s))
    a, b = _points(dist), _points(spread)
    total = np.maximum(a[:, None] + (b - b.mean())[None, :], 0.0)
    return EmpiricalCompute(tuple(total.ravel().tolist()))


def _points(dist: ComputeDistribution) -> np.ndarray:
    """A distribution as equally weighted points: an empirical one's samples, else mid-quantiles."""
    if isinstance(dist, EmpiricalCompute) and len(dist.samples_s) <= SUM_GRID:
        return np.asarray(dist.samples_s)
    return np.asarray(dist.ppf((np.arange(SUM_GRID) + 0.5) / SUM_GRID), dtype=float)


def shifted(dist: ComputeDistribution, delta_s: float) -> ComputeDistribution:
    """dist moved by delta_s (work added to every draw, its spread unchanged)."""
    if delta_s == 0:
        return dist
    if isinstance(dist, NormalCompute):
        return NormalCompute(dist.mean_s + delta_s, dist.sd_s)
    points = dist.samples_s if isinstance(dist, EmpiricalCompute) else _points(dist)
    return EmpiricalCompute(tuple(max(0.0, x + delta_s) for x in points))

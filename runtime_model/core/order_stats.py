"""The maximum over n ranks of C_i = s_i (B_i + mu cv_node z_node) without arrays of size n.

Why: All-Reduce waits for the slowest of n every iteration. With i.i.d. draws that is F(x)^n
(distributions.py); with stragglers, a rank spread or a node term the ranks differ, and drawing all n
every iteration costs O(n) memory and time. Ranks fall into a few classes instead, and node terms are
independent across nodes, so

    P(max <= x) = prod over node classes of ( E_z[ prod over the node's ranks of F(x / s_i - mu cv z) ] )^count

with z ~ Normal(0, 1) integrated by Gauss-Hermite quadrature: exact for stragglers (two factors), for the
node term (to quadrature accuracy) and for the empirical distribution (its own step CDF). A rank spread
(rank_cv) is a population of factors: its E_s is taken over SPREAD_POINTS equal-probability factors of
Normal(1, rank_cv) clipped as variation.factors clips them (the population the seeded draw samples).
Mean by integrating 1 - P over x; quantiles by bisection on P.
"""

from __future__ import annotations

import math

import numpy as np

from runtime_model.core.distributions import ComputeDistribution, NormalCompute, normal_inv_cdf
from runtime_model.core.variation import MIN_FACTOR, Variation

HERMITE_POINTS = 48
SPREAD_POINTS = 256
GRID_POINTS = 4001


# Numerical Recipes' erfcc coefficients, innermost first (the last is the constant term)
_ERFC_COEFFS = (
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
)


def erfc(x: np.ndarray) -> np.ndarray:
    """Complementary error function, vectorised in numpy, with relative error < 1.2e-7 everywhere
    (Numerical Recipes' erfcc Chebyshev fit): the tail 1 - F that a max over millions needs stays
    accurate, and scipy.special (~0.15 s of import) is not needed."""
    x = np.asarray(x, dtype=float)
    z = np.abs(x).reshape(-1)  # at least 1-d: the in-place steps below need an array, not a scalar
    t = 1.0 / (1.0 + 0.5 * z)
    # Horner's rule in place (one array, not one per term): every product and sum is the one the nested
    # expression t * (c + t * (...)) makes, so the values are the same to the last bit
    poly = t * _ERFC_COEFFS[0]
    for c in _ERFC_COEFFS[1:-1]:
        poly += c
        poly *= t
    poly += _ERFC_COEFFS[-1]
    ans = np.negative(z) * z
    ans += poly
    np.exp(ans, out=ans)
    ans *= t
    ans = ans.reshape(x.shape)
    return np.where(x >= 0, ans, 2.0 - ans)


def base_cdf(dist: ComputeDistribution, b: np.ndarray) -> np.ndarray:
    """F(b) of the i.i.d. part, vectorised (np.vectorize(erf) of distributions.py is too slow here)."""
    if isinstance(dist, NormalCompute):
        if dist.sd_s == 0:
            return (np.asarray(b) >= dist.mean_s).astype(float)
        return 0.5 * erfc(-(np.asarray(b) - dist.mean_s) / (dist.sd_s * math.sqrt(2.0)))
    return np.asarray(dist.cdf(b), dtype=float)


def _spread(var: Variation) -> tuple[np.ndarray, np.ndarray]:
    """(factors, probabilities) of the persistent spread of one typical rank."""
    if var.rank_cv <= 0:
        return np.ones(1), np.ones(1)
    u = (np.arange(SPREAD_POINTS) + 0.5) / SPREAD_POINTS
    z = np.array([normal_inv_cdf(float(p)) for p in u])
    return np.maximum(1.0 + var.rank_cv * z, MIN_FACTOR), np.full(SPREAD_POINTS, 1.0 / SPREAD_POINTS)


def _node_classes(n: int, k: int, var: Variation) -> list[tuple[int, int, int]]:
    """(nodes, stragglers per node, count of such nodes): stragglers are the first ranks, node 0 first."""
    c = min(var.straggler_count, n) if var.straggler_factor != 1.0 else 0
    m = n // k
    full, part = divmod(c, k)
    out = [(k, full)] if full else []
    if part:
        out.append((part, 1))
    rest = m - full - (1 if part else 0)
    if rest:
        out.append((0, rest))
    return [(k, s, cnt) for s, cnt in out]


def log_cdf_of_max(x: np.ndarray, dist: ComputeDistribution, var: Variation, n: int, k: int) -> np.ndarray:
    """log P(max over the n ranks of C_i <= x) for each x (module doc)."""
    x = np.atleast_1d(np.asarray(x, dtype=float))
    s_vals, s_prob = _spread(var)
    if var.node_cv > 0:
        zs, wz = np.polynomial.hermite_e.hermegauss(HERMITE_POINTS)
        wz = wz / wz.sum()
    else:
        zs, wz = np.zeros(1), np.ones(1)
    shift = dist.mean_s * var.node_cv * zs  # (Z,)
    out = np.zeros(x.size)
    for size, slow, count in _node_classes(n, k, var):
        per_z = np.zeros((x.size, zs.size))
        for factor, ranks in ((var.straggler_factor, slow), (1.0, size - slow)):
            if ranks == 0:
                continue
            b = x[:, None, None] / (factor * s_vals[None, None, :]) - shift[None, :, None]
            g = (base_cdf(dist, b) * s_prob).sum(axis=-1)  # E_s F, (X, Z)
            with np.errstate(divide="ignore"):
                per_z += ranks * np.log(g)
        with np.errstate(divide="ignore"):
            node = np.log(np.maximum(np.exp(per_z) @ wz, 0.0))
        out += count * node
    return out


def max_of_ranks(dist: ComputeDistribution, var: Variation, n: int, k: int) -> tuple[float, float, float]:
    """(mean, p50, p99) of max over n ranks of C_i (module doc), with O(classes) memory."""
    s_max = max(var.straggler_factor, 1.0) * float(_spread(var)[0].max())
    b_max = float(dist.ppf(1.0 - 1e-12)) if isinstance(dist, NormalCompute) else float(max(dist.samples_s))
    hi = 1.05 * s_max * (b_max + dist.mean_s * var.node_cv * 9.0) + 1e-12
    lo = 0.0
    grid = np.linspace(lo, hi, GRID_POINTS)
    cdf = np.exp(log_cdf_of_max(grid, dist, var, n, k))
    mean = float(hi - np.trapezoid(cdf, grid))  # E[X] = integral (1 - P(X <= x)) dx over [0, hi]
    return mean, _quantile(0.5, grid, cdf, dist, var, n, k), _quantile(0.99, grid, cdf, dist, var, n, k)


def _quantile(p: float, grid, cdf, dist, var, n, k) -> float:
    """Smallest x with P(max <= x) >= p: the grid brackets it, bisection refines it."""
    i = int(np.searchsorted(cdf, p))
    if i >= grid.size:
        return float(grid[-1])
    a, b = (grid[i - 1] if i else grid[0]), grid[i]
    logp = math.log(p)
    for _ in range(60):
        mid = 0.5 * (a + b)
        if log_cdf_of_max(np.array([mid]), dist, var, n, k)[0] >= logp:
            b = mid
        else:
            a = mid
    return float(b)


def quantile_of_repeated(samples: np.ndarray, qs, repeat: int = 1) -> list[float]:
    """np.quantile (linear) of the multiset in which every sample appears `repeat` times, without
    building it: what the per-rank recurrence would report when each reduced rank stands for `repeat`.
    With repeat 1 it is np.quantile to the last bit (numpy's own index and interpolation expressions),
    without the numpy.ma import np.quantile pays on its first call (a tenth of `advise`'s own work)."""
    values = np.asarray(samples, dtype=float)
    total = values.size * repeat
    spots = []
    for q in np.atleast_1d(qs):
        pos = (total - 1) * float(q)
        lo = min(int(math.floor(pos)), total - 1)
        spots.append((pos - lo, lo // repeat, min(lo + 1, total - 1) // repeat))
    s = np.partition(values, sorted({k for _, a, b in spots for k in (a, b)}))
    return [_lerp(float(s[a]), float(s[b]), t) for t, a, b in spots]


def _lerp(a: float, b: float, t: float) -> float:
    """numpy's linear interpolation (numpy.lib._function_base_impl._lerp): from the nearer end."""
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t

"""complete's reduced system: its recurrence with the max over all n ranks tracked explicitly.

complete is the one schedule whose group is every rank: X_i(t+1) = max(X_i(t) + C_i, M(t) + comm) couples
each rank to M(t) = max over all n of X_j(t). The reduced system of n' ranks tracks M explicitly:
M(t+1) = max(M(t) + comm, max over n of X_j(t) + C_j), where the max over the n - n' ranks not simulated is
drawn from its exact law given the simulated ranks' empirical distribution, P(V <= v) =
(mean_j F((v - X_j - t_O) / s_j))^(n - n') (order statistics of the empirical mixture; the node term is
left out of that extreme, an approximation stated here).

Why batched (CompleteJob.run_batch): a sweep meets complete at every n above the full-simulation limit,
always with the same n' and seed, so one loop serves them all; each job's numbers are those of its own run
(the same draws, the same float operations row by row).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from runtime_model.core.distributions import NormalCompute, normal_inv_cdf
from runtime_model.core.order_stats import base_cdf, erfc
from runtime_model.core.scenario import Compute
from runtime_model.prediction.recurrence import Growth, batch_se, column_growth
from runtime_model.prediction.recurrence_draws import compute_draws, step_draws, stream_key

BISECTIONS = 30  # of the unseen ranks' extreme: 2^-30 of the simulated ranks' spread
HALLEY_STEPS = 40  # at most, for a Normal i.i.d. part (two in practice)
HALLEY_TOL = 1e-2  # of the Normal's sd: the last step (cubic convergence leaves ~1e-8 sd after it)


@dataclass(frozen=True, eq=False)
class CompleteJob:
    """complete's reduced recurrence: comm[i] is reduced rank i's exchange (+ the last bucket's optimizer
    step); n_full the ranks it stands for; budget (iterations) from recurrence's own rule on n'."""

    compute: Compute
    comm: np.ndarray
    n_full: int
    gpus_per_node: int
    warmup: int
    measured: int
    step_share: float = 0.0  # the share of the step after the last wait (recurrence.Job)

    def batch_key(self) -> tuple:
        return ("complete", self.comm.size, self.gpus_per_node, stream_key(self.compute), self.measured)

    @staticmethod
    def run_batch(jobs: Sequence[CompleteJob], seed: int, with_free: bool = True) -> list[Growth]:
        return simulate_complete(jobs, seed, with_free)


def simulate_complete(jobs: Sequence[CompleteJob], seed: int, with_free: bool = True) -> list[Growth]:
    """Every job's recurrence (module doc), side by side: state (jobs, [comm, free], n'). Without
    `with_free` only the comm column runs (a search reads means alone: pending.run_means): the columns
    never mix, so its numbers are the two-column run's bit for bit, and free_s is NaN."""
    count, n, k = len(jobs), jobs[0].comm.size, jobs[0].gpus_per_node
    cols = 2 if with_free else 1
    comp = jobs[0].compute
    s = np.stack([j.compute.variation.factors(n) for j in jobs])
    opt = np.array([j.compute.optimizer_s for j in jobs])[:, None, None]
    draws = _draws(jobs, n, k, seed)
    wide = replace(comp, distribution=comp.wait_distribution)  # what unseen ranks add, step included
    spread = step_draws(comp, n, seed)  # one distinct compute whenever it has a spread (stream_key)
    share = np.array([j.step_share for j in jobs])[:, None]
    extreme_rng = np.random.default_rng(seed + 1)
    warmup, measured = jobs[0].warmup, jobs[0].measured
    cost = np.zeros((count, cols, n))
    cost[:, 0] = np.stack([j.comm for j in jobs])
    others = [j.n_full - n for j in jobs]
    x, top = np.zeros((count, cols, n)), np.zeros((count, cols))
    hist, start = np.empty((measured + 1, count, n)), None
    for t in range(warmup + measured):
        c = next(draws)[:, None, :]
        step = 0.0
        if spread is not None:  # the step's deviation: all of it after computing, its share after waiting
            d = next(spread)
            c, step = c + d, np.stack([share * d, np.zeros((count, n))][:cols], axis=1)
        xc = x + c
        new = np.maximum(xc, top[:, :, None] + cost + step)
        seen = xc.max(axis=2)
        unseen = _extremes(wide, jobs, x + opt, s, others, extreme_rng.random())
        top = np.maximum(np.maximum(top + cost.max(axis=2), seen), unseen)
        if t >= warmup:
            if start is None:
                start, hist[0] = x.copy(), x[:, 0]
            hist[t - warmup + 1] = new[:, 0]
        x = new
    out = []
    for i in range(count):
        comm, free = column_growth(x[i], start[i], measured)
        h = hist[:, i]
        samples = (h[1:] - h[:-1]).reshape(-1)
        out.append(Growth(comm, free, samples, batch_se(h.mean(axis=1), 1)))
    return out


def _draws(jobs: Sequence[CompleteJob], n: int, k: int, seed: int):
    """Each job's C + t_O per iteration, shape (jobs, n): Compute.sampler's stream (recurrence_draws.compute_draws)."""
    comp = jobs[0].compute
    if stream_key(comp) == "normal":  # one row per job: the per-rank recurrence's stream
        yield from compute_draws([j.compute for j in jobs], n, k, seed)
    rng = np.random.default_rng(seed)
    draw = comp.sampler(n, k)
    while True:
        yield np.broadcast_to(draw(rng) + comp.optimizer_s, (len(jobs), n))


def _extremes(
    comp: Compute, jobs, base: np.ndarray, s: np.ndarray, others: list[int], u: float
) -> np.ndarray:
    """One draw per job and column of max over `others` ranks of base_J + s_J B with J uniform over the
    simulated ranks and B the i.i.d. part: solve mean_j F((v - base_j) / s_j) = u^(1/others)."""
    if isinstance(comp.distribution, NormalCompute):
        cols = base.shape[1]
        dists = [j.compute.wait_distribution for j in jobs for _ in range(cols)]
        flat = base.reshape(cols * len(jobs), -1)  # rows (job 0 col 0, job 0 col 1, job 1 col 0, ...)
        spread = np.repeat(s, cols, axis=0)
        found = _normal_extremes_of(dists, flat, spread, [o for o in others for _ in range(cols)], u)
        return np.array(found).reshape(len(jobs), cols)
    return np.stack([_bisect(comp, base[i].T, s[i], others[i], u) for i in range(len(jobs))])


def _bisect(comp: Compute, base: np.ndarray, s: np.ndarray, others: int, u: float) -> np.ndarray:
    """The extreme of each column of base (n, 2) by bisection on the mixture's CDF (any distribution)."""
    dist = comp.distribution
    p = u ** (1.0 / others)
    q = float(dist.ppf(p))
    lo = (base + s[:, None] * q).min(axis=0)
    hi = (base + s[:, None] * q).max(axis=0)
    if dist.sd_s == 0:
        return hi
    for _ in range(BISECTIONS):
        v = 0.5 * (lo + hi)
        gap = base_cdf(dist, (v[None, :] - base) / s[:, None]).mean(axis=0) - p
        lo, hi = np.where(gap < 0, v, lo), np.where(gap < 0, hi, v)
    return 0.5 * (lo + hi)


def _normal_extremes(rows: list[tuple[NormalCompute, np.ndarray, np.ndarray, int]], u: float) -> list[float]:
    """_normal_extremes_of for rows given one by one (dist, base, s, others)."""
    return _normal_extremes_of(
        [d for d, _, _, _ in rows],
        np.stack([b for _, b, _, _ in rows]),
        np.stack([s for _, _, s, _ in rows]),
        [o for _, _, _, o in rows],
        u,
    )


def _normal_extremes_of(
    dists: list[NormalCompute], base: np.ndarray, s: np.ndarray, others: list[int], u: float
) -> list[float]:
    """The extreme for a Normal i.i.d. part, each row (dists[i], base[i], s[i], others[i]) alone: Halley's
    method on h(v) = log mean_j S((v - base_j) / s_j) - log(1 - u^(1/others)) (S the survival), nearly
    linear in v in the far tail where Newton on the CDF crawls. Bracket: the roots with every rank at the
    lowest and at the top base; start: the exponential tilt of the top rank's tail over the others
    (S(x + d) ~ S(x) e^(-x d)); cubic convergence, so after a last step of HALLEY_TOL sd what is left is
    ~1e-8 sd. The rows' vector work is done together, as (rows, ranks) arrays, and each row's scalar
    steps alone: every row gets the same operations it would get by itself (a batch is each job's run)."""
    mu = np.array([d.mean_s for d in dists])
    sd = np.array([d.sd_s for d in dists])
    tail_of = {o: -math.expm1(math.log(max(u, 1e-300)) / o) for o in set(others)}  # 1 - u^(1/others)
    tails = [tail_of[o] for o in others]  # rows of one n share it (a crossover's grid: every row)
    z_of = {o: -normal_inv_cdf(min(t, 0.5)) for o, t in tail_of.items()}
    z = np.array([z_of[o] for o in others])
    at = base + s * (mu + sd * z)[:, None]
    lows, highs = at.min(axis=1), at.max(axis=1)
    out = highs.tolist()
    idx = np.flatnonzero((sd != 0) & (lows != highs))  # else one base: the root itself
    if idx.size == 0:
        return out
    scale = 1.0 / (s[idx] * sd[idx, None])  # x_j = (v - base_j) scale_j - mu / sd
    shift = base[idx] * scale + (mu[idx] / sd[idx])[:, None]
    tilt = np.exp((at[idx] - highs[idx, None]) * (z[idx, None] * scale)).mean(axis=1)
    least = scale.min(axis=1)
    live = []  # (row index, position in idx, _halley_step's state) of rows that need iterating
    for k, i in enumerate(idx.tolist()):
        lo, hi, zi = float(lows[i]), float(highs[i]), float(z[i])
        start = min(max(hi + math.log(float(tilt[k])) / (zi * float(least[k])), lo), hi)
        live.append((i, k, [lo, hi, math.log(tails[i]), float(sd[i]), start]))
    for _ in range(HALLEY_STEPS):
        rows = np.array([k for _, k, _ in live])
        scale_of = scale[rows]  # the live rows' scales, gathered once per step
        x = np.array([r[4] for _, _, r in live])[:, None] * scale_of - shift[rows]
        surv = 0.5 * erfc(x * (1.0 / math.sqrt(2.0))).mean(axis=1)
        phi = np.exp(-0.5 * x * x) * scale_of  # the density per rank, times sqrt(2 pi)
        dens, slope = phi.mean(axis=1), -(x * phi * scale_of).mean(axis=1)
        still = []
        for row, sv, de, sl in zip(live, surv.tolist(), dens.tolist(), slope.tolist(), strict=True):
            if _halley_step(row[2], sv, de, sl):
                still.append(row)
            else:
                out[row[0]] = row[2][4]
        if not still:
            break
        live = still
    for i, _, r in live:
        out[i] = r[4]
    return out


def _halley_step(r: list, surv: float, dens: float, slope: float) -> bool:
    """One Halley step of row state r = [lo, hi, target, sd, v]; False once it has converged or cannot go on."""
    lo, hi, target, sd, v = r
    if surv <= 0.0 or dens <= 0.0:
        return False
    dens, slope = dens / math.sqrt(2.0 * math.pi), slope / math.sqrt(2.0 * math.pi)
    h = math.log(surv) - target
    lo, hi = (v, hi) if h > 0 else (lo, v)
    squared = surv * surv  # underflows to 0 in the far tail of 2^24 ranks: then the same, divided apart
    h1 = -dens / surv
    h2 = -(slope * surv + dens * dens) / squared if squared > 0.0 else -slope / surv - h1 * h1
    denominator = 2.0 * h1 * h1 - h * h2
    # a step that cannot be taken (a zero or NaN denominator) bisects instead
    nxt = v - 2.0 * h * h1 / denominator if denominator != 0.0 and not math.isnan(denominator) else math.nan
    step = (nxt if lo < nxt < hi else 0.5 * (lo + hi)) - v
    r[0], r[1], r[4] = lo, hi, v + step
    return abs(step) > HALLEY_TOL * sd

"""The structure of measured compute variation: per-rank speed factors, a node term, the i.i.d. rest.

Why: the runtime model draws C_i(t) = mu x s_i x (1 + node term + iid term) (runtime_model.core.variation).
A profile whose ranks differ persistently (a slow GPU) must give the model those s_i, and then the
i.i.d. distribution must be the WITHIN-rank part (each sample divided by its rank's factor) or the
between-rank spread would be counted twice: once in s_i and again as i.i.d. noise every iteration.
A component is only set when it is clearly above noise and large enough to matter; otherwise the
profile calibrates exactly as before (the pooled samples, i.i.d.).

- rank factors s_i = rank mean of C / mean of rank means. Set when the ranks differ significantly
  (one-way ANOVA F test, p < 0.01) and the persistent spread (random-effects sd of the rank means,
  the within-rank noise of a mean removed) is at least MIN_RANK_CV of the mean. rank_cv is that
  spread: at another number of ranks (where the measured factors do not fit) the model draws a spread
  of that size instead.
- node cv: per iteration, the mean deviation of a node's ranks from their own means, minus what the
  i.i.d. noise of k ranks explains (nested ANOVA over node x iteration cells); set when significant
  (p < 0.01) and at least MIN_NODE_CV. Needs >= 2 nodes with >= 2 ranks each. The i.i.d. part is then
  shrunk around its mean so that node + i.i.d. variance is the measured within-rank variance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime_model.core.variation import Variation

SIGNIFICANCE = 0.01
MIN_RANK_CV = 0.05  # a persistent spread below 5% of the mean changes a prediction by less than that
MIN_NODE_CV = 0.02


@dataclass(frozen=True)
class VariationFit:
    variation: Variation  # i.i.d. (Variation()) unless a component was measured
    iid_samples_s: np.ndarray  # the i.i.d. part's samples (the pooled samples when nothing was measured)
    rank_cv: float  # persistent spread estimate (reported even when not used)
    node_cv: float  # node-correlated estimate (reported even when not used)
    persistent_share: float  # share of Var(C) that is a persistent per-rank offset
    note: str  # one line: which components were measured
    warnings: tuple[str, ...]
    modelled: str = ""  # when ranks differ persistently: how the model now takes that into account


def fit_variation(rows: list[np.ndarray], ranks_per_node: int) -> VariationFit:
    """rows[r] = C samples of rank r (ranks r // ranks_per_node share a node)."""
    pooled = np.concatenate(rows)
    means = np.array([row.mean() for row in rows])
    mu = float(means.mean())
    n = len(rows)
    per_rank = float(np.mean([row.size for row in rows]))
    between = float(means.std(ddof=1)) if n > 1 else 0.0
    within_var = [row.var(ddof=1) for row in rows if row.size > 1]
    within = float(np.sqrt(np.mean(within_var))) if within_var else 0.0
    component = max(between**2 - within**2 / per_rank, 0.0)
    share = component / (component + within**2) if component > 0 else 0.0
    rank_cv = float(np.sqrt(component)) / mu if mu > 0 else 0.0
    significant = _ranks_differ(rows, between, within)
    persistent = significant and rank_cv >= MIN_RANK_CV
    factors = means / mu if persistent else np.ones(n)

    warnings: list[str] = []
    if significant and share > 0.25 and not persistent:
        warnings.append(
            f"ranks differ persistently ({share:.0%} of the variance of C is between ranks) but their spread "
            f"(cv {rank_cv:.3g}) is below {MIN_RANK_CV:g} of the mean: left to the i.i.d. distribution"
        )
    iid = np.concatenate([row / f for row, f in zip(rows, factors, strict=True)]) if persistent else pooled
    node_cv, node_text = _node_cv(rows, means, ranks_per_node)
    if node_cv > 0 and iid.size > 1:
        rel_var = float(np.var(iid / mu, ddof=1))
        shrink = np.sqrt(max(0.0, 1.0 - node_cv**2 / rel_var)) if rel_var > 0 else 0.0
        iid = mu + (iid - mu) * shrink
    iid_cv = float(iid.std(ddof=1) / iid.mean()) if iid.size > 1 and iid.mean() > 0 else 0.0

    if persistent:
        slowest = int(np.argmax(factors))
        others = np.delete(factors, slowest)
        vs_median = f", {factors[slowest] / np.median(others):.2f}x the median rank" if others.size else ""
        rank_text = (
            f"rank factors measured (slowest rank {slowest} {factors[slowest]:.2f}x the mean{vs_median}; "
            f"rank spread cv {rank_cv:.3g})"
        )
    else:
        why = "one rank" if n < 2 else "below noise" if not significant else f"spread cv {rank_cv:.3g} < {MIN_RANK_CV:g}"
        rank_text = f"rank factors 1 (not measured: {why})"
    where = "within ranks" if persistent else "all samples"
    note = f"compute variation: {rank_text}, {node_text}, i.i.d. cv {iid_cv:.3g} ({where})"
    if not (persistent or node_cv > 0):
        return VariationFit(Variation(), pooled, rank_cv, node_cv, share, note, tuple(warnings))
    source = "measured: " + note.removeprefix("compute variation: ")
    variation = Variation(
        rank_cv=min(rank_cv, 1.0) if persistent else 0.0,
        node_cv=min(node_cv, 1.0),
        rank_factors=tuple(float(f) for f in factors) if persistent else None,
        source=source,
    )
    modelled = (
        f"ranks differ persistently ({share:.0%} of the variance of C is between ranks): modelled as the measured "
        f"per-rank speed factors at {n} ranks (a rank spread of cv {rank_cv:.3g} at other sizes), with the "
        "within-rank samples as the i.i.d. part"
        if persistent
        else ""
    )
    return VariationFit(variation, iid, rank_cv, node_cv, share, note, tuple(warnings), modelled)


def _ranks_differ(rows: list[np.ndarray], between: float, within: float) -> bool:
    """Do the rank means differ by more than the within-rank noise explains (F test, p < 0.01)?"""
    if len(rows) < 2 or min(r.size for r in rows) < 2:
        return False
    if within == 0:
        return between > 0
    return one_way_anova_p(rows) < SIGNIFICANCE


def one_way_anova_p(rows: list[np.ndarray]) -> float:
    """p of the one-way ANOVA F test that the rows share one mean (what scipy.stats.f_oneway gives),
    from the F survival function of scipy.special: scipy.stats costs a second of import on every
    `advise --profile`, scipy.special a fraction of it."""
    k, n = len(rows), sum(row.size for row in rows)
    grand = float(np.concatenate(rows).mean())
    between = sum(row.size * (float(row.mean()) - grand) ** 2 for row in rows) / (k - 1)
    within = sum(float(((row - row.mean()) ** 2).sum()) for row in rows) / (n - k)
    if within == 0:
        return 0.0 if between > 0 else 1.0
    return float(_fdtrc()(k - 1, n - k, between / within))


def _node_cv(rows: list[np.ndarray], means: np.ndarray, k: int) -> tuple[float, str]:
    """(node cv, its phrase for the note); 0 unless significant and >= MIN_NODE_CV."""
    n = len(rows)
    if k < 2:
        return 0.0, "node cv 0 (not measured: one rank per node)"
    if n // k < 2 or n % k:
        return 0.0, "node cv 0 (not measured: one node)"
    t = min(row.size for row in rows)
    if t < 2:
        return 0.0, "node cv 0 (not measured: too few iterations)"
    m = n // k
    e = (np.stack([row[:t] for row in rows]) / means[:, None] - 1.0).reshape(m, k, t)
    node_mean = e.mean(axis=1)  # (m, t): a node's shared deviation in iteration t (plus noise / k)
    within_var = float(((e - node_mean[:, None, :]) ** 2).sum() / (m * t * (k - 1)))
    across = node_mean - node_mean.mean(axis=0)
    node_var_obs = float((across**2).sum() / (t * (m - 1)))
    node_var = node_var_obs - within_var / k
    cv = float(np.sqrt(max(node_var, 0.0)))
    if within_var == 0:
        p = 0.0 if node_var_obs > 0 else 1.0
    else:
        p = float(_fdtrc()(t * (m - 1), m * t * (k - 1), node_var_obs / (within_var / k)))
    if p >= SIGNIFICANCE or cv < MIN_NODE_CV:
        return 0.0, f"node cv 0 (below noise: estimate {cv:.2g}, p {p:.2g})"
    return cv, f"node cv {cv:.3g} measured (p {p:.2g})"


def _fdtrc():
    """The F survival function (scipy.stats.f.sf) from scipy.special, without scipy.stats's import;
    scipy's BLAS loaded with one thread (runtime_model.core.blas_threads)."""
    from runtime_model.core.blas_threads import one_blas_thread

    with one_blas_thread():
        from scipy.special import fdtrc
    return fdtrc

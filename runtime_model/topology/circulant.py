"""A static circulant graph's largest nontrivial eigenvalue from its offsets alone, without n-sized work.

Why in the topology floor: it is a property of the graph (W is circulant, so its eigenvalues are the FFT
of its row), and the static exponential graph's closed-form consensus (kinds/static_exp.py) is computed
from it; the convergence floor above imports it from here.
"""

from __future__ import annotations

import numpy as np


def circulant_rho(n: int, offsets: tuple[int, ...]) -> float:
    """max over modes f != 0 of |lambda_f| for the circulant row with weight w at 0 and at each (distinct)
    offset d: lambda_f = w (1 + sum_d e^(2 pi i f d / n)), as the FFT of the row gives it, without the row.

    Branch and bound over f in [1, n/2] (modes f and n - f are conjugate): on an interval of half-width h
    around its centre c, a term drifts by at most 2 pi d h / n in phase, so |lambda| <= w (|1 + sum of the
    slow terms at c| + their drift + the number of fast terms (|term| = 1)); intervals whose bound is below
    the best mode seen are dropped. For the static exponential graph (offsets 2^j) about a thousand modes
    are evaluated at any n up to 2^24 (1 ms); at n = 2^tau the answer is (tau - 1) / (tau + 1), at f = n/2.
    """
    half = n // 2
    if half < 1:
        return 0.0
    d = np.asarray(offsets, dtype=np.int64)
    drift_per_mode = 2.0 * np.pi * d / n

    def terms(f: np.ndarray) -> np.ndarray:
        return np.exp(2j * np.pi * ((f[:, None] * d[None, :]) % n) / n)

    best = float(np.abs(terms(np.array([half])).sum() + 1.0))
    lo, hi = np.array([1], dtype=np.int64), np.array([half], dtype=np.int64)
    while lo.size:
        mid = (lo + hi) // 2
        e = terms(mid)
        best = max(best, float(np.abs(e.sum(axis=1) + 1.0).max()))
        drift = drift_per_mode[None, :] * np.maximum(mid - lo, hi - mid)[:, None]
        slow = drift < 2.0
        bound = np.abs((e * slow).sum(axis=1) + 1.0) + (drift * slow).sum(axis=1) + (~slow).sum(axis=1)
        keep = (bound > best * (1.0 + 1e-12)) & (hi > lo)
        lo, mid, hi = lo[keep], mid[keep], hi[keep]
        lo, hi = np.concatenate([lo, mid + 1]), np.concatenate([mid - 1, hi])
        lo, hi = lo[lo <= hi], hi[lo <= hi]
    return best / (len(offsets) + 1)

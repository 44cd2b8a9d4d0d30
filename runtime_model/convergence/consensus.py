"""How fast a gossip schedule averages: the convergence side of a topology recommendation.

For rounds W_0 .. W_{L-1} (doubly stochastic) and J = 11^T / n we report
- exact_rounds: the first t with W_{t-1} ... W_0 = J (exact average from any start), if that happens
  within a few periods; 0 at n = 1.
- rho = ||W_{L-1} ... W_0 - J||_2 over one period (the largest singular value on the mean-zero subspace),
  rho_per_round = rho ** (1 / L) and spectral_gap = 1 - rho_per_round.
- transient_proxy = n^3 rho^4 / (1 - rho)^4 with rho = rho_per_round (Chen et al. 2021 state the transient
  stage of gossip SGD with the per-iteration mixing rate); inf when rho_per_round = 1, 0 when it is 0.
  Beware: it is 0 for every exact schedule, which overstates them (below).
- worst_round_contraction = max over rounds r of ||W_r - J||_2: how much ONE round alone is guaranteed to
  shrink the distance to the average. Gossip SGD takes a gradient step between rounds, so this is what
  bounds the disagreement that a single step's gradients add; it is 1 for every round made of more than
  one group (a vector constant on each group and of mean zero is left unchanged), so one-peer schedules
  (ring, one-peer-exp, alternating-exp-ring, base-2) all have 1 although they reach the exact average in
  a period: they still have a transient stage (Ying et al., NeurIPS 2021, make this point for the
  one-peer exponential graph). complete has 0; a static graph has its rho.
- tau_over_p = period / (1 - rho^2): the topology term of the published rate of decentralized SGD with
  changing topology (Koloskova et al., "A Unified Theory of Decentralized SGD with Changing Topology and
  Local Updates", ICML 2020, Assumption 4: every block of tau consecutive rounds contracts
  E||X W_block - Xbar||_F^2 <= (1 - p) ||X - Xbar||_F^2; their rates grow with tau / p). Taking tau = one
  period gives p = 1 - rho^2; exact schedules then have p = 1 and tau / p = their period, which is how
  Takezawa et al. (NeurIPS 2023) state Base-2's rate. Unlike transient_proxy it is finite and nonzero for
  every connected schedule, so it compares exact and asymptotic ones on one scale (smaller = better);
  All-Reduce and complete have 1.

Why several methods: the advisor asks at n up to 65,536, where an n x n matrix is out of the question.
Structure is used instead, tried in this order:
1. "fft-circulant": a static circulant graph (Schedule.static_graph) or rounds that are all
   invariant under rotating ranks by one: eigenvalues by one FFT.
2. "fft-block-circulant": rounds all invariant under rotating by s <= 8 ranks (ring: s = 2). The period
   operator is block-circulant with s x s blocks, so it splits into n/s independent s x s problems.
3. "exact-projection-check": apply the rounds to random vectors; if they reach their mean (to 1e-9
   relative) within the first period, the period product is J and rho = 0 (one-peer-exp, AER, base-2).
   A random start fails that test with probability 0 unless the product really is J.
4. "hadamard-blocks": rounds that map onto themselves when a bit of the node index flips (BlueFog's
   dynamic graph), given the shape's GPUs per node: m blocks of k x k (consensus_hypercube), exact.
5. "product-svd" for n <= 512: the period product P built by applying each round's O(n) group
   average to the columns of I (L n^2 work, not L dense n^3 products: BlueFog's dynamic graph at 512
   ranks has 28 rounds, 9 s as dense products, a tenth of a second this way), then one SVD of P - J;
   its exact rounds are the projection check's (3.);
   else "power-iteration" on (P - J)^T (P - J) (a lower-bound estimate). "dense-svd" (every round a
   dense matrix, every product and norm dense) is kept as the independent check of the others.
The worst single round needs no search: a round of disjoint groups has ||W_r - J||_2 = 1 when it has
two or more groups, else |w - (1 - w) / (n - 1)| (its one group's eigenvalue on mean-zero vectors), an
O(n) count per round; a static circulant graph's round has eigenvalues fft(row) (W is normal), so its
norm is max |fft(row)[f]| over f != 0. "dense-svd" computes it from the dense rounds instead, as a check.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from runtime_model.convergence.consensus_hypercube import hypercube_rho, node_xor_invariant
from runtime_model.convergence.consensus_result import EXACT_TOL, ConsensusError, ConsensusMetrics, _metrics
from runtime_model.topology.schedule import Round, Schedule

DENSE_MAX_N = 512
MAX_BLOCK = 8  # largest rotation block tried by the block-circulant path
PERIODS_TRIED = 3  # "a few periods" for exact consensus
POWER_ITERATIONS = 300

METHODS = (
    "fft-circulant",
    "fft-block-circulant",
    "exact-projection-check",
    "hadamard-blocks",
    "product-svd",
    "dense-svd",
    "power-iteration",
)


def consensus_metrics(
    schedule: Schedule, method: str | None = None, gpus_per_node: int | None = None
) -> ConsensusMetrics:
    """Consensus metrics of a schedule; `method` forces one of METHODS (for cross-checks), None = fastest;
    `gpus_per_node` (the shape's, when known) lets rounds that commute with the node index's bit flips
    split into k x k blocks (consensus_hypercube)."""
    n, period = schedule.n, schedule.period
    if method is not None and method not in METHODS:
        raise ConsensusError(f"unknown consensus method {method!r}; choose one of: {', '.join(METHODS)}")
    if n == 1:
        return _metrics(1, period, 0, 0.0, method or "trivial", 0.0)
    if method in (None, "fft-circulant", "fft-block-circulant"):
        symbols = _symbols(schedule)
        if symbols is not None:
            return _from_symbols(schedule, *symbols)
        if method is not None:
            raise ConsensusError(f"{schedule.name}: rounds are not (block-)circulant for s <= {MAX_BLOCK}")
    if method == "dense-svd":
        return _dense(schedule)
    ops = _operators(schedule)
    exact = _exact_rounds_by_projection(ops, n, PERIODS_TRIED * period)
    if method in (None, "exact-projection-check") and exact is not None and exact <= period:
        return _metrics(n, period, exact, 0.0, "exact-projection-check", worst_round_contraction(schedule))
    if method in (None, "hadamard-blocks") and gpus_per_node and node_xor_invariant(schedule, gpus_per_node):
        rho = hypercube_rho(schedule, gpus_per_node)
        return _metrics(n, period, exact, rho, "hadamard-blocks", worst_round_contraction(schedule))
    if method == "hadamard-blocks":
        raise ConsensusError(f"{schedule.name}: rounds do not commute with flips of the node index")
    if method == "product-svd" or (method is None and n <= DENSE_MAX_N):
        return _product_svd(schedule, ops, exact)
    if method == "exact-projection-check":
        raise ConsensusError(f"{schedule.name}: not exact within one period; use another method")
    return _metrics(
        n, period, exact, _power_iteration(ops, n), "power-iteration", worst_round_contraction(schedule)
    )


def round_contraction(rnd: Round) -> float:
    """||W - J||_2 of one round of disjoint groups, in O(n) (module doc): 1 with two or more groups."""
    sizes = rnd.group_sizes()
    nonempty = np.flatnonzero(sizes)
    if nonempty.size != 1:
        return 1.0 if nonempty.size > 1 else 0.0
    n = int(sizes[nonempty[0]])
    if n == 1:
        return 0.0
    w = float(rnd.weights[nonempty[0]])
    return abs(w - (1.0 - w) / (n - 1))


def worst_round_contraction(schedule: Schedule) -> float:
    """max over the schedule's rounds of ||W_r - J||_2, without n x n matrices (module doc)."""
    if schedule.n == 1:
        return 0.0
    if schedule.static_graph is not None:
        return float(np.abs(np.fft.fft(schedule.static_graph.circulant_row)[1:]).max())
    return max(round_contraction(r) for r in schedule.rounds)


# ---------------------------------------------------------------- round operators (no n x n matrices)

_Op = tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]  # (W x, W^T x)


def _group_op(rnd: Round) -> _Op:
    """x <- a * x + c * (sum of x over the group), a and c per group; symmetric, so W^T = W."""
    sizes = rnd.group_sizes().astype(float)
    c_g = np.where(sizes > 1, (1.0 - rnd.weights) / np.maximum(sizes - 1.0, 1.0), 0.0)
    a_g = np.where(sizes > 1, rnd.weights - c_g, 1.0)
    labels, groups = rnd.labels, sizes.size
    a, c = a_g[labels], c_g[labels]

    order = np.argsort(labels, kind="stable")
    starts = np.flatnonzero(np.r_[True, labels[order][1:] != labels[order][:-1]])
    present = labels[order][starts]

    def apply(x: np.ndarray) -> np.ndarray:
        if x.ndim == 1:
            return a * x + c * np.bincount(labels, weights=x, minlength=groups)[labels]
        sums = np.zeros((groups, *x.shape[1:]))  # every column at once: one reduceat over sorted rows
        sums[present] = np.add.reduceat(x[order], starts, axis=0)
        return a[:, None] * x + c[:, None] * sums[labels]

    return apply, apply


def _circulant_op(row: np.ndarray) -> _Op:
    """W[i, j] = row[(j - i) mod n]: W x is a cross-correlation, W^T x a convolution."""
    f = np.fft.fft(row)

    def apply(x: np.ndarray) -> np.ndarray:  # x a vector or a matrix of columns
        return np.real(np.fft.ifft(_along_rows(np.conj(f), x) * np.fft.fft(x, axis=0), axis=0))

    def apply_t(x: np.ndarray) -> np.ndarray:
        return np.real(np.fft.ifft(_along_rows(f, x) * np.fft.fft(x, axis=0), axis=0))

    return apply, apply_t


def _along_rows(v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """v shaped to scale x's rows, whether x is a vector or a matrix of columns."""
    return v.reshape(v.shape + (1,) * (x.ndim - 1))


def _operators(schedule: Schedule) -> list[_Op]:
    if schedule.static_graph is not None:
        return [_circulant_op(schedule.static_graph.circulant_row)]
    return [_group_op(r) for r in schedule.rounds]


def _exact_rounds_by_projection(ops: list[_Op], n: int, max_rounds: int) -> int | None:
    """First t at which a random mean-zero start is averaged out (it stays mean-zero: doubly stochastic)."""
    x = np.random.default_rng(12345).standard_normal(n)
    x -= x.mean()
    tol = EXACT_TOL * np.abs(x).max()
    for t in range(1, max_rounds + 1):
        x = ops[(t - 1) % len(ops)][0](x)
        if np.abs(x).max() <= tol:
            return t
    return None


def _power_iteration(ops: list[_Op], n: int) -> float:
    """sigma_max(P - J) by power iteration on (P - J)^T (P - J); a lower bound that converges from below."""
    v = np.random.default_rng(54321).standard_normal(n)
    sigma2 = 0.0
    for _ in range(POWER_ITERATIONS):
        v -= v.mean()
        v /= np.linalg.norm(v)
        y = v
        for apply, _t in ops:
            y = apply(y)
        y -= y.mean()
        for _a, apply_t in reversed(ops):
            y = apply_t(y)
        y -= y.mean()
        new = float(v @ y)
        if new <= 0.0 or abs(new - sigma2) <= 1e-12 * new:
            sigma2 = max(new, 0.0)
            break
        sigma2, v = new, y
    return math.sqrt(sigma2)


# ---------------------------------------------------------------- dense (small n)


def _product_svd(schedule: Schedule, ops: list[_Op], exact: int | None) -> ConsensusMetrics:
    """rho from one SVD of the period product, built column-wise by the rounds' O(n) operators; the
    exact rounds are the projection check's (`exact`, found on the same operators); the worst round by
    its O(n) count."""
    n, period = schedule.n, schedule.period
    if n > 4096:
        raise ConsensusError("the period product is only built for n <= 4096")
    prod = np.eye(n)
    for t in range(period):
        prod = ops[t % len(ops)][0](prod)  # W_t applied to every column of the product so far
    rho = float(np.linalg.svd(prod - 1.0 / n, compute_uv=False)[0])
    return _metrics(n, period, exact, rho, "product-svd", worst_round_contraction(schedule))


def dense_rounds(schedule: Schedule) -> list[np.ndarray]:
    """The n x n mixing matrix of every round (a static graph's included); only for small n."""
    n = schedule.n
    if n > 4096:
        raise ConsensusError("dense mixing matrices are only built for n <= 4096")
    if schedule.static_graph is not None:
        row = schedule.static_graph.circulant_row
        idx = np.arange(n)
        return [row[(idx[None, :] - idx[:, None]) % n]]
    return [r.dense() for r in schedule.rounds]


def _dense(schedule: Schedule) -> ConsensusMetrics:
    n, period = schedule.n, schedule.period
    mats = dense_rounds(schedule)
    j = np.full((n, n), 1.0 / n)
    prod, exact, rho = np.eye(n), None, None
    for t in range(1, PERIODS_TRIED * period + 1):
        prod = mats[(t - 1) % period] @ prod
        if t == period:
            rho = float(np.linalg.svd(prod - j, compute_uv=False)[0])
        if exact is None and np.abs(prod - j).max() <= EXACT_TOL:
            exact = t
        if exact is not None and rho is not None:
            break
    worst = max(float(np.linalg.svd(w - j, compute_uv=False)[0]) for w in mats)
    return _metrics(n, period, exact, rho, "dense-svd", worst)


# ---------------------------------------------------------------- (block-)circulant structure


def _rotation_invariant(rnd: Round, s: int) -> bool:
    """Does rotating ranks by s map every group onto a group with the same weight?"""
    a, b = rnd.labels, np.roll(rnd.labels, -s)
    image = np.empty(rnd.weights.size, dtype=np.int64)
    image[a] = b
    if not np.array_equal(image[a], b):
        return False
    if np.bincount(image, minlength=image.size).max() != 1:
        return False
    return bool(np.array_equal(rnd.weights[image], rnd.weights))


def _block_symbol(rnd: Round, s: int) -> np.ndarray:
    """Fourier symbol (s, s, n/s) of a round that is invariant under rotation by s.

    W[(I, a), (J, b)] = B[(J - I) mod M][a, b] with M = n/s; symbol[a, b, f] = sum_d B[d][a, b] e^{-2 pi i d f/M}.
    Products of such matrices multiply their symbols mode by mode.
    """
    m = rnd.n // s
    blocks = np.zeros((s, s, m))
    sizes = rnd.group_sizes()
    for a in range(s):
        g = rnd.labels[a]
        members = np.flatnonzero(rnd.labels == g)
        w = rnd.weights[g]
        vals = np.full(members.size, (1.0 - w) / max(sizes[g] - 1, 1))
        vals[members == a] = w if sizes[g] > 1 else 1.0
        blocks[a, members % s, members // s] = vals
    return np.fft.fft(blocks, axis=-1)


def _symbols(schedule: Schedule) -> tuple[list[np.ndarray], str] | None:
    """Per-round Fourier symbols (s, s, M) when the schedule is (block-)circulant, else None."""
    n = schedule.n
    if schedule.static_graph is not None:
        row = schedule.static_graph.circulant_row
        # W[0, j] = row[j]: the s = 1 case of _block_symbol
        return [np.fft.fft(row)[None, None, :]], "fft-circulant"
    for s in range(1, min(MAX_BLOCK, n) + 1):
        if n % s == 0 and all(_rotation_invariant(r, s) for r in schedule.rounds):
            method = "fft-circulant" if s == 1 else "fft-block-circulant"
            return [_block_symbol(r, s) for r in schedule.rounds], method
    return None


def _largest_singular(sym: np.ndarray) -> float:
    """max over modes of the spectral norm of the s x s matrices sym[:, :, f]."""
    s = sym.shape[0]
    if s == 1:
        return float(np.abs(sym[0, 0]).max())
    if s == 2:
        a, b, c, d = sym[0, 0], sym[0, 1], sym[1, 0], sym[1, 1]
        h00 = np.abs(a) ** 2 + np.abs(c) ** 2
        h11 = np.abs(b) ** 2 + np.abs(d) ** 2
        h01 = np.conj(a) * b + np.conj(c) * d
        half = 0.5 * (h00 + h11)
        top = half + np.sqrt(np.maximum(half**2 - (h00 * h11 - np.abs(h01) ** 2), 0.0))
        return float(np.sqrt(top.max()))
    return float(np.linalg.norm(np.moveaxis(sym, -1, 0), ord=2, axis=(1, 2)).max())


def _minus_mean(sym: np.ndarray) -> np.ndarray:
    """Remove J: at mode 0 the s x s block acts on block-constant vectors; J is its all-ones / s part."""
    out = sym.copy()
    out[:, :, 0] -= 1.0 / sym.shape[0]
    return out


def _from_symbols(schedule: Schedule, symbols: list[np.ndarray], method: str) -> ConsensusMetrics:
    period = len(symbols)
    prod = None
    exact, rho = None, None
    for t in range(1, PERIODS_TRIED * period + 1):
        w = symbols[(t - 1) % period]
        prod = w if prod is None else np.einsum("abf,bcf->acf", w, prod)
        dev = _minus_mean(prod)
        if t == period:
            rho = _largest_singular(dev)
        if exact is None and np.abs(dev).max() <= EXACT_TOL:
            exact = t
        if exact is not None and rho is not None:
            break
    return _metrics(schedule.n, period, exact, rho, method, worst_round_contraction(schedule))

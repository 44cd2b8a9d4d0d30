"""The recurrence's random draws: each rank's compute per iteration and its measured step's deviation,
in blocks of iterations from seeded streams, shared by every run of a batch that can share them.

Why blocks: one numpy call per block of iterations instead of one per iteration (advise --profile's
speed); a block holds the very values one draw per iteration gives (tests/test_distributions.py). Why
shared: runs whose distributions take the same raw randomness (distributions.raw_key) turn one raw draw
into each one's own samples, so a crossover's compute search runs as one batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from runtime_model.core.distributions import NormalCompute
from runtime_model.core.scenario import Compute

DRAW_VALUES = (
    1 << 15
)  # normals drawn at once, whole iterations (the stream is that of one draw per iteration)


def draw_block(n: int) -> int:
    """Iterations drawn at once: a block stays in cache (the generator is ~2x slower past it)."""
    return max(1, DRAW_VALUES // max(n, 1))


STEP_STREAM = 7  # the step deviations' own stream beside the seed


def stream_key(compute: Compute) -> object:
    """What decides a run's compute draws besides n and the seed: for i.i.d. Normal compute only the
    standard normals (C = mean + sd z, so runs with different means share them), else the compute itself."""
    if compute.variation.is_iid and type(compute.distribution) is NormalCompute and not compute.step_varies:
        return "normal"
    return compute


def shared_stream_key(compute: Compute) -> object:
    """stream_key, widened for run_jobs: computes without a node term whose distributions (and measured
    step spreads) take the same raw randomness (distributions.raw_key) share one batch, each turning the
    shared raw draws into its own (a crossover's compute search scales one measured distribution)."""
    key = stream_key(compute)
    if key == "normal" or compute.variation.node_cv > 0:
        return key
    spread = compute.step_spread.raw_key() if compute.step_varies else None
    return ("shared", compute.distribution.raw_key(), spread)


def compute_draws(computes: Sequence[Compute], n: int, gpus_per_node: int, seed: int):
    """C_i(t) + t_O for t = 0, 1, ..., per distinct compute (shape (computes, n)): the seeded stream each
    job's own run draws. i.i.d. Normal draws are standard normals in blocks (the stream of one draw per
    iteration), each compute's mean + sd z formed as Compute.sampler forms it; otherwise one compute."""
    rng = np.random.default_rng(seed)
    comp = computes[0]
    if stream_key(comp) == "normal":
        mean = np.array([c.distribution.mean_s for c in computes])[:, None, None]
        sd = np.array([c.distribution.sd_s for c in computes])[:, None, None]
        opt = np.array([c.optimizer_s for c in computes])[:, None, None]
        while True:  # a block's iterations formed at once: the same operations on every value
            block = (mean + sd * rng.standard_normal((draw_block(n), n))) + opt
            for t in range(block.shape[1]):
                yield block[:, t]
    if comp.block_sampler(n) is not None:  # blocks of iterations, the same stream as one draw per iteration
        yield from _shared_draws(computes, n, rng)
    draw = comp.sampler(n, gpus_per_node)
    while True:
        yield (draw(rng) + comp.optimizer_s)[None, :]


def _shared_draws(computes: Sequence[Compute], n: int, rng):
    """Compute.block_sampler's draws + t_O for every compute from one raw draw per block: each compute's
    rows are the very values its own run draws (shared_stream_key gives them one raw randomness)."""
    factors = [None if c.variation.is_iid else c.variation.factors(n) for c in computes]
    rows = draw_block(n)
    while True:
        raw = computes[0].distribution.raw_draw(rng, (rows, n))
        parts = [c.distribution.from_raw(raw) for c in computes]
        block = np.stack(
            [
                (p if s is None else s * p) + c.optimizer_s
                for c, s, p in zip(computes, factors, parts, strict=True)
            ]
        )
        for t in range(rows):
            yield block[:, t]


def step_draws(compute: Compute, n: int, seed: int):
    """Each rank's step deviation per iteration (Compute.step_deviations), on a stream of its own so the
    compute draws stay those of a run without it; None without a measured spread. Drawn in blocks of
    iterations: both spreads (Normal, empirical) take one value of the stream per rank, so a block holds
    the very values one draw per iteration gives (tests/test_distributions.py)."""
    draws = step_draws_of([compute], n, seed)
    return None if draws is None else (row[0] for row in draws)


def step_draws_of(computes: Sequence[Compute], n: int, seed: int):
    """step_draws of every compute of a batch at once, shape (computes, n) per iteration, from one raw
    draw (their spreads share a raw_key: shared_stream_key)."""
    if computes[0].step_deviations(n) is None:
        return None
    spreads, rng = [c.step_spread for c in computes], np.random.default_rng((seed, STEP_STREAM))
    rows = draw_block(n)

    def blocks():
        while True:
            raw = spreads[0].raw_draw(rng, (rows, n))
            block = np.stack([s.from_raw(raw) - s.mean_s for s in spreads])
            for t in range(rows):
                yield block[:, t]

    return blocks()

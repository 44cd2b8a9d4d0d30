"""The structure of compute variation: C_i(t) = mu x s_i x (1 + node term + iid term).

Why a structure and not one distribution: i.i.d. jitter and a persistently slow GPU act in opposite
directions on gossip. All-Reduce waits every iteration for the slowest of n, gossip only for its group
one iteration earlier, so gossip escapes much of i.i.d. jitter. But with Decent-DP's bounded slack a
connected schedule runs, in the long run, at the slowest rank's rate: no topology escapes a persistent
straggler. And ranks of one node share a host, a power budget and a switch, so their slowness is
correlated (the node term).

- s_i, persistent per rank: `straggler_count` ranks (the first ones, node 0 first) `straggler_factor`
  times slower; a spread `rank_cv` across all ranks, drawn once (a fixed seed); or the per-rank factors a
  profile measured (`rank_factors`, used when the shape is the measured one).
- node term: Normal(0, node_cv) per node and iteration, shared by the node's ranks.
- iid term: the Compute's distribution (Normal with the compute CV, or the measured samples).
The same draws serve All-Reduce and every topology (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime_model.core.constraints import AT_LEAST_ONE, COMPUTE_CV, Interval

PERSISTENT_SEED = 20241016  # the rank spread is drawn once, the same for every prediction
MIN_FACTOR = 0.05  # a rank_cv draw below this would be a GPU 20x faster than the mean: clipped
STRAGGLER_FACTOR = Interval(1.0, 100.0, closed="both")  # 1 = no straggler; slower only
NODE_CV = COMPUTE_CV
RANK_CV = COMPUTE_CV


@dataclass(frozen=True)
class Variation:
    """Persistent and node-correlated parts of compute variation (the i.i.d. part is the distribution)."""

    straggler_factor: float = 1.0
    straggler_count: int = 0
    rank_cv: float = 0.0
    node_cv: float = 0.0
    rank_factors: tuple[float, ...] | None = None  # measured s_i at the measured shape
    source: str = ""

    def __post_init__(self):
        STRAGGLER_FACTOR.check("straggler_factor", self.straggler_factor)
        if self.straggler_count:
            AT_LEAST_ONE.check("straggler_count", self.straggler_count)
        RANK_CV.check("rank_cv", self.rank_cv)
        NODE_CV.check("node_cv", self.node_cv)

    @property
    def is_iid(self) -> bool:
        """No persistent or node-correlated part: every rank draws from the same distribution."""
        no_straggler = self.straggler_factor == 1.0 or self.straggler_count == 0
        return no_straggler and self.rank_cv == 0 and self.node_cv == 0 and self.rank_factors is None

    def factors(self, n: int) -> np.ndarray:
        """s_i for n ranks: measured factors when there are n of them, else the rank spread, times the
        stragglers' slowdown on the first straggler_count ranks."""
        if self.rank_factors is not None and len(self.rank_factors) == n:
            s = np.asarray(self.rank_factors, dtype=float)
        elif self.rank_cv > 0:
            z = np.random.default_rng(PERSISTENT_SEED).standard_normal(n)
            s = np.maximum(1.0 + self.rank_cv * z, MIN_FACTOR)
        else:
            s = np.ones(n)
        if self.straggler_count and self.straggler_factor != 1.0:
            s = s.copy()
            s[: min(self.straggler_count, n)] *= self.straggler_factor
        return s

    def sample(
        self, base: np.ndarray, mean_s: float, rng: np.random.Generator, gpus_per_node: int, s: np.ndarray
    ):
        """One iteration's C_i from i.i.d. draws `base` (mean mu): s_i x (base_i + mu x node term)."""
        if self.node_cv > 0:
            nodes = -(-base.shape[0] // gpus_per_node)
            z = np.repeat(rng.standard_normal(nodes), gpus_per_node)[: base.shape[0]]
            base = base + mean_s * self.node_cv * z
        return s * base

    def describe(self) -> str:
        parts = []
        if self.straggler_count and self.straggler_factor != 1.0:
            ranks = "rank 0" if self.straggler_count == 1 else f"ranks 0-{self.straggler_count - 1}"
            parts.append(f"{ranks} {self.straggler_factor:g}x slower")
        if self.rank_factors is not None:
            parts.append("measured per-rank speeds")
        if self.rank_cv:
            parts.append(f"rank spread cv {self.rank_cv:g}")
        if self.node_cv:
            parts.append(f"node cv {self.node_cv:g}")
        return ", ".join(parts) or "i.i.d."


def parse_straggler(text: str) -> tuple[float, int]:
    """'FACTOR[:COUNT]' -> (factor, count); count defaults to 1. ValueError with what is wrong."""
    factor_text, _, count_text = text.partition(":")
    try:
        factor = float(factor_text)
        count = int(count_text) if count_text else 1
    except ValueError:
        raise ValueError(f"expected FACTOR[:COUNT] such as 2.0 or 1.5:4, got {text!r}") from None
    return factor, count

"""What a consensus computation returns: the metrics of one schedule, built from its rate and exact rounds.

Why a module of its own: every method (consensus.py and its structural paths) builds the same record
the same way; kept apart so those modules stay small and share no import cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime_model.core.errors import UserError

EXACT_TOL = 1e-9


class ConsensusError(UserError):
    """A consensus computation was asked for something it cannot do (unknown method, n too large)."""


@dataclass(frozen=True)
class ConsensusMetrics:
    exact_rounds: int | None
    rho: float
    rho_per_round: float
    spectral_gap: float
    transient_proxy: float
    method: str
    worst_round_contraction: float  # max_r ||W_r - J||_2 (module doc)
    tau_over_p: float  # period / (1 - rho^2), Koloskova et al. 2020 (module doc)


def _metrics(
    n: int, period: int, exact_rounds: int | None, rho: float, method: str, worst_round: float
) -> ConsensusMetrics:
    if exact_rounds is not None and exact_rounds <= period:
        rho = 0.0  # the period product is J; floating-point residue is not a rate
    rho = float(min(max(rho, 0.0), 1.0))
    per_round = rho ** (1.0 / period)
    if per_round == 0.0:
        proxy = 0.0
    elif per_round >= 1.0:
        proxy = math.inf
    else:
        proxy = n**3 * per_round**4 / (1.0 - per_round) ** 4
    worst_round = 0.0 if worst_round <= EXACT_TOL else float(min(worst_round, 1.0))  # residue is not a rate
    tau_over_p = math.inf if rho >= 1.0 else period / (1.0 - rho * rho)
    return ConsensusMetrics(
        exact_rounds, rho, per_round, 1.0 - per_round, proxy, method, worst_round, tau_over_p
    )

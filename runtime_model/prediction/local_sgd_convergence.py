"""What local SGD costs in convergence: its loss at All-Reduce's tokens, from published scaling laws.

Why a published fit and not theory: local SGD's loss depends on the number of replicas M, the model size
N and the cadence H in ways no bound pins down; the one systematic measurement is Charles et al.,
"Scaling Laws for DiLoCo" (arXiv 2503.09799, 2025): C4 evaluation loss of DiLoCo with M = 1, 2, 4, 8
replicas against data parallelism at the same tokens (D = 20 N), H = 30, models of 35M..2.4B (checked at
4B and 10B), each with its tuned hyper-parameters. Used here (nothing fitted by rtmodel):
- Table 7, per M: L(N) = A N^alpha (data parallelism: A 18.129, alpha -0.0953);
- Table 10, joint: L(N, M) = 19.226 N^-0.0985 M^0.0116, for M beyond the table (extrapolated).
The loss ratio against data parallelism's fit at the same N is what the advice reports.

Classes (the advisor's words, as for gossip in convergence.py):
- "measured": M in the table, H = 30 as measured, N in the fits' range, and the loss no worse than data
  parallelism's: the time to the same loss is known (All-Reduce's tokens);
- "penalized": as measured, but the loss is higher at the same tokens (more tokens needed, how many the
  source does not say): only a lower bound on the time to the same loss;
- "extrapolated": M beyond the table, another H (Fig. 9 measures H = 1..300, as a plot only: loss rises
  with H beyond 1, less for larger models) or N outside the fits: the joint fit's ratio, not known.
Compression (FP16, OpenDiLoCo; int8, INTELLECT-1; FP4, Streaming DiLoCo) and Streaming DiLoCo's overlap
(tau <= 10 costs < 0.2 % loss, arXiv 2501.18512) are reported by their sources to keep the loss; they do
not change the class.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_model.prediction.local_sgd import LocalSgd

SOURCE = "Charles et al. 2025, Scaling Laws for DiLoCo, arXiv 2503.09799"
MEASURED_H = 30  # the cadence of the source's loss tables and fits
DP_FIT = (18.129, -0.0953)  # Table 7, data parallelism: L = A N^alpha
PER_M_FIT = {
    1: (18.363, -0.0961),
    2: (18.768, -0.0969),
    4: (19.762, -0.0992),
    8: (21.051, -0.1018),
}  # Table 7
JOINT_FIT = (19.226, -0.0985, 0.0116)  # Table 10: L = A N^alpha M^beta
FIT_PARAMS = (35e6, 10e9)  # the fits' models (35M..2.4B in Table 4, checked at 4B and 10B in Table 5)

MEASURED, PENALIZED, EXTRAPOLATED = "measured", "penalized", "extrapolated"
RANKS = {MEASURED: 1, PENALIZED: 2, EXTRAPOLATED: 3}  # after "exact" (0), as convergence.CLASSES ranks


@dataclass(frozen=True)
class LocalSgdCost:
    """Local SGD's loss at All-Reduce's tokens relative to All-Reduce's, and how well that is known."""

    kind: str  # MEASURED, PENALIZED or EXTRAPOLATED
    loss_ratio: float  # DiLoCo's fitted loss / data parallelism's, same N and tokens
    replicas: int
    params: float

    @property
    def rank(self) -> int:
        return RANKS[self.kind]

    def describe(self) -> str:
        """One phrase for the verdict and the JSON."""
        change = f"loss {100 * (self.loss_ratio - 1):+.1f}% at All-Reduce's tokens"
        where = f"M={self.replicas} replicas, {self.params / 1e6:.0f}M parameters"
        if self.kind == EXTRAPOLATED:
            return f"{change} by the joint fit beyond what was measured ({where}; {SOURCE}, Table 10)"
        return f"{change} ({where}; {SOURCE}, Table 7)"


def _loss(fit: tuple[float, ...], params: float, replicas: int = 1) -> float:
    a, alpha, *beta = fit
    return a * params**alpha * (replicas ** beta[0] if beta else 1.0)


def local_sgd_cost(opts: LocalSgd, replicas: int, params: float) -> LocalSgdCost:
    """The class and loss ratio of local SGD with `replicas` replicas of a `params`-parameter model."""
    in_range = FIT_PARAMS[0] <= params <= FIT_PARAMS[1]
    baseline = _loss(DP_FIT, params)
    if replicas in PER_M_FIT and opts.inner_steps == MEASURED_H and in_range:
        ratio = _loss(PER_M_FIT[replicas], params) / baseline
        return LocalSgdCost(MEASURED if ratio <= 1.0 else PENALIZED, ratio, replicas, params)
    ratio = _loss(JOINT_FIT, params, replicas) / baseline
    return LocalSgdCost(EXTRAPOLATED, ratio, replicas, params)

"""What a topology's consensus costs in iterations: the convergence side of a recommendation.

Why: the advisor ranks time per iteration, but the paper's claim is runtime under a fixed iteration
budget *with accuracy kept*. A schedule that averages slowly needs more iterations to the same loss,
and no per-iteration win pays for a topology whose models barely agree at the user's scale.

The theory (cited, nothing fitted):
- Koloskova et al., "A Unified Theory of Decentralized SGD with Changing Topology and Local Updates"
  (ICML 2020), Theorem 2 (non-convex): iterations to an accuracy eps grow as
  sigma^2 / (n eps^2) + sigma sqrt(tau/p) / eps^(3/2) + tau / (p eps)  (times L f_0), with every worker
  sampling the whole data set (zeta = 0, data-parallel training). The first term is All-Reduce's
  (mini-batch SGD); the topology enters only through tau/p (`ConsensusMetrics.tau_over_p`).
- Solving for the iterations where the consensus term stops mattering gives the transient stage
  T_trans ~ n^3 (tau/p)^2 L f_0 / sigma^2 (Ying et al., NeurIPS 2021, state the same n^3/(1-rho)^2 for the
  exponential graphs). With the global batch fixed (the paper's recipe: 25,000 tokens at every n), each
  worker's gradient noise sigma^2 grows with n, so T_trans ~ n^2 (tau/p)^2 up to the problem's constants;
  a run of T iterations pays a fraction ~ (T_trans / T)^(1/4) extra iterations for consensus.
- The problem's constants are unknown, so the scale is anchored to a measurement, not chosen: the paper
  (Wang et al., arXiv 2410.11998, ICLR 2025) trained with the one-peer exponential graph and AER on up to
  64 GPUs and kept All-Reduce's quality under a fixed iteration budget. Its consensus term there
  (n = 64, tau/p = log2(64) = 6) is the reference: `transient_ratio` is T_trans relative to it, and the
  consensus term of the bound scales as transient_ratio^(1/4).

The four classes the advice reads:
- "exact": the models are averaged exactly every iteration (All-Reduce, complete): same iterations.
- "measured": transient_ratio <= 1: no more consensus than the paper measured to keep accuracy.
- "extrapolated": beyond that measurement; the theory says the consensus term is transient_ratio^(1/4)
  times the measured one: not known to keep accuracy in the same iterations.
- "hopeless": the consensus term is at least an order of magnitude (HOPELESS_TERM_FACTOR) beyond what was
  measured to keep accuracy: the advice never recommends it without an explicit warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime_model.convergence.consensus import ConsensusMetrics

REFERENCE_GPUS = 64  # the paper's largest runs (arXiv 2410.11998: "clusters with up to 64 GPUs")
REFERENCE_TAU_OVER_P = 6.0  # one-peer exponential graph at 64: exact in log2(64) = 6 rounds, p = 1
HOPELESS_TERM_FACTOR = 10.0  # an order of magnitude in the bound's consensus term beyond the measurement
HOPELESS_RATIO = HOPELESS_TERM_FACTOR**4  # the same, on transient_ratio (the term grows as its 1/4 power)
REFERENCE = (
    f"the largest measured to keep accuracy: one-peer exp. graph, {REFERENCE_GPUS} GPUs, arXiv 2410.11998"
)

EXACT, MEASURED, EXTRAPOLATED, HOPELESS = "exact", "measured", "extrapolated", "hopeless"
CLASSES = (EXACT, MEASURED, EXTRAPOLATED, HOPELESS)  # best first


@dataclass(frozen=True)
class ConsensusCost:
    """A topology's consensus cost at n GPUs relative to the measured reference (module doc)."""

    kind: str  # one of CLASSES
    transient_ratio: float  # n^2 (tau/p)^2 relative to the reference's; 0 for exact averaging
    term_factor: float  # the bound's consensus term relative to the reference's: transient_ratio ** 0.25

    @property
    def rank(self) -> int:
        """Position in CLASSES (0 = exact): what `--objective accuracy` ranks first."""
        return CLASSES.index(self.kind)

    def describe(self) -> str:
        """One phrase for the verdict and the JSON (the bound's consensus term against the reference)."""
        if self.kind == EXACT:
            return "exact average every iteration: All-Reduce's iterations"
        return f"consensus term {self.term_factor:.3g}x {REFERENCE}"


EXACT_COST = ConsensusCost(EXACT, 0.0, 0.0)


def consensus_cost(gpus: int, metrics: ConsensusMetrics | None) -> ConsensusCost:
    """The class and scale of a topology's consensus cost at `gpus` workers (module doc)."""
    if metrics is None or metrics.exact_rounds == 1 or gpus <= 1:
        return EXACT_COST
    if math.isinf(metrics.tau_over_p):
        return ConsensusCost(HOPELESS, math.inf, math.inf)
    ratio = (gpus / REFERENCE_GPUS) ** 2 * (metrics.tau_over_p / REFERENCE_TAU_OVER_P) ** 2
    kind = MEASURED if ratio <= 1.0 else EXTRAPOLATED if ratio < HOPELESS_RATIO else HOPELESS
    return ConsensusCost(kind, ratio, ratio**0.25)

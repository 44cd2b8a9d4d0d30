"""What calibration hands back: the model's parameter objects plus an account of how well they fit.

Why the reports travel with the parameters: a fitted bandwidth is only as good as its residuals and
the range of sizes it saw; the advisor and the CLI print these so a user can judge a prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from runtime_model.core.distributions import shifted
from runtime_model.core.scenario import BucketLayout, ClusterShape, Compute, Network, Scenario


@dataclass(frozen=True)
class DdpWork:
    """DDP's own work per phase (seconds per iteration): what the phases took under DDP with its
    exchanges skipped, less the bare phases (bucket copy-in in backward's hooks, the copy-back, the
    reducer's bookkeeping); never below 0."""

    forward_s: float
    backward_s: float
    optimizer_s: float

    def on(self, compute: Compute) -> Compute:
        """DDP's compute: the bare one with this work added (the spread of C moved, not widened)."""
        return replace(
            compute,
            forward_s=compute.forward_s + self.forward_s,
            backward_s=compute.backward_s + self.backward_s,
            optimizer_s=compute.optimizer_s + self.optimizer_s,
            distribution=shifted(compute.distribution, self.forward_s + self.backward_s),
        )


@dataclass
class FitReport:
    """One fit: parameter -> (value, 1-sigma uncertainty), goodness of fit, data range, warnings.

    kind: "pattern" (an all-reduce pattern's line, the one the model uses), "pattern-small" (the
    small-message regime of a pattern, reported only), "link" (a link class combined from patterns),
    "compute" (the compute-time distribution and bucket timing).
    """

    name: str
    kind: str
    params: dict[str, tuple[float, float]]
    r2: float | None = None
    worst_rel_residual: float | None = None
    n_points: int = 0  # message sizes for pattern fits, estimates for links, samples for compute
    n_samples: int = 0
    size_range_bytes: tuple[int, int] | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Calibration:
    """Fitted runtime-model parameters for the measured cluster and how they were obtained.

    provenance maps a parameter (e.g. "inter.bandwidth_Bps") to where it came from, e.g.
    "measured (pair-inter p2-s2-q2, 17 sizes)" or "preset tcp-25g".
    """

    network: Network
    compute: Compute
    buckets: BucketLayout
    measured_shape: ClusterShape
    fits: list[FitReport]
    provenance: dict[str, str]
    notes: list[str]
    profile_info: dict[str, str | None] = field(default_factory=dict)
    gossip_compute: Compute | None = None  # Decent-DP's own, where its per-bucket work was measured
    ddp_work: DdpWork | None = None  # DDP's own host work, where the profile measured it

    def scenario(self, shape: ClusterShape, description: str = "") -> Scenario:
        """These parameters placed on `shape`: the one way a calibration becomes a Scenario (DDP's and
        Decent-DP's own work included where the profile measured them; `compute` is the bare one)."""
        if self.ddp_work is None:
            return Scenario(shape, self.network, self.compute, self.buckets, description, self.gossip_compute)
        ddp = self.ddp_work.on(self.compute)
        gossip = self.gossip_compute if self.gossip_compute is not None else self.compute
        return Scenario(shape, self.network, ddp, self.buckets, description, gossip)

    def fit(self, name: str) -> FitReport:
        """The report named `name` (KeyError lists the available names)."""
        for f in self.fits:
            if f.name == name:
                return f
        raise KeyError(f"no fit named {name!r}; have: {', '.join(f.name for f in self.fits)}")

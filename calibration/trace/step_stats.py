"""How the traced steps varied: the all-reduce's time per step, and the share of each step the device
sat idle.

Why: the model takes the buckets' median all-reduce times and the mean compute; a reader deciding how
far to trust that needs the spread those summarize (an all-reduce that swings 2x from step to step
makes a steady prediction optimistic) and how much of the step no kernel ran (an input-bound loop's
idle time stays whatever the network does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepStats:
    """Per traced step (every rank's): the DDP buckets' all-reduce time and the device's idle share."""

    allreduce_s: tuple[float, ...]
    idle_share: tuple[float, ...]
    device: str  # "GPU", or "CPU" for CPU ranks (their ops and gloo's)

    @property
    def allreduce_cv(self) -> float:
        """sd / mean of the per-step all-reduce time (sample sd; 0 with one step or none sent)."""
        a = np.asarray(self.allreduce_s)
        return float(a.std(ddof=1) / a.mean()) if a.size > 1 and a.mean() > 0 else 0.0

    def allreduce_percentiles(self) -> tuple[float, float]:
        """(p10, p90) of the per-step all-reduce time, in seconds (linear interpolation)."""
        a = np.asarray(self.allreduce_s)
        return float(np.percentile(a, 10)), float(np.percentile(a, 90))

    @property
    def mean_idle_share(self) -> float:
        return float(np.mean(self.idle_share))

    def allreduce_line(self) -> str:
        a = np.asarray(self.allreduce_s)
        if not a.size or a.max() <= 0:
            return "no DDP all-reduce ran in the traced steps"
        p10, p90 = self.allreduce_percentiles()
        return (
            f"the buckets' kernels summed per step: mean {a.mean() * 1e3:,.2f} ms over {a.size} steps, cv "
            f"{self.allreduce_cv:.1%}, p10-p90 {p10 * 1e3:,.2f}-{p90 * 1e3:,.2f} ms"
        )

    def idle_line(self) -> str:
        what = (
            "no op ran on the ranks' threads and no gloo collective was in flight; host time between ops "
            "counts as idle"
            if self.device == "CPU"
            else "no kernel, copy or collective ran on the GPU"
        )
        s = np.asarray(self.idle_share)
        return (
            f"{self.device} idle {self.mean_idle_share:.1%} of the step, {s.min():.1%}-{s.max():.1%} over "
            f"{s.size} steps: the time {what}"
        )

    def as_inputs(self) -> dict:
        """The JSON inputs' record of both."""
        p10, p90 = self.allreduce_percentiles()
        return {
            "allreduce_per_step": {
                "per_step_ms": [t * 1e3 for t in self.allreduce_s],
                "mean_ms": float(np.mean(self.allreduce_s)) * 1e3,
                "cv": self.allreduce_cv,
                "p10_ms": p10 * 1e3,
                "p90_ms": p90 * 1e3,
            },
            "idle_share": {
                "device": self.device,
                "mean": self.mean_idle_share,
                "per_step": list(self.idle_share),
            },
        }


def step_stats(steps: dict, count: int, on_cpu: bool) -> StepStats:
    """StepStats of the traced steps (dict rank -> TracedStep tuple). The all-reduce per step number over
    the steps that ran the usual `count` buckets, the least over the ranks that traced it (a rank that
    arrived early waited inside it for the last: the rest is the ranks' spread, as in the bucket times);
    the idle share per step of every rank."""
    every = [s for v in steps.values() for s in v]
    by_number: dict[int, list[float]] = {}
    for s in every:
        if len(s.buckets) == count:
            by_number.setdefault(s.number, []).append(s.allreduce_s)
    sent = [min(by_number[n]) for n in sorted(by_number)] or [0.0]
    idle = [s.idle_s / s.iteration_s if s.iteration_s > 0 else 0.0 for s in every]
    return StepStats(tuple(sent), tuple(idle), "CPU" if on_cpu else "GPU")

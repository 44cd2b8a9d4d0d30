"""Drift or model error? A validation run compares today's machine with a profile taken earlier; if the
compute itself has changed (another job on the host, clocks, a new driver), the model's "error" is
mostly the machine's drift (issue 50).

Each rank times the bare step again before the runs (rtmodel_validation/runner.run_bare: forward, backward,
optimizer, nothing sent, as the profile timed compute) and reads its host's 1-minute load average.
The drift is the median bare step now against the profile's compute; the model is then asked again
with the profile's compute scaled by it (Scenario.compute_scaled, links as profiled), and both errors
are reported: as profiled, and with today's compute. What remains in the second is the model's own.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from rtmodel_validation.job import RankReport
from rtmodel_validation.record_parts import ComputeDrift

if TYPE_CHECKING:
    from rtmodel_validation.plan import Plan


def drift_threshold() -> float:
    """Beyond this change of the bare step the profile no longer describes the machine: the worst speedup
    error of calibrated profiles on the emulated cluster (preset_data/accuracy.toml), the accuracy a
    fresh profile has shown."""
    from runtime_model.advice.confidence import PROFILE, measured_errors

    return measured_errors()[PROFILE].speedup_max_abs_error


def compute_drift(
    plan: Plan, reports: list[RankReport], allreduce_measured_s: float, topology_measured_s: float
) -> ComputeDrift | None:
    """The result's `drift` entry (None when the ranks timed no bare step or the plan has no profile
    compute): the bare step then and now, their relative change, each host's load average, and the
    errors on the mean with today's compute beside those as profiled."""
    medians = [statistics.median(r.bare_compute_s) for r in reports if r.bare_compute_s]
    if not medians or plan.profile_compute_s <= 0:
        return None
    from runtime_model.prediction.iteration import allreduce_prediction, gossip_prediction

    now_s = statistics.median(medians)
    factor = now_s / plan.profile_compute_s
    schedule = plan.model_inputs.schedule
    today = plan.model_inputs.scenario.compute_scaled(factor)
    ar_s = allreduce_prediction(today).mean_s
    topo_s = gossip_prediction(today, schedule).mean_s
    loads = {r.host: r.load_avg_1m for r in reports if r.load_avg_1m is not None}
    return ComputeDrift(
        profile_compute_s=plan.profile_compute_s,
        now_compute_s=now_s,
        drift=factor - 1.0,
        load_avg_1m=loads,
        allreduce_error_today=(ar_s - allreduce_measured_s) / allreduce_measured_s,
        topology_error_today=(topo_s - topology_measured_s) / topology_measured_s,
        beyond=abs(factor - 1.0) > drift_threshold(),
    )


def drift_line(drift: ComputeDrift, topology: str, ar_error: float, topo_error: float) -> str:
    """One line for the result's table: the drift, the errors with today's compute next to those as
    profiled, the load; and what to do when the machine moved beyond what a fresh profile errs by."""
    loads = ", ".join(f"{h} {v:.1f}" for h, v in sorted(drift.load_avg_1m.items()))
    line = (
        f"compute drift: the bare step is {drift.now_compute_s * 1e3:.1f} ms now, "
        f"{drift.profile_compute_s * 1e3:.1f} ms in the profile ({drift.drift:+.1%}); with today's compute "
        f"the model errs {drift.allreduce_error_today:+.1%} on All-Reduce and "
        f"{drift.topology_error_today:+.1%} on {topology} (as profiled: {ar_error:+.1%}, {topo_error:+.1%})"
    )
    if loads:
        line += f"; load average {loads}"
    if drift.beyond:
        line += (
            f". The compute moved more than a fresh profile errs by (±{drift_threshold():.1%}): the "
            "machine has changed since the profile; profile again (rtmodel profile) before judging the model"
        )
    return line

"""A scenario's forward + backward scaled, everything else kept.

Why one place: --compute-ms on a profile or a trace, and your measured DDP step (--step-ms), each
correct the compute the same way: forward and backward keep their split, the spread across
iterations and ranks scales with them, the optimizer step, the buckets and the network stay as they
were; DDP's compute and Decent-DP's scale together, so the model's difference between them (DDP's
bucket copies, Decent-DP's mixing) survives under a step's one factor. A factor of 1 changes nothing
but the source line.
"""

from __future__ import annotations

from dataclasses import replace

from runtime_model.core.scenario import Compute, Scenario


def scaled_forward_backward(compute: Compute, factor: float, source: str) -> Compute:
    """`compute` with forward, backward and their spread multiplied by `factor`; the step kept."""
    return replace(
        compute,
        forward_s=compute.forward_s * factor,
        backward_s=compute.backward_s * factor,
        distribution=compute.distribution.scaled(factor),
        source=source,
    )


def scaled_compute(scenario: Scenario, factor: float, source: str) -> Scenario:
    """`scenario` with DDP's and Decent-DP's forward + backward scaled by `factor` (source: why)."""
    gossip = scenario.gossip_compute
    return replace(
        scenario,
        compute=scaled_forward_backward(scenario.compute, factor, source),
        gossip_compute=None if gossip is None else scaled_forward_backward(gossip, factor, source),
    )


def with_compute_ms(scenario: Scenario, compute_ms: float) -> tuple[Scenario, str]:
    """(scenario with forward + backward = compute_ms per iteration, the line that says so): a profile's
    or a trace's compute replaced, DDP's and Decent-DP's each (both measured), their split, spread,
    optimizer time and buckets kept. compute_ms is checked by the model's one check of it, as with presets."""
    from runtime_model.presets.preset_choice import check_measured_times

    check_measured_times(compute_ms, None)

    def to_ms(compute: Compute) -> Compute:
        factor = compute_ms * 1e-3 / compute.compute_s if compute.compute_s > 0 else 1.0
        source = (
            f"your --compute-ms {compute_ms:g} ms (profile's forward/backward split and spread; "
            f"optimizer {compute.optimizer_s * 1e3:.3g} ms and buckets as profiled)"
        )
        return scaled_forward_backward(compute, factor, source)

    gossip = scenario.gossip_compute
    line = (
        f"--compute-ms {compute_ms:g}: replaces the profile's compute ({scenario.compute.compute_s * 1e3:,.1f} ms "
        "forward + backward per iteration); its communication, optimizer time and buckets are kept"
    )
    return replace(scenario, compute=to_ms(scenario.compute), gossip_compute=gossip and to_ms(gossip)), line

"""How rtmodel wraps a workload in Decent-DP, for validation's runs and the profile's wrapped iterations.

Why one place: the profile measures Decent-DP's per-bucket work so that validation's runs are predicted;
both must build the wrapper alike (one optimizer per bucket from the workload, the recipe's GradScaler,
the same bucket cap and node size). No decent_dp import here: the caller brings the class.
"""

from __future__ import annotations


def decent_dp_kwargs(
    workload, recipe, scaler, topology: str, bucket_cap_mb: float, local_world_size: int
) -> dict:
    """Keyword arguments of DecentralizedDataParallel(workload.model, **them)."""
    kwargs = {
        "optim_fn": lambda named: workload.make_optimizer([p for _, p in named], lr=1e-3, recipe=recipe),
        "topology": topology,
        "bucket_size_in_mb": bucket_cap_mb,
        "_local_world_size": local_world_size,
    }
    if scaler is not None:  # fp16: Decent-DP steps each bucket through it
        kwargs["scaler"] = scaler
    return kwargs

"""How rtmodel wraps a workload in DDP, for validation's runs and the profile's wrapped iterations.

Why one place: the profile measures DDP's own host work (bucket copies, hooks) so that validation's runs
are predicted; both must build the wrapper alike (device ids, bucket cap).
"""

from __future__ import annotations


def ddp_bucket_cap(cap_mb: float):
    """None keeps DDP's defaults (25 MB, 1 MB first bucket), which is what the profiler measured at 25 MB."""
    from runtime_model.core.defaults import BUCKET_CAP_MIB

    return None if cap_mb == BUCKET_CAP_MIB else cap_mb


def ddp_kwargs(device, bucket_cap_mb: float, **more) -> dict:
    """Keyword arguments of DistributedDataParallel(model, **them)."""
    ids = [device.index] if device.type == "cuda" else None
    return {"device_ids": ids, "bucket_cap_mb": ddp_bucket_cap(bucket_cap_mb), **more}

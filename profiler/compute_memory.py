"""The profile's peak memory: what each rank held in its DDP iterations (profiler.wrapped.measure_ddp_work).

Why in the profile: the advisor judges each method's memory (runtime_model/memory, docs/memory.md), and
its best source of the user's activations is the user's own run; the profile's DDP training is one.
Recorded with what the run held that the memory model prices differently: DDP's
`gradient_as_bucket_view` (torch/nn/parallel/distributed.py, `DistributedDataParallel.__init__`: with it
the buckets are the gradients, without it both exist), read from the wrapper itself.

In the profile's compute section (lists are one entry per rank, as the phases' samples):
  peak_memory_bytes    each rank's peak allocated bytes (absent: not measured; the source says why)
  peak_memory_source   "cuda max_memory_allocated" | "mem_tracker" | "not measured: ..."
  device_memory_bytes  what each rank's device holds (the GPU's, the host's for CPU ranks): the bound
  ddp_bucket_view      the DDP run's gradient_as_bucket_view
"""

from __future__ import annotations


def rank_memory(memory, ddp_model) -> dict:
    """This rank's record of its DDP run: the probe (rtmodel_harness.peak_memory.PeakMemory, after the
    run) and the DistributedDataParallel it trained."""
    from rtmodel_harness.peak_memory import device_memory_bytes

    return {
        "peak_bytes": memory.peak_bytes,
        "source": memory.source,
        "device_bytes": device_memory_bytes(memory.device),
        "ddp_bucket_view": bool(ddp_model.gradient_as_bucket_view),
    }


def compute_fields(per_rank: list[dict]) -> dict:
    """The compute section's memory fields from every rank's rank_memory (rank order). A peak is kept only
    where every rank measured one (one rank's missing peak would leave the maximum over ranks wrong)."""
    peaks = [r["peak_bytes"] for r in per_rank]
    devices = [r["device_bytes"] for r in per_rank]
    unmeasured = [r["source"] for r, p in zip(per_rank, peaks, strict=True) if p is None]
    return {
        "peak_memory_bytes": None if unmeasured else tuple(int(p) for p in peaks),
        "peak_memory_source": unmeasured[0] if unmeasured else per_rank[0]["source"],
        "device_memory_bytes": None if None in devices else tuple(int(d) for d in devices),
        "ddp_bucket_view": all(r["ddp_bucket_view"] for r in per_rank),
    }


def describe(fields: dict) -> str:
    """The progress line: the largest rank's peak, or why there is none."""
    peaks = fields["peak_memory_bytes"]
    if peaks is None:
        return f"compute: peak memory under DDP {fields['peak_memory_source']}"
    rank = max(range(len(peaks)), key=peaks.__getitem__)
    return (
        f"compute: peak memory under DDP {peaks[rank] / 2**20:.1f} MiB (rank {rank}, "
        f"{fields['peak_memory_source']})"
    )

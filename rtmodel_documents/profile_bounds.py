"""What a measured profile can hold across its fields, beside each field's own checks
(rtmodel_documents.profile_checks): ProfileError, one line naming the field and the bound.

Why a pass of its own: ProfileDocument.from_json also reads the profiler's checkpoints, whose sections
are written one at a time; these bounds tie sections together (the buckets to the model's bytes, a
rank's peak to its device), so they run on a whole profile (rtmodel_documents.profile_file).

- ranks at most MAX_GPUS (2^24, the most rtmodel answers for), at most MAX_RANKS_PER_NODE on one node (a
  GPU node holds 8 to 72 accelerators; 1,024 leaves room for CPU ranks a host runs);
- the gradient buckets describe one model: DDP's and Decent-DP's buckets hold its gradients, so each list
  sums to at most param_bytes x BUCKET_SLACK + 1 MiB (padding and alignment, in the profiles here 1.000006x)
  where param_bytes is recorded, and the two lists' sums are within BUCKETS_AGREE of each other;
- a collective moves its bytes no faster than MAX_ALGBW_Bps (bytes / time: 10 TB/s, as nccl-tests' and a
  trace's: NVLink 5 carries 1.8 TB/s per GPU, both directions together);
- a batch per rank of at most 1e10 units (the largest global batches are ~1.6e7 tokens), a bucket cap in
  (0, 1e6) MiB (the flag's range);
- a rank's peak memory (compute.peak_memory_bytes, profiler/compute_memory.py) at most what its device
  holds: the device_memory_bytes the profiler recorded beside it (torch.cuda.get_device_properties()
  .total_memory on a GPU, the host's physical memory for CPU ranks), else MAX_BYTES (2^40, more than any
  GPU holds: the largest hold 288 GB); a GPU's recorded memory itself at most MAX_BYTES.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtmodel_documents.profile_checks import MAX_BYTES, ProfileError, fail
from rtmodel_documents.profile_document import ProfileDocument, ProfileWorkload
from runtime_model.core.physical_bounds import MAX_GPUS_PER_NODE, MAX_ALGBW_Bps

MAX_RANKS_PER_NODE = MAX_GPUS_PER_NODE
BUCKET_SLACK = 1.25
BUCKETS_AGREE = 2.0


def check_physics(typed: ProfileDocument, origin: str) -> None:
    """ProfileError (one line) where the complete profile `typed` holds what no measured run can."""
    from runtime_model.core.constraints import BUCKET_CAP_MIB_RANGE, GLOBAL_BATCH
    from runtime_model.core.defaults import MAX_GPUS

    shape, wl, comm = typed.shape, typed.workload, typed.communication
    if shape.world_size > MAX_GPUS:
        raise ProfileError(
            f"{origin}: shape.world_size must be at most {MAX_GPUS:,}, got {shape.world_size:,}"
        )
    if shape.ranks_per_node > MAX_RANKS_PER_NODE:
        raise ProfileError(
            f"{origin}: shape.ranks_per_node must be at most {MAX_RANKS_PER_NODE:,}, got {shape.ranks_per_node:,}"
        )
    if wl.batch_per_rank and not GLOBAL_BATCH.contains(wl.batch_per_rank):
        raise ProfileError(
            f"{origin}: workload.batch_per_rank must be {GLOBAL_BATCH.describe()}, got {wl.batch_per_rank!r}"
        )
    for key in ("bucket_cap_mb", "ddp_first_bucket_mb"):
        value = getattr(wl, key)
        if value and not BUCKET_CAP_MIB_RANGE.contains(value):
            raise ProfileError(
                f"{origin}: workload.{key} must be {BUCKET_CAP_MIB_RANGE.describe()}, got {value!r}"
            )
    _check_buckets(wl, origin)
    for j, pattern in enumerate(comm.patterns):
        for i, res in enumerate(pattern.results):
            _check_rate(res.bytes, min(res.samples_s), f"communication.patterns[{j}].results[{i}]", origin)
    for j, entry in enumerate(comm.in_flight or ()):
        _check_rate(sum(entry.buckets_bytes), min(entry.in_flight_s), f"communication.in_flight[{j}]", origin)
    check_peak_memory(typed, origin)


def _check_buckets(wl: ProfileWorkload, origin: str) -> None:
    sums = {key: sum(getattr(wl, key)) for key in ("ddp_buckets_bytes", "gossip_buckets_bytes")}
    if wl.param_bytes:
        top = wl.param_bytes * BUCKET_SLACK + 2**20
        for key, total in sums.items():
            if total > top:
                raise ProfileError(
                    f"{origin}: workload.{key} sum to {total:,} bytes, more than the model's gradients hold "
                    f"(workload.param_bytes {wl.param_bytes:,} x {BUCKET_SLACK:g} + 1 MiB): not a measured bucket layout"
                )
    ddp, gossip = sums["ddp_buckets_bytes"], sums["gossip_buckets_bytes"]
    if max(ddp, gossip) > BUCKETS_AGREE * min(ddp, gossip):
        raise ProfileError(
            f"{origin}: workload.ddp_buckets_bytes sum to {ddp:,} bytes and workload.gossip_buckets_bytes to "
            f"{gossip:,}: both hold one model's gradients, so they agree within {BUCKETS_AGREE:g}x"
        )


def _check_rate(nbytes: int, fastest_s: float, where: str, origin: str) -> None:
    if nbytes / fastest_s > MAX_ALGBW_Bps:
        raise ProfileError(
            f"{origin}: {where} moved {nbytes:,} bytes in {fastest_s * 1e6:,.3f} us: {nbytes / fastest_s / 1e9:,.0f} GB/s "
            f"is beyond any machine's links (at most {MAX_ALGBW_Bps / 1e9:,.0f} GB/s)"
        )


def check_peak_memory(typed: ProfileDocument, origin: str) -> None:
    """ProfileError (one line naming the field) where a rank's peak or device memory is beyond its device."""
    compute = typed.compute
    if compute is None:
        return
    devices = compute.device_memory_bytes
    if devices is not None and typed.shape is not None and typed.shape.device == "cuda":
        for r, nbytes in enumerate(devices):
            if nbytes > MAX_BYTES:
                raise fail(
                    origin,
                    f"compute.device_memory_bytes[{r}]",
                    f"is {nbytes:,} bytes, more than any GPU holds (at most {MAX_BYTES:,}); re-profile",
                )
    for r, peak in enumerate(compute.peak_memory_bytes or ()):
        bound = devices[r] if devices is not None else MAX_BYTES
        if peak > bound:
            what = (
                f"rank {r}'s device (compute.device_memory_bytes[{r}] {bound:,})"
                if devices is not None
                else f"any GPU (at most {MAX_BYTES:,})"
            )
            raise fail(
                origin,
                f"compute.peak_memory_bytes[{r}]",
                f"is {peak:,} bytes, more than {what} holds; not a measured peak (re-profile)",
            )


def profiled_peak_bytes(
    profile_doc: Mapping[str, Any] | ProfileDocument, origin: str = "profile"
) -> float | None:
    """The largest rank's peak allocated bytes in the profile's DDP run (compute.peak_memory_bytes, with
    DDP's gradient_as_bucket_view as compute.ddp_bucket_view says), or None where the profile has none
    (not measured, or written before it was recorded). `profile_doc`: the parsed JSON or its
    ProfileDocument; checked first (ProfileError, one line, where it is not a usable profile)."""
    typed = (
        profile_doc
        if isinstance(profile_doc, ProfileDocument)
        else ProfileDocument.from_json(profile_doc, origin)
    )
    check_peak_memory(typed, origin)
    peaks = typed.compute.peak_memory_bytes if typed.compute is not None else None
    return float(max(peaks)) if peaks else None

"""A profile's measured peak memory (compute.peak_memory_bytes, profiler/compute_memory.py): bounded on
read, and read for the advisor's memory verdicts.

Why a bound beyond the schema's (rtmodel_util.profile_document: integers >= 1, one per rank): a rank
holds no more than its device has, the device_memory_bytes the profiler recorded beside the peak (the
GPU's torch.cuda.get_device_properties().total_memory, the host's physical memory for CPU ranks); where it
recorded none, no more than MAX_BYTES (2^40, more than any GPU holds: the largest hold 288 GB,
rtmodel_util.profile_checks). A GPU's recorded memory is itself at most MAX_BYTES.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtmodel_util.profile_checks import MAX_BYTES, fail
from rtmodel_util.profile_document import ProfileDocument


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

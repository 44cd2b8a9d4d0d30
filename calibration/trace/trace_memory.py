"""The peak memory a traced rank allocated, where the trace recorded it (torch.profiler with
`profile_memory=True`).

Why: the trace of the user's own DDP training is the best source of its activations there is (issue 66):
Kineto writes an instant event `[memory]` for every allocation and free, each with the allocator's
running total (`args["Total Allocated"]`, bytes; libkineto's GenericTraceActivity for memory events,
torch/csrc/profiler/kineto_shim). Its peak over the traced steps, less what the model's states are,
is what the activations took. A trace recorded without profile_memory has no such events: None.
"""

from __future__ import annotations

import math
from pathlib import Path

from calibration.trace.trace_errors import TraceError

MEMORY_EVENT = "[memory]"
TOTAL = "Total Allocated"
CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA, Kineto's args["Device Type"]


def peak_allocated_bytes(path: Path, doc: dict, device_memory_bytes: int, on_cpu: bool) -> float | None:
    """The largest allocator total the trace recorded on its device (the GPU's; the host's for CPU
    ranks), or None where it recorded none. A total that is not a finite number in [0, the device's
    memory] is a TraceError naming the event (a GPU cannot hold more than it has)."""
    peak = None
    for i, event in enumerate(doc.get("traceEvents") or ()):
        if not isinstance(event, dict) or event.get("name") != MEMORY_EVENT:
            continue
        args = event.get("args") or {}
        if not on_cpu and args.get("Device Type") != CUDA_DEVICE_TYPE:
            continue  # the host's allocations beside a GPU run
        total = args.get(TOTAL)
        if (
            isinstance(total, bool)
            or not isinstance(total, int | float)
            or not math.isfinite(total)
            or total < 0
        ):
            raise TraceError(f"--trace {path}: traceEvents[{i}] {TOTAL} must be a number >= 0, got {total!r}")
        if device_memory_bytes and not on_cpu and total > device_memory_bytes:
            raise TraceError(
                f"--trace {path}: traceEvents[{i}] {TOTAL} is {total:,.0f} bytes, more than the GPU's "
                f"{device_memory_bytes:,} bytes"
            )
        peak = total if peak is None else max(peak, total)
    return None if peak is None else float(peak)

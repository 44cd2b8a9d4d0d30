"""Device-busy time and launches per phase from a torch.profiler trace (benchmarks.gpu_compute).

Why from the trace and not CUDA events: the runtime model's device time is the kernels' own run time,
and kernels of the NCCL stream may overlap the compute stream's, so busy time is the union of the
device activities' intervals (kernels, memcpy, memset; not the sync or annotation rows CUPTI adds).
Launches per phase: the host's launch calls (cudaLaunchKernel, cudaMemcpyAsync, ...) that start
inside the phase's `gpu_compute::<phase>` annotation; backward launches from the autograd thread
while the main thread sits in its backward window, so a time window is the right test.
Pure Python over the profiler's event objects, so tests can feed it stand-ins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEVICE_ACTIVITIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_PREFIXES = ("cudaLaunch", "cuLaunch", "cudaMemcpyAsync", "cudaMemsetAsync", "cudaGraphLaunch")
ANNOTATION_PREFIX = "gpu_compute::"


@dataclass(frozen=True)
class Row:
    name: str
    device: bool  # a row on the device's timeline
    activity: str | None  # the profiler's activity type where it says it
    start_ns: int
    end_ns: int


def _call_or_get(event, attr: str):
    value = getattr(event, attr, None)
    return value() if callable(value) else value


def rows(events: Iterable) -> list[Row]:
    """Kineto events (methods: name(), device_type(), start_ns()) or parsed FunctionEvents (attributes,
    time_range in us) as Rows."""
    out = []
    for e in events:
        kind = _call_or_get(e, "device_type")
        device = "CUDA" in str(getattr(kind, "name", kind)).upper()
        activity = _call_or_get(e, "activity_type")
        start = _call_or_get(e, "start_ns")
        if start is not None:
            end = _call_or_get(e, "end_ns")
            start, end = int(start), int(end if end is not None else start + _call_or_get(e, "duration_ns"))
        else:
            start, end = int(e.time_range.start * 1000), int(e.time_range.end * 1000)
        out.append(Row(str(_call_or_get(e, "name")), device, str(activity) if activity else None, start, end))
    return out


def _is_device_work(r: Row) -> bool:
    if not r.device:
        return False
    if r.activity is not None:
        return r.activity in DEVICE_ACTIVITIES
    return not (r.name.startswith(ANNOTATION_PREFIX) or "Sync" in r.name or "Wait" in r.name)


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length covered by the intervals (overlaps counted once)."""
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + (e - s), e
        elif e > end:
            total, end = total + (e - end), e
    return total


def summarize_trace(events: Iterable, iterations: int, phases: Sequence[str]) -> dict:
    """Per iteration: device-busy ms (union), kernel-sum ms, device activities, and launches per phase;
    None where the trace has no device rows (CPU) or no launch calls."""
    all_rows = rows(events)
    work = [r for r in all_rows if _is_device_work(r)]
    windows = [
        (r.name[len(ANNOTATION_PREFIX) :], r.start_ns, r.end_ns)
        for r in all_rows
        if not r.device and r.name.startswith(ANNOTATION_PREFIX)
    ]
    launches = [r.start_ns for r in all_rows if not r.device and r.name.startswith(LAUNCH_PREFIXES)]
    per_phase = dict.fromkeys(phases, 0)
    for t in launches:
        for phase, s, e in windows:
            if s <= t <= e and phase in per_phase:
                per_phase[phase] += 1
                break
    n = max(1, iterations)
    kernels = [
        r for r in work if (r.activity == "kernel") or (r.activity is None and "mem" not in r.name.lower())
    ]
    return {
        "profiled_iterations": iterations,
        "device_busy_ms": union_ns((r.start_ns, r.end_ns) for r in work) / n / 1e6 if work else None,
        "device_kernel_sum_ms": sum(r.end_ns - r.start_ns for r in work) / n / 1e6 if work else None,
        "device_kernels": len(kernels) / n if work else None,
        "launches": {p: c / n for p, c in per_phase.items()} if launches else None,
    }

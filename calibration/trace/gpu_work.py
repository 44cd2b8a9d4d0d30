"""The device work of a rank's profiled steps as parallel arrays: what a GPU trace's kernels give, and
what a CPU rank's host ops and gloo spans give in their place (host_events).

Why a module of its own: trace_events reads both kinds of trace and host_events builds the CPU one; each
imports this, neither the other.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GpuWork:
    """Every GPU event of the profiled steps, as parallel arrays (microseconds, the trace's own clock)."""

    step: np.ndarray  # the ProfilerStep number that launched it (-1: outside every step)
    start_us: np.ndarray
    end_us: np.ndarray
    correlation: np.ndarray  # launch order: CUDA correlation ids grow as the host launches
    launch_us: np.ndarray  # when the host launched it (NaN where the trace does not say)
    on_main_thread: np.ndarray  # launched by the thread that runs the steps (else autograd's backward)
    collective: np.ndarray  # "" for compute; else NCCL's collective name ("allreduce", "broadcast", ...)
    nbytes: np.ndarray  # a collective's message bytes (NaN where the trace does not say)
    stream: np.ndarray


def elements(dims: list[int]) -> float:
    """The product of a tensor's dims, exact in Python's integers and capped at 2^64 (a size beyond any
    memory, which trace_events refuses) so that it never wraps in int64 or overflows a float."""
    return float(min(math.prod(dims), 1 << 64))


def dims_of(text: str) -> list[int]:
    """The whole numbers written in `text` (a tensor's `Input Dims`), each beyond 19 digits read as 2^64
    (Python refuses to convert thousands of digits, and no dim is that large)."""
    return [int(x) if len(x) <= 19 else 1 << 64 for x in re.findall(r"\d+", text)]

"""Peak memory per rank of one training, in its steady state: what a rank holds at its worst.

Why measured beside the time: the advisor's memory model says which method fits a GPU (DDP keeps a whole
replica, FSDP2 shards it), and its best source of a user's activations is the user's own run. Shared by
validation (each method's run) and the profiler (its DDP run, profiler.wrapped.measure_ddp_work).

- CUDA: torch.cuda.max_memory_allocated, the caching allocator's peak of bytes held by tensors (not the
  reserved pool; torch/cuda/memory.py, `max_memory_allocated`), reset by torch.cuda.reset_peak_memory_stats
  when the timed iterations start and read after the last: their steady state, at no cost to their times.
  Less what the device held on entry (torch.cuda.memory_allocated): what an earlier training in the same
  process still holds (the profile's bare workload) is not this training's.
- CPU: there is no allocator counter, so PyTorch's MemTracker counts instead
  (torch/distributed/_tools/mem_tracker.py, `MemTracker`: a TorchDispatchMode that adds up every tensor
  storage made under it, parameters, gradients, activations, temporaries and optimizer states; its peak
  "Total"). It sees only storages made while it is on, so it is on while the training is built and warmed
  up (its parameters, DDP's rebuilt buckets, Decent-DP's buckets and communication blocks, FSDP2's lazily
  made buffers, the optimizer states: each made by the 2nd iteration), off for the timed iterations (every
  op under it runs Python bookkeeping: it slowed an iteration of the 2-rank `mlp` workload on gloo 1.8x
  under DDP and 2.4x under FSDP2), and on again for MEMORY_ITERATIONS more iterations after them, whose
  peak (reset on entry to what is then alive) is recorded. Storages made during the timed iterations and
  kept after them would go unseen; none of these trainings makes one.
Elsewhere (or a torch without MemTracker) the peak is None and `source` says why.
"""

from __future__ import annotations

import gc
import os

import torch

CUDA_SOURCE = "cuda max_memory_allocated"
TRACKER_SOURCE = "mem_tracker"
MEMORY_ITERATIONS = 2  # tracked iterations after the timed ones: the first is already steady state


def device_memory_bytes(device: torch.device) -> int | None:
    """What the device holds, the bound of any peak on it: the GPU's total memory
    (torch.cuda.get_device_properties(...).total_memory), the host's physical memory for CPU ranks
    (sysconf SC_PHYS_PAGES x SC_PAGE_SIZE); None where neither is known."""
    try:
        if device.type == "cuda":
            return int(torch.cuda.get_device_properties(device).total_memory)
        if device.type == "cpu":
            return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (RuntimeError, AttributeError, ValueError, OSError):
        return None
    return None


class PeakMemory:
    """One training's peak-memory probe; use as a context around building and running it (module doc)."""

    def __init__(self, device: torch.device):
        gc.collect()  # the previous training's cycles (DDP's hooks) are not this one's memory
        self.device = device
        self.peak_bytes: int | None = None
        self.source = (
            CUDA_SOURCE if device.type == "cuda" else f"not measured: no peak counter on {device.type}"
        )
        self._entry_bytes = 0
        self._tracker = None
        self._on = False
        if device.type == "cpu":
            try:
                from torch.distributed._tools.mem_tracker import MemTracker
            except ImportError:
                self.source = (
                    f"not measured: torch {torch.__version__} has no torch.distributed._tools.mem_tracker"
                )
            else:
                self._tracker, self.source = MemTracker(), TRACKER_SOURCE

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            self._entry_bytes = self._cuda_counter(torch.cuda.memory_allocated) or 0
        self._track(True)
        return self

    def __exit__(self, *exc) -> None:
        self._track(False)
        self._tracker = None  # its weak references die with it; the peak and its source stay

    def _track(self, on: bool) -> None:
        if self._tracker is None or on == self._on:
            return
        if on:
            self._tracker.__enter__()  # (re-)entry resets the peak to what is alive now
        else:
            self._tracker.__exit__(None, None, None)
        self._on = on

    def between_iterations(self) -> None:
        """After each tracked iteration: MemTracker keeps per-module stats of one iteration only."""
        if self._on:
            self._tracker.reset_mod_stats()

    def timed_start(self) -> None:
        """The timed iterations start: CUDA's peak counter reset, the CPU tracker off."""
        if self.device.type == "cuda":
            self._cuda_counter(torch.cuda.reset_peak_memory_stats)
        self._track(False)

    def timed_end(self) -> None:
        if self.device.type == "cuda" and self.source == CUDA_SOURCE:
            peak = self._cuda_counter(torch.cuda.max_memory_allocated)
            self.peak_bytes = None if peak is None else max(0, int(peak) - self._entry_bytes)

    def _cuda_counter(self, counter):
        """The allocator's counter on this device; one that fails (a build without the caching allocator's
        statistics) leaves the peak unmeasured, said in `source`, rather than the run lost."""
        try:
            return counter(self.device)
        except (RuntimeError, AttributeError) as exc:
            self.source = f"not measured: torch.cuda.{counter.__name__} failed ({type(exc).__name__}: {exc})"
            return None

    def measure(self, step_fn, workload, first_step: int, iterations: int = MEMORY_ITERATIONS) -> None:
        """CPU: `iterations` more iterations under the tracker, from batch `first_step` on; their peak."""
        if self._tracker is None:
            return
        self._track(True)
        for step in range(first_step, first_step + iterations):
            step_fn(workload.make_batch(step))
            self.between_iterations()
        self._track(False)
        peak = self._tracker.get_tracker_snapshot("peak")
        self.peak_bytes = int(sum(snap.get("Total", 0) for snap in peak.values()))

"""Compute per iteration as eager PyTorch runs it on a GPU: max(host time, device time) per segment.

Why not FLOPs / (peak x MFU): the host issues every kernel (a dispatch cost per op) while the device
runs them; the two overlap until a host-device sync (`.item()`) drains the queue. Between syncs a
segment lasts max(host, device): host-bound at small per-GPU batches (the time does not fall with the
batch), device-bound at large ones. The libraries differ in where they sync and what extra memory
traffic they add:

- DDP: forward and backward form one segment (DDP's bucket copies add device traffic to backward);
  after `finalize_backward` the optimizer step (and GradScaler's unscale with its found_inf `.item()`)
  runs as its own segment, all of it after the last bucket's all-reduce.
- Decent-DP: each bucket's hook mixes, steps and re-launches the bucket; with a GradScaler its
  `step()` reads found_inf with `.item()` once per bucket, so the iteration is one segment per bucket
  (the forward rides in the first). Without AMP the iteration is one segment.

Device time = matmul FLOPs / (peak x large-batch efficiency) + bytes of memory-bound kernels /
(bandwidth x streaming efficiency). Host time = kernel-launching ops x (CPU dispatch + CUDA launch cost)
+ the optimizer's and GradScaler's per-tensor host work. The work of
backward is spread over buckets by their ready fractions (see bucketing.ready_fractions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtime_model.core.distributions import NormalCompute
from runtime_model.core.scenario import Bucket, Compute


@dataclass(frozen=True)
class Work:
    """Host and device seconds of one piece of an iteration, before they overlap."""

    host_s: float = 0.0
    device_s: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.host_s + other.host_s, self.device_s + other.device_s)

    def scaled(self, factor: float) -> Work:
        return Work(self.host_s * factor, self.device_s * factor)

    @property
    def time_s(self) -> float:
        """A segment between host syncs: the slower of issuing and running its kernels."""
        return max(self.host_s, self.device_s)


@dataclass(frozen=True)
class IterationWork:
    """One GPU's work in one iteration, split where the libraries put it.

    optimizer: the whole model's step (and GradScaler unscale); ddp_copies: DDP's bucket copy-in/out
    during backward; mixing: Decent-DP's per-bucket mixing copies. `amp` says whether a GradScaler
    syncs once per optimizer step (per bucket in Decent-DP); `step_syncs` whether the optimizer itself
    reads a value to the host every step (AccumAdam's `state_steps[0].item()`). `step_call_host_s`: the
    host time of optimizer + mixing that every call pays whatever its tensors (their kernel-launching
    ops); the rest of their host time is per parameter tensor, so Decent-DP's per-bucket calls share it.
    """

    forward: Work
    backward: Work
    optimizer: Work
    ddp_copies: Work
    mixing: Work
    amp: bool
    step_syncs: bool = False
    step_call_host_s: float = 0.0


def ddp_compute(work: IterationWork, compute_cv: float, source: str) -> Compute:
    """DDP: forward+backward one segment, then the optimizer step its own."""
    backward = work.backward + work.ddp_copies
    both = work.forward + backward
    forward_s, backward_s = _split(work.forward, both)
    return _compute(forward_s, backward_s, work.optimizer.time_s, compute_cv, source)


def decent_dp_compute(
    work: IterationWork, buckets: Sequence[Bucket], compute_cv: float, source: str
) -> Compute:
    """Decent-DP: per bucket, its share of backward, its mixing and its optimizer step; one segment per
    bucket when each step syncs (GradScaler or AccumAdam), else one segment for the whole iteration.

    Returns compute_s = the forward+backward part and optimizer_s = the mixing + step part, so that
    compute_s + optimizer_s is the iteration's compute and the last bucket's share of optimizer_s
    is what follows the last wait (iteration.last_bucket_optimizer_s)."""
    total_bytes = sum(b.nbytes for b in buckets)
    per_step = work.optimizer + work.mixing
    call_s = min(work.step_call_host_s, per_step.host_s)
    per_tensor_s = per_step.host_s - call_s  # spread over the buckets as their bytes
    if not (work.amp or work.step_syncs):
        all_steps = Work(call_s * len(buckets) + per_tensor_s, per_step.device_s)
        whole = work.forward + work.backward + all_steps
        fwd_bwd = work.forward + work.backward
        step_s = whole.time_s * _share(all_steps, whole)
        forward_s, backward_s = _split(work.forward, fwd_bwd, whole.time_s - step_s)
        return _compute(forward_s, backward_s, step_s, compute_cv, source)
    segments_s, steps_s, before = 0.0, 0.0, 0.0
    for i, bucket in enumerate(buckets):
        share = bucket.nbytes / total_bytes
        backward_part = work.backward.scaled(max(0.0, bucket.ready_fraction - before))
        before = max(before, bucket.ready_fraction)
        step = Work(call_s + per_tensor_s * share, per_step.device_s * share)  # each call issues all its ops
        segment = backward_part + step + (work.forward if i == 0 else Work())
        segments_s += segment.time_s
        steps_s += step.time_s
    fwd_bwd = work.forward + work.backward
    forward_s, backward_s = _split(work.forward, fwd_bwd, max(0.0, segments_s - steps_s))
    return _compute(forward_s, backward_s, steps_s, compute_cv, source)


def _share(part: Work, whole: Work) -> float:
    """The part's share of the whole's binding resource (host when host-bound, else device)."""
    if whole.host_s >= whole.device_s:
        return part.host_s / whole.host_s if whole.host_s > 0 else 0.0
    return part.device_s / whole.device_s if whole.device_s > 0 else 0.0


def _split(forward: Work, both: Work, total_s: float | None = None) -> tuple[float, float]:
    """(forward_s, backward_s) of a forward+backward lasting `total_s` (default both.time_s): the
    forward takes its share of the resource that binds, so DDP's overlap window is the backward's."""
    total = both.time_s if total_s is None else total_s
    forward_s = total * _share(forward, both)
    return forward_s, total - forward_s


def _compute(forward_s: float, backward_s: float, optimizer_s: float, cv: float, source: str) -> Compute:
    seconds = forward_s + backward_s
    return Compute(
        forward_s=forward_s,
        backward_s=backward_s,
        optimizer_s=optimizer_s,
        distribution=NormalCompute(seconds, seconds * cv),
        source=source,
    )

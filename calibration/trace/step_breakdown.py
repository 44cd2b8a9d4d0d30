"""A traced iteration in the model's terms: forward, backward, optimizer, and DDP's buckets (bytes, when
each was ready in backward, how long its all-reduce ran, how much of it showed).

Why from the GPU's timeline: the model's iteration is what the GPU waits for. Backward is the work
autograd's thread launched; a bucket is ready when the compute launched before its all-reduce has run
(the all-reduce's stream waits for it); what shows of the all-reduce is its end past backward's (the
tail the model predicts). The iteration is the host's ProfilerStep span, or the GPU's span of the work
the step launched where the host ran ahead of it. Forward is the rest: the forward pass, with every
gap the loop left (data loading, other collectives), as measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.trace.trace_document import MAX_DURATION_US
from calibration.trace.trace_errors import TraceError
from calibration.trace.trace_events import ALL_REDUCE, RankTrace

MIN_READY_FRACTION = 1e-3  # a bucket ready before backward's first kernel (the model's fractions are > 0)


@dataclass(frozen=True)
class TracedBucket:
    nbytes: float  # NaN where the trace does not say
    ready_fraction: float
    duration_s: float
    exposed_s: float  # the part of its all-reduce no compute ran beside


@dataclass(frozen=True)
class TracedStep:
    """One ProfilerStep, in seconds."""

    number: int
    iteration_s: float
    forward_s: float  # the rest of the iteration: forward, data loading, other collectives, host gaps
    backward_s: float
    optimizer_s: float  # GPU work after backward and the all-reduces: the step, zero_grad
    tail_s: float  # the all-reduces' end past backward's: the exposure the model predicts
    buckets: tuple[TracedBucket, ...]
    other_collectives_s: float  # NCCL time of collectives that are not DDP's buckets (as measured)
    forward_busy_s: float = 0.0  # the GPU's compute kernels' time inside forward's window (their union)
    backward_busy_s: float = 0.0  # and inside backward's
    idle_s: float = 0.0  # the iteration's time with nothing on the device (no kernel, no collective)

    @property
    def allreduce_s(self) -> float:
        """The buckets' all-reduce time in this step (their kernels' sum, as traced)."""
        return sum(b.duration_s for b in self.buckets)

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s


def traced_steps(trace: RankTrace) -> tuple[TracedStep, ...]:
    """Every profiled step that launched GPU work, in the model's terms; TraceError without backward.

    A step's iteration is the time between the ends of its GPU work and the previous step's (what the
    GPU sustains, whether the host ran ahead of it or it waited for the host), so the first step only
    serves as the start of the second; a trace of one step takes its ProfilerStep span."""
    g = trace.gpu
    numbers = [n for n in trace.steps if (g.step == n).any()]
    if not numbers:
        raise TraceError(f"--trace {trace.path}: no step launched GPU work")
    ends = [g.end_us[g.step == n].max() for n in numbers]
    host = dict(zip(trace.steps, trace.step_dur_us, strict=True))
    if len(numbers) == 1:
        mask = g.step == numbers[0]
        span = g.end_us[mask].max() - g.start_us[mask].min()
        return (_step(trace, numbers[0], _checked(trace, numbers[0], max(host[numbers[0]], span)), mask),)
    return tuple(
        _step(trace, n, _checked(trace, n, ends[i] - ends[i - 1]), g.step == n)
        for i, n in enumerate(numbers)
        if i > 0
    )


def _checked(trace: RankTrace, number: int, iteration_us: float) -> float:
    """An iteration is positive (each step's GPU work ends after the previous one's) and at most a day
    (trace_document.MAX_DURATION_US: no profiled training step is longer)."""
    if not 0 < iteration_us <= MAX_DURATION_US:
        raise TraceError(
            f"--trace {trace.path}: step {number}'s GPU work ends {iteration_us:,.1f} us after the previous "
            f"step's: an iteration must take more than 0 and at most {MAX_DURATION_US:,.0f} us (a day); "
            "a reordered or re-timed file, not a recording"
        )
    return float(iteration_us)


def _step(trace: RankTrace, number: int, iteration_us: float, mask: np.ndarray) -> TracedStep:
    g = trace.gpu
    start, end, corr = g.start_us[mask], g.end_us[mask], g.correlation[mask]
    kind, main, nbytes = g.collective[mask], g.on_main_thread[mask], g.nbytes[mask]
    compute = kind == ""
    backward = compute & ~main
    if not backward.any():
        raise TraceError(
            f"--trace {trace.path}: step {number} ran no backward pass (autograd's thread launched nothing): "
            "trace training iterations"
        )
    b0, b1 = start[backward].min(), end[backward].max()
    on_wire = np.flatnonzero((kind == ALL_REDUCE) & ~main)
    on_wire = on_wire[np.argsort(corr[on_wire])]
    busy = _union(start[compute], end[compute])
    ar_end = end[on_wire].max() if on_wire.size else b1
    optimizer_us = max(0.0, end.max() - max(b1, ar_end))
    tail_us = max(0.0, ar_end - b1)
    others = ~compute & (kind != ALL_REDUCE)
    if on_wire.size:
        launched = g.launch_us[mask] if trace.on_cpu else None
        timeline = _Timeline(start, end, corr, compute, busy, b0, b1, launched)
        buckets = tuple(_bucket(i, timeline, nbytes[i]) for i in on_wire)
    elif max(1, trace.world_size) == 1:
        buckets = _unsent_buckets(trace, number, mask, b0, b1)
    else:  # ranks that sent nothing on the device: no bucket's time was measured (trace_scenario says so)
        buckets = ()
    return TracedStep(
        number,
        iteration_us * 1e-6,
        (iteration_us - (b1 - b0) - optimizer_us - tail_us) * 1e-6,
        (b1 - b0) * 1e-6,
        optimizer_us * 1e-6,
        tail_us * 1e-6,
        buckets,
        float((end[others] - start[others]).sum()) * 1e-6,
        _covered(start.min(), b0, busy) * 1e-6,
        _covered(b0, b1, busy) * 1e-6,
        max(0.0, iteration_us - _covered(end.max() - iteration_us, end.max(), _union(start, end))) * 1e-6,
    )


def _unsent_buckets(trace: RankTrace, number: int, mask: np.ndarray, b0: float, b1: float):
    """A world of one sends nothing, yet DDP's hooks still record each bucket's call and bytes: ready
    when the compute the host launched before the call has run."""
    calls = trace.host_all_reduce
    at, nbytes = calls.at_us[calls.step == number], calls.nbytes[calls.step == number]
    g = trace.gpu
    compute = mask & (g.collective == "")
    out = []
    for t, size in sorted(zip(at, nbytes, strict=True)):
        before = compute & (g.launch_us < t)
        ready = g.end_us[before].max() if before.any() else b0
        out.append(TracedBucket(float(size), _into_backward(ready, b0, b1), 0.0, 0.0))
    return tuple(out)


@dataclass(frozen=True)
class _Timeline:
    """One step's GPU events (us) and where backward ran, as a bucket is read against them."""

    start: np.ndarray
    end: np.ndarray
    corr: np.ndarray
    compute: np.ndarray
    busy: np.ndarray  # the compute's union, disjoint rows
    b0: float
    b1: float
    launch: np.ndarray | None = None  # CPU ranks: when each was issued (the host runs in order)


def _bucket(i: int, t: _Timeline, nbytes: float) -> TracedBucket:
    """Ready when the compute launched before its all-reduce has run (its stream waits for that); on CPU
    ranks when its call issued it (the ops before it have run: the host is the device)."""
    before = t.compute & (t.corr < t.corr[i])
    ready = t.end[before].max() if before.any() else t.start[i]
    if t.launch is not None:
        ready = t.launch[i]
    fraction = _into_backward(ready, t.b0, t.b1)
    duration = t.end[i] - t.start[i]
    hidden = _covered(t.start[i], t.end[i], t.busy)
    return TracedBucket(float(nbytes), fraction, duration * 1e-6, max(0.0, duration - hidden) * 1e-6)


def _into_backward(ready: float, b0: float, b1: float) -> float:
    """How far into backward [b0, b1] a bucket was ready, as the model's fraction in (0, 1]."""
    return float(np.clip((ready - b0) / (b1 - b0), MIN_READY_FRACTION, 1.0)) if b1 > b0 else 1.0


def _union(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Disjoint [start, end) rows covering the given intervals, in order."""
    if starts.size == 0:
        return np.empty((0, 2))
    order = np.argsort(starts)
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.r_[True, s[1:] > e[:-1]]
    last = np.r_[np.flatnonzero(new)[1:] - 1, s.size - 1]
    return np.column_stack([s[new], e[last]])


def _covered(a: float, b: float, rows: np.ndarray) -> float:
    """How much of [a, b) the disjoint rows cover."""
    if rows.size == 0:
        return 0.0
    return float(np.clip(np.minimum(rows[:, 1], b) - np.maximum(rows[:, 0], a), 0.0, None).sum())

"""Activation memory of one training iteration, measured on FakeTensors by PyTorch's own MemTracker.

Why: a data-parallel replica holds its states (parameters, buffers, gradients, optimizer states) plus the
transient memory of one forward and backward, which grows with the batch. The states follow from the
parameter count; the transient part depends on the model code (what autograd saves, what backward
allocates), so it is measured by running the code: under FakeTensorMode (torch._subclasses.fake_tensor:
shapes, dtypes and storages, nothing computed or allocated) a 7e9-parameter model costs seconds, and
MemTracker (torch/distributed/_tools/mem_tracker.py) files every storage under one of its categories
(_MemRefType: Parameter, Buffer, Gradient, Activation, Temp, Optstate, Other).

What is counted (the contract of `measure_activation_bytes`; a benchmark compares it with real runs):
- two training iterations: forward + loss (under bf16 autocast with amp), backward, optimizer.step()
  (torch.optim.Adam, what rtmodel_harness.recipe trains with, foreach as on CUDA) and
  zero_grad(set_to_none=True), everything (model, batches, optimizer) inside the tracker;
- activation_bytes = the peak, over the second iteration's forward and backward (from the start of its
  forward to the return of backward), of Activation + Temp: every byte that is neither a parameter,
  buffer, gradient nor optimizer state. The step's input batch counts (it is on the device then). The peak of
  the sum, not MemTracker's split at its peak of the total: (1) the sum is the transient memory above
  the states whenever it occurs, whereas the total's peak moves with the gradients, which a memory model
  adds on its own; (2) MemTracker files a checkpointed block's recomputation in backward sometimes under
  Activation, sometimes under Temp (its docstring's "Known Limitations"), and only their sum is exact.
  It is sampled after every aten op, where the caching allocator peaks (an op's outputs exist while its
  inputs are still alive).
- one correction to MemTracker's filing: backward files a parameter's gradient under Temp from the op
  that computes it until the parameter's grad hook moves it to Gradient; here it is a gradient from that
  op on (otherwise the sample after a weight-gradient op holds that gradient as transient memory:
  1.9 MB of ResNet-50's 694 MB at 8 images).
- device_type="cuda" (the default: the presets are GPUs) predicts a CUDA run: dropout as CUDA's one
  fused kernel (native_dropout, a 1-byte mask) and attention dropout inside the fused SDPA kernel
  (profiler.opcount.cuda_like_kernels), and every storage rounded up to 512 bytes as MemTracker does on
  CUDA (mem_tracker._PYTORCH_MIN_ALLOCATE, from c10/cuda/CUDACachingAllocator.cpp kMinBlockSize).
  device_type="cpu" predicts a CPU run: CPU's kernels, no rounding.
- Python's cycle collector is paused during a measure, so that the figure does not depend on when it
  runs (a tensor kept by a reference cycle counts until the measure ends).
- AMP is counted as bf16 CPU autocast (as profiler/opcount.py counts it), which stands in for CUDA's
  fp16 autocast: same element size, and for the preset models the same casts.
"""

from __future__ import annotations

import gc
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch
from torch import nn

from profiler.errors import ProfilingError
from runtime_model.core.errors import UserError

# c10/cuda/CUDACachingAllocator.cpp kMinBlockSize, as mem_tracker._PYTORCH_MIN_ALLOCATE counts it on CUDA
CUDA_MIN_ALLOCATE_BYTES = 512
DEVICE_TYPES = ("cuda", "cpu")
_MESSAGE_CHARS = 240  # a user's exception, shortened to keep the refusal on one line


class ActivationMemoryError(ProfilingError):
    """A model whose activation memory cannot be measured here: it does not build on the meta device,
    does not run on FakeTensors, or has no repeated blocks to checkpoint. One line, naming the model."""


class NotOnFakeTensors(ActivationMemoryError):
    """A model that builds but cannot run on FakeTensors (its forward reads its data: rtmodel's synthetic
    model sleeps its compute); estimate_for_workload may measure it on real CPU tensors instead."""


@dataclass(frozen=True)
class ActivationMeasure:
    """One measurement (see the module docstring for what each byte count holds)."""

    model: str
    batch: int  # in the model's units (tokens, images, samples)
    amp: bool
    checkpointing: bool
    device_type: str
    activation_bytes: int  # peak of Activation + Temp over the second iteration's forward and backward
    parameter_bytes: int  # MemTracker's Parameter, during that iteration
    buffer_bytes: int
    # Gradient at the end of that backward: every trainable parameter's gradient, more where one is a view
    # of a larger buffer autograd made (Transformer-XL's cluster_weight: a slice of a concatenation's)
    gradient_bytes: int
    optimizer_bytes: int  # Optstate (Adam's exp_avg, exp_avg_sq, step) from the first iteration's step
    params: int  # trainable parameters, tied ones once: parameter_bytes = 4 x params in fp32 (+ rounding)
    peak_total_bytes: int  # the highest total (all categories) over the same window
    activation_at_peak_bytes: int  # Activation + Temp at that moment
    checkpointed_blocks: tuple[str, ...] = ()  # module names wrapped with non-reentrant checkpointing
    seconds: float = 0.0  # wall time of the measurement on this host

    @property
    def activation_grad_bytes(self) -> int:
        """The peak of activations plus the gradients made so far: the highest total less the states that
        do not change in forward and backward (parameters, buffers, optimizer states)."""
        return self.peak_total_bytes - self.parameter_bytes - self.buffer_bytes - self.optimizer_bytes


@dataclass(frozen=True)
class ActivationFit:
    """activation_bytes = fixed_bytes + per_unit_bytes * batch, least squares over the measures."""

    fixed_bytes: float
    per_unit_bytes: float
    worst_residual_bytes: float  # max |measured - fitted| over the measured batches
    measures: tuple[ActivationMeasure, ...]

    def at(self, batch: float) -> float:
        return self.fixed_bytes + self.per_unit_bytes * batch


def fit_activation(measures: Sequence[ActivationMeasure]) -> ActivationFit:
    """Least-squares line through (batch, activation_bytes) of two or more measures at distinct batches,
    in exact rational arithmetic: the printed figures are the same on every host (a float fit's
    intercept carries rounding noise of the slope times the batch)."""
    points = [(Fraction(m.batch), Fraction(m.activation_bytes)) for m in measures]
    if len({x for x, _ in points}) < 2:
        raise ActivationMemoryError(
            "a fit of activation bytes needs measures at two or more distinct batches"
        )
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    per_unit = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    fixed = mean_y - per_unit * mean_x
    worst = max(abs(y - fixed - per_unit * x) for x, y in points)
    return ActivationFit(float(fixed), float(per_unit), float(worst), tuple(measures))


# --------------------------------------------------------------------------- the tracker


def _tracker_class():
    try:
        from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _UpdateType
    except ImportError as exc:  # torch < 2.5, or a build without torch.distributed
        raise ActivationMemoryError(
            f"activation memory needs torch.distributed._tools.mem_tracker (torch >= 2.5): {exc}"
        ) from None

    class WindowTracker(MemTracker):
        """MemTracker that, while `window` is open, samples Activation + Temp and the total after every
        op, and remembers when a Temp storage becomes a Gradient (to correct the samples in between)."""

        def __init__(self, round_bytes: int):
            super().__init__()
            self.round_bytes, self.window = round_bytes, False
            self.transient: list[int] = []  # Activation + Temp after each op in the window
            self.total: list[int] = []
            self.regrad: list[tuple[int, int, int]] = []  # (first, last + 1 sample it was Temp, bytes)

        def _update_snap(self, u_type, winfo, old_mem_consumed=None, old_reftype=None):
            if u_type == _UpdateType.ADD and self.round_bytes > 1:
                winfo.mem_consumed = math.ceil(winfo.mem_consumed / self.round_bytes) * self.round_bytes
            if u_type == _UpdateType.SIZE and self.round_bytes > 1:
                winfo.mem_consumed = math.ceil(winfo.mem_consumed / self.round_bytes) * self.round_bytes
            super()._update_snap(u_type, winfo, old_mem_consumed, old_reftype)
            if u_type == _UpdateType.ADD and self.window and winfo.reftype == _MemRefType.TEMP:
                winfo.rtmodel_born = len(self.transient)
            elif (
                u_type == _UpdateType.REF
                and old_reftype == _MemRefType.TEMP
                and winfo.reftype == _MemRefType.GRAD
                and hasattr(winfo, "rtmodel_born")
            ):
                self.regrad.append((winfo.rtmodel_born, len(self.transient), winfo.mem_consumed))

        def _update_peak_stats(self, peak_state) -> None:
            """Skipped: MemTracker's per-module and total peaks are unused here (the samples are kept
            instead), and updating them walks every module after every op, a third of the run."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if self.window:
                snaps = self._curr_mem_snap.values()
                self.transient.append(sum(s[_MemRefType.ACT] + s[_MemRefType.TEMP] for s in snaps))
                self.total.append(sum(s["Total"] for s in snaps))
            return out

        def corrected_transient(self) -> np.ndarray:
            """The samples with each future gradient taken out of Temp from its first sample on."""
            fix = np.zeros(len(self.transient) + 1)
            for first, end, nbytes in self.regrad:
                fix[first] += nbytes
                fix[end] -= nbytes
            return np.asarray(self.transient, dtype=float) - np.cumsum(fix)[:-1]

        def category_bytes(self, kind) -> int:
            return int(sum(s[kind] for s in self._curr_mem_snap.values()))

    return WindowTracker, _MemRefType


# --------------------------------------------------------------------------- fake model and steps


def fake_parameters(model: nn.Module) -> None:
    """Swap a meta-device (or CPU) model's parameters and buffers for fake CPU tensors inside an active
    FakeTensorMode, keeping strides and tied parameters (profiler.opcount._fake_parameters's recipe)."""
    from profiler.opcount import _fake_parameters

    _fake_parameters(model)


def _moved(batch, device: torch.device, copies: dict | None = None):
    """The batch on `device` with its views kept as views: rtmodel_harness.workloads.on_device, except
    that tensors sharing one storage on the device they were made on (a language model's inputs and
    targets, two slices of one token tensor) share one storage here too, as they would on a GPU.
    No closures: a reference cycle would keep the batch alive until Python's garbage collector runs,
    and the peak would depend on when it does."""
    copies = {} if copies is None else copies
    if isinstance(batch, tuple | list):
        return type(batch)(_moved(x, device, copies) for x in batch)
    if isinstance(batch, dict):
        return {k: _moved(v, device, copies) for k, v in batch.items()}
    if not isinstance(batch, torch.Tensor) or batch.device == device:
        return batch
    base = batch if batch._base is None else batch._base
    if id(base) not in copies:
        copies[id(base)] = base.to(device)
    if base is batch:
        return copies[id(base)]
    return copies[id(base)].as_strided(batch.size(), batch.stride(), batch.storage_offset())


@contextmanager
def _collector_paused():
    """Python's cycle collector off (after one collection) while a measure runs: a tensor held in a
    reference cycle is then freed at the same point on every run (never within the measure, an upper
    bound), not whenever the collector happens to run; the preset models hold none."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def wrap_repeated_blocks(model: nn.Module) -> tuple[str, ...]:
    """Wrap every repeated block with non-reentrant activation checkpointing (checkpoint_wrapper,
    CheckpointImpl.NO_REENTRANT, i.e. torch.utils.checkpoint(use_reentrant=False)); return their names.

    A repeated block: a child of an nn.ModuleList / nn.Sequential that has submodules of its own and
    whose type occurs at least twice among that container's children (transformer layers, ResNet
    bottlenecks). Searched from the root; a wrapped block is not searched further, and single layers
    (a Linear in an MLP) are never blocks: checkpointing one saves nothing."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

    wrapped: list[str] = []

    def visit(module: nn.Module, prefix: str) -> None:
        stack = isinstance(module, nn.ModuleList | nn.Sequential)
        kinds = Counter(type(c) for c in module.children()) if stack else Counter()
        for key, child in list(module.named_children()):
            if kinds[type(child)] >= 2 and next(child.children(), None) is not None:
                setattr(module, key, checkpoint_wrapper(child, checkpoint_impl=CheckpointImpl.NO_REENTRANT))
                wrapped.append(prefix + key)
            else:
                visit(child, f"{prefix}{key}.")

    visit(model, "")
    return tuple(wrapped)


def _hint(exc: BaseException) -> str:
    """What a FakeTensor refusal means, where the exception's name alone does not say it."""
    if type(exc).__name__ in ("DataDependentOutputException", "DynamicOutputShapeException"):
        return (
            " (the model reads a tensor's value, as .item(), float() or nonzero() do; FakeTensors have none)"
        )
    return ""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text[:_MESSAGE_CHARS]}{'...' if len(text) > _MESSAGE_CHARS else ''}"


def _two_iterations(model, make_batch, loss_fn, batch: int, amp: bool, tracker, kinds):
    """Build the optimizer and run the two iterations under `tracker`, its window open over the second
    forward and backward; (the trainable parameters, each category's bytes as that backward returns)."""
    from rtmodel_harness.workloads import forward_loss

    device = next(model.parameters()).device
    model.train()
    params = list({id(p): p for p in model.parameters() if p.requires_grad}.values())
    optimizer = torch.optim.Adam(params, lr=1e-3, foreach=True)  # CUDA's default implementation
    tracker.track_external(model)
    with tracker:
        for step in range(2):
            data = _moved(make_batch(step, batch, device), device)
            tracker.window = step == 1
            with torch.autocast(device.type, dtype=torch.bfloat16) if amp else nullcontext():
                loss = forward_loss(model, data, loss_fn)
            loss.backward()
            tracker.window = False
            if step == 1:
                states = {k: tracker.category_bytes(k) for k in kinds}
            del loss, data
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tracker.reset_mod_stats()  # MemTracker refuses a second iteration of the same root otherwise
    return params, states


def _check_device_type(device_type: str) -> None:
    if device_type not in DEVICE_TYPES:
        raise ActivationMemoryError(
            f"device_type must be one of {', '.join(DEVICE_TYPES)}, got {device_type!r}"
        )


def measure_activation_bytes(
    model: nn.Module,
    make_batch: Callable,
    loss_fn: Callable,
    batch: int,
    *,
    amp: bool = False,
    checkpointing: bool = False,
    device_type: str = "cuda",
    name: str = "model",
) -> ActivationMeasure:
    """Activation bytes of one training iteration at `batch`.

    Contract (the module docstring says why): two iterations of forward + loss (bf16 autocast when amp),
    backward, Adam step and zero_grad(set_to_none=True) under MemTracker; activation_bytes is the peak of
    Activation + Temp (all that is neither Parameter, Buffer, Gradient nor Optstate, a gradient counted
    as one from the op that computes it) over the second iteration's forward and backward, its batch
    counted, sampled after every aten op; storages rounded up to 512 bytes for device_type="cuda".

    A model on the meta device runs on FakeTensors (its parameters become fake ones); one with real
    parameters runs for real on their device, whose type then is device_type (a check of the fake run, or
    a real run's figure). Checkpointing wraps the repeated blocks (wrap_repeated_blocks): a model per call.
    make_batch(step, batch, device) -> (inputs, targets), loss_fn(outputs, targets) -> scalar: the
    rtmodel_harness.workloads factory contract. ActivationMemoryError (one line, naming `name`) when the
    model cannot run, or has no repeated block to checkpoint."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from profiler.opcount import cuda_like_kernels

    _check_device_type(device_type)
    start = time.perf_counter()
    tracker_class, kinds = _tracker_class()
    blocks = wrap_repeated_blocks(model) if checkpointing else ()
    if checkpointing and not blocks:
        raise ActivationMemoryError(
            f"{name}: no repeated blocks to checkpoint (children of one type, with submodules, in an "
            "nn.ModuleList or nn.Sequential)"
        )
    first = next(model.parameters(), None)
    if first is None:
        raise ActivationMemoryError(f"{name}: the model has no parameters")
    fake = first.is_meta
    device_type = device_type if fake else first.device.type
    tracker = tracker_class(CUDA_MIN_ALLOCATE_BYTES if fake and device_type == "cuda" else 1)
    try:
        with ExitStack() as stack:
            stack.enter_context(_collector_paused())
            if fake:
                stack.enter_context(FakeTensorMode())
                fake_parameters(model)
                if device_type == "cuda":
                    stack.enter_context(cuda_like_kernels())
            params, states = _two_iterations(model, make_batch, loss_fn, batch, amp, tracker, kinds)
    except UserError:
        raise
    except Exception as exc:  # the user's model code: one line, naming the model
        where = "on FakeTensors (shapes only)" if fake else "its training step"
        raise (NotOnFakeTensors if fake else ActivationMemoryError)(
            f"{name}: cannot run {where}: {_one_line(exc)}{_hint(exc)}"
        ) from None
    transient = tracker.corrected_transient()
    at_peak = int(np.argmax(tracker.total))
    return ActivationMeasure(
        model=name,
        batch=batch,
        amp=amp,
        checkpointing=checkpointing,
        device_type=device_type,
        activation_bytes=int(transient.max()),
        parameter_bytes=states[kinds.PARAM],
        buffer_bytes=states[kinds.BUFFER],
        gradient_bytes=states[kinds.GRAD],
        optimizer_bytes=states[kinds.OPT],
        params=sum(p.numel() for p in params),
        peak_total_bytes=int(tracker.total[at_peak]),
        activation_at_peak_bytes=int(transient[at_peak]),
        checkpointed_blocks=blocks,
        seconds=time.perf_counter() - start,
    )


# --------------------------------------------------------------------------- the harness's models


def _build_on_meta(name: str, batch: int, model_args: dict | None):
    """The workload as rtmodel_harness.workloads.build_workload builds it, with every parameter on the
    meta device (no memory); its batches are made on meta too and moved to the fake CPU by the measure."""
    from rtmodel_harness.workloads import build_workload

    try:
        with torch.device("meta"):
            return build_workload(name, model_args, batch, "meta", rank=0)
    except UserError:
        raise
    except Exception as exc:  # the user's factory: one line, naming the model
        raise ActivationMemoryError(f"{name}: cannot be built on the meta device: {_one_line(exc)}") from None


def estimate_for_workload(
    name: str,
    batch: int,
    *,
    model_args: dict | None = None,
    amp: bool = False,
    checkpointing: bool = False,
    device_type: str = "cuda",
    real_up_to_params: int = 0,
) -> ActivationMeasure:
    """measure_activation_bytes for a harness model: a built-in name (rtmodel_harness.model_choice) or
    a user's "package.module:factory", built as rtmodel_harness.workloads.build_workload builds it (the
    same defaults, checks and batch units), on the meta device. `real_up_to_params`: a model that cannot
    run on FakeTensors (NotOnFakeTensors) and has at most this many parameters is measured on real CPU
    tensors instead (2 iterations; its optimizer states too: about 16 bytes per parameter); 0: never."""
    workload = _build_on_meta(name, batch, model_args)

    def measured(built, kind: str) -> ActivationMeasure:
        return measure_activation_bytes(
            built.model,
            lambda step, _batch, _device: built.make_batch(step),
            built.loss_fn,
            batch,
            amp=amp,
            checkpointing=checkpointing,
            device_type=kind,
            name=name,
        )

    try:
        return measured(workload, device_type)
    except NotOnFakeTensors:
        if sum(p.numel() for p in workload.model.parameters()) > real_up_to_params:
            raise
    from rtmodel_harness.workloads import build_workload

    return measured(build_workload(name, model_args, batch, "cpu", rank=0), "cpu")


def fit_for_workload(
    name: str,
    batches: Sequence[int],
    *,
    model_args: dict | None = None,
    amp: bool = False,
    checkpointing: bool = False,
    device_type: str = "cuda",
) -> ActivationFit:
    """fixed + per unit x batch through estimate_for_workload at each of `batches` (two or more)."""
    return fit_activation(
        [
            estimate_for_workload(
                name, b, model_args=model_args, amp=amp, checkpointing=checkpointing, device_type=device_type
            )
            for b in batches
        ]
    )

"""One point of `benchmarks.gpu_compute`: a reference model trained with the paper's recipe, timed.

The recipe (WangZesen/Decentralized-Training-Exp, transformer/src/decent_train.py): TF32 matmuls on for
every precision; fp16 = autocast(fp16) + GradScaler, bf16 = autocast(bf16), tf32 = fp32 without
autocast; Adam(foreach=True); `loss.item()` every step. `ddp` wraps the model in DistributedDataParallel
(world size 1, torch's defaults: 25 MiB buckets, first bucket 1 MiB, buffers broadcast each forward).

Per iteration the host marks each phase with perf_counter and never synchronizes inside it, except
where the recipe itself waits: GradScaler's found_inf `.item()` (here an explicit synchronize just
before `scaler.step`, which waits for exactly the same work) and the closing `loss.item()`. Those
waits are the `wait` phase, so forward, backward, scaler and optimizer hold the host's issue time
only. Caveat: when the device is the bottleneck the launch queue fills and a launch blocks, so a
device-bound point's issue times include that back-pressure; its `device_busy_share` near 1 says so.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections import defaultdict
from contextlib import nullcontext

import torch

from benchmarks.gpu_compute_trace import summarize_trace
from profiler.op_tally import OpCounter, Tally
from rtmodel_harness import reference_models

PHASES = ("forward", "backward", "scaler", "optimizer", "wait")
ISSUE_PHASES = PHASES[:-1]  # the host's own work; `wait` is the device's tail it sits out
INIT_SCALE = 2.0**10  # GradScaler's first scale: below torch's 2^16 so that no timed step is skipped
TIMED_TARGET_S, TIMED_MIN, TIMED_MAX = 1.0, 3, 20  # timed iterations: about a second's worth
TINY_TIMED = 3


def units_run(name: str, units: int) -> int:
    """The units the reference batch really holds (whole sentences, sequences, segments)."""
    if name in ("transformer-base", "transformer-big"):
        return max(1, units // reference_models.SENTENCE_TOKENS) * reference_models.SENTENCE_TOKENS
    if name == "gpt2-small":
        seq = min(units, 1024)
        return max(1, units // seq) * seq
    if name == "transformer-xl-base":
        return max(1, units // reference_models.TXL_SEGMENT) * reference_models.TXL_SEGMENT
    return units


class Phases:
    """Host seconds per phase of one iteration, from perf_counter marks at each switch. With a counter
    its tally follows the phase (op counts per phase); with `annotate` each phase is a profiler range."""

    def __init__(self, counter: OpCounter | None = None, annotate: bool = False):
        self.host_s: dict[str, float] = defaultdict(float)
        self.tallies: dict[str, Tally] = {}
        self.counter, self.annotate, self.stepped = counter, annotate, False
        self.phase: str | None = None
        self.t = 0.0
        self.range = None

    def enter(self, phase: str | None) -> None:
        now = time.perf_counter()
        if self.phase is not None:
            self.host_s[self.phase] += now - self.t
        if self.range is not None:
            self.range.__exit__(None, None, None)
            self.range = None
        if self.annotate and phase is not None:
            self.range = torch.profiler.record_function(f"gpu_compute::{phase}")
            self.range.__enter__()
        if self.counter is not None and phase is not None:
            self.counter.tally = self.tallies.setdefault(phase, Tally())
        self.phase, self.t = phase, time.perf_counter()


def _route_through(wrapper: torch.nn.Module, module: torch.nn.Module) -> None:
    """The reference closures call the bare module, but DDP must see each forward (its reducer prepares
    the backward there): the module's outer call goes through the wrapper, whose inner call runs the
    module's own forward."""
    inner, inside = type(module).forward, [False]

    def forward(*args, **kwargs):
        if inside[0]:
            return inner(module, *args, **kwargs)
        inside[0] = True
        try:
            return wrapper(*args, **kwargs)
        finally:
            inside[0] = False

    module.forward = forward


class Runner:
    """A built point: model (on the device, maybe DDP-wrapped), its batch closure, Adam, the scaler."""

    def __init__(
        self, name: str, units: int, precision: str, wrapper: str, device: torch.device, width_div: int
    ):
        self.device, self.cuda = device, device.type == "cuda"
        torch.manual_seed(0)
        with torch.device(device) if self.cuda else nullcontext():  # parameters and batch on the device
            self.model, make_batch = reference_models.build(name, width_div)
            self.step = make_batch(units)
        if wrapper == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            ids = [device.index or 0] if self.cuda else None
            _route_through(DistributedDataParallel(self.model, device_ids=ids), self.model)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4, foreach=True)
        self.scaler = (
            torch.amp.GradScaler(device.type, init_scale=INIT_SCALE) if precision == "fp16" else None
        )
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
        self.autocast = (lambda: torch.autocast(device.type, dtype=dtype)) if dtype else nullcontext
        self.phases = Phases()
        self.optimizer.register_step_pre_hook(lambda *_: self._stepping(True))
        self.optimizer.register_step_post_hook(lambda *_: self._stepping(False))

    def _stepping(self, starts: bool) -> None:
        self.phases.stepped = True
        self.phases.enter("optimizer" if starts else ("scaler" if self.scaler else "optimizer"))

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def iterate(self, phases: Phases) -> float:
        """One training iteration as the recipe runs it; returns its wall seconds (synchronized)."""
        self.phases = phases
        start = time.perf_counter()
        phases.enter("forward")
        with self.autocast():
            loss = self.step()
        phases.enter("backward")
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        if self.scaler:
            phases.enter("scaler")
            self.scaler.unscale_(self.optimizer)
            phases.enter("wait")
            self.sync()  # scaler.step's found_inf .item() waits for the same work
            phases.enter("scaler")
            self.scaler.step(self.optimizer)  # the step hooks switch to "optimizer" and back
            self.scaler.update()
        else:
            phases.enter("optimizer")
            self.optimizer.step()
        phases.enter("optimizer")
        self.optimizer.zero_grad(set_to_none=True)
        phases.enter("wait")
        loss.item()
        self.sync()
        phases.enter(None)
        return time.perf_counter() - start

    def close(self) -> None:
        self.model.__dict__.pop("forward", None)
        del self.model, self.step, self.optimizer, self.scaler
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def timed(runner: Runner, warmup: int, tiny: bool) -> dict:
    """Warm-up, then about TIMED_TARGET_S of timed iterations; medians over those whose optimizer ran."""
    last = 0.0
    for _ in range(warmup):
        last = runner.iterate(Phases())
    count = TINY_TIMED if tiny else max(TIMED_MIN, min(TIMED_MAX, round(TIMED_TARGET_S / max(last, 1e-6))))
    walls, host, skipped = [], defaultdict(list), 0
    for _ in range(count):
        phases = Phases()
        wall = runner.iterate(phases)
        if not phases.stepped:  # GradScaler skipped the step: not the iteration we model
            skipped += 1
            continue
        walls.append(wall)
        for p in PHASES:
            host[p].append(phases.host_s.get(p, 0.0))
        host["issue"].append(sum(phases.host_s.get(p, 0.0) for p in ISSUE_PHASES))
    ms = lambda v: None if v is None else v * 1e3  # noqa: E731
    return {
        "iterations": {"warmup": warmup, "timed": count, "skipped_steps": skipped},
        "wall_ms": ms(_median(walls)),
        "wall_ms_all": [w * 1e3 for w in walls],
        "host_ms": {p: ms(_median(host[p])) for p in PHASES},
        "host_issue_ms": ms(_median(host["issue"])),
    }


def count_ops(runner: Runner) -> dict:
    """Kernel-launching aten ops, views, syncs and CPU-scalar ops per phase (profiler.op_tally's
    definitions, the counts the presets hold), over one iteration under a TorchDispatchMode. `syncs`
    counts every read of a value to the host, CPU scalars too: foreach Adam reads each parameter's
    CPU step counter, which costs host time but waits for no device."""
    with OpCounter(Tally()) as counter:
        phases = Phases(counter=counter)
        runner.iterate(phases)
    return {
        "ops": {p: phases.tallies[p].ops if p in phases.tallies else 0 for p in ISSUE_PHASES},
        "scalar_ops": {p: phases.tallies[p].scalar_ops if p in phases.tallies else 0 for p in ISSUE_PHASES},
        "syncs": {p: phases.tallies[p].syncs if p in phases.tallies else 0 for p in PHASES},
        "step_ran": phases.stepped,
    }


def profiled(runner: Runner, iterations: int) -> dict:
    """Device-busy time and launches per phase from torch.profiler over `iterations` iterations (null
    figures where the profiler saw no device, as on CPU)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if runner.cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(iterations):
            runner.iterate(Phases(annotate=True))
    try:
        events = prof.profiler.kineto_results.events()
    except AttributeError:  # an older profiler object: the parsed events carry the same fields
        events = prof.events()
    return summarize_trace(events, iterations, PHASES)


def _part(out: dict, name: str, fn) -> None:
    """Run one optional measurement; a failure is recorded, not fatal (the run on a lent GPU is once)."""
    try:
        out.update(fn())
    except Exception as exc:  # noqa: BLE001 - any failure of one part must keep the others
        out.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"


def measure_point(
    name: str, units: int, precision: str, wrapper: str, device: torch.device, width_div: int, tiny: bool
) -> dict:
    """Everything measured at one point: wall and host times per phase, device-busy time and launches
    from the profiler, op counts per phase. Errors land in `errors` with what was measured before."""
    out: dict = {}
    runner = None
    try:
        runner = Runner(name, units, precision, wrapper, device, width_div)
        out.update(timed(runner, 1 if tiny else 3, tiny))
        wall_s = (out["wall_ms"] or 0.0) / 1e3
        _part(out, "profile", lambda: profiled(runner, 1 if tiny or wall_s > 0.25 else 2))
        _part(out, "ops", lambda: count_ops(runner))
    except Exception as exc:  # noqa: BLE001 - e.g. out of memory: the point fails, the run goes on
        out.setdefault("errors", {})["point"] = f"{type(exc).__name__}: {exc}"
    finally:
        if runner is not None:
            runner.close()
        elif device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
    return out

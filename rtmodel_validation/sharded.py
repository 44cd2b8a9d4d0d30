"""validate's sharded baseline (`--baseline fsdp`) before any rank starts, and what the model predicts for
it: its time, and every run's peak memory.

Why torch-free: the plan (rtmodel_validation.plan) refuses what cannot run in one line before N processes spend
seconds importing torch; the torch version is read from the installed distribution's metadata.

The two predictions come from the model's own modules:
- time: runtime_model.prediction.sharded.sharded_prediction(scenario, "fsdp") (`fsdp_prediction`);
- peak memory: runtime_model.memory.accounting.method_memory (`predicted_peak`), given the trained model's
  shape (built on the meta device) and activations (profiler.activation_memory on FakeTensors), as
  benchmarks/memory_accuracy.py gives them; torch is imported there only, after the trainings.
Where they cannot be imported or run the record holds the measurement and null predictions, and says why.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

from rtmodel_validation.errors import ValidationError

if TYPE_CHECKING:
    from rtmodel_validation.job import RunWorkload
    from runtime_model.core.scenario import Scenario
    from runtime_model.prediction.iteration import IterationPrediction
    from runtime_model.prediction.local_sgd import LocalSgd

BASELINES = ("fsdp",)
# torch.distributed.fsdp.fully_shard (FSDP2) is public from torch 2.6 on (pytorch/pytorch#141868, moved
# from torch.distributed._composable.fsdp); CPU + gloo checked on 2.13 (tests/test_validate_fsdp.py)
FSDP2_TORCH = (2, 6)
# a validation run (record key) -> its method in runtime_model.memory.accounting.method_memory
MEMORY_METHODS = {"allreduce": "ddp", "decentralized": "decent-dp", "local_sgd": "local-sgd", "fsdp": "fsdp"}


def torch_version() -> tuple[int, int] | None:
    """(major, minor) of the installed torch, or None when there is none (require_modules says so)."""
    try:
        found = re.match(r"(\d+)\.(\d+)", metadata.version("torch"))
    except metadata.PackageNotFoundError:
        return None
    return (int(found[1]), int(found[2])) if found else None


def check_baseline(name: str | None) -> str | None:
    """--baseline: None (no sharded run) or one of BASELINES that this torch can run; one line otherwise."""
    if name is None:
        return None
    if name not in BASELINES:
        raise ValidationError(f"--baseline must be one of {', '.join(BASELINES)}, got {name!r}")
    have = torch_version()
    if have is not None and have < FSDP2_TORCH:
        need = ".".join(map(str, FSDP2_TORCH))
        raise ValidationError(
            f"--baseline {name} needs torch >= {need} (FSDP2's torch.distributed.fsdp.fully_shard); this "
            f"host has torch {have[0]}.{have[1]}: upgrade torch or leave --baseline out"
        )
    return name


def _unimportable(exc: ImportError) -> str:
    return _one_line(exc)


def fsdp_prediction(scenario: Scenario) -> tuple[IterationPrediction | None, str | None]:
    """(the model's FSDP2 (ZeRO-3) iteration on the run's scenario, None), or (None, why there is none)."""
    try:
        from runtime_model.prediction.sharded import sharded_prediction
    except ImportError as exc:  # absent, or a part of it not there yet: the run is measured only
        return None, f"runtime_model.prediction.sharded cannot be imported ({_unimportable(exc)})"
    return sharded_prediction(scenario, "fsdp"), None


def memory_optimizer(workload: RunWorkload) -> str:
    """The run's optimizer as the memory model names it: `synthetic` with optimizer=sleep steps plain SGD
    (rtmodel_harness.workloads.SleepOptimizer: no state); else the recipe's (adam, accum-adam)."""
    if workload.model == "synthetic" and workload.model_args.get("optimizer") == "sleep":
        return "sgd"
    return workload.optimizer


# ----------------------------------------------------------------------------- predicted peak memory

AMP_PRECISIONS = ("bf16", "fp16")  # rtmodel_harness.recipe: forward and loss under torch.autocast


@dataclass(frozen=True)
class ModelFacts:
    """What method_memory needs of the run's model beyond the method, read from the model itself (built on
    the meta device: no memory) and from its activations (profiler.activation_memory, FakeTensors)."""

    params: int  # trainable parameters, a tied one once (the list DDP, Decent-DP and FSDP2 hold)
    largest_tensor_params: int
    unit_params: tuple[int, ...]  # FSDP2's units: rtmodel_harness.fsdp.stack_blocks, in forward order
    late_grad_params: int  # root parameters whose gradients backward makes after every unit's
    gossip_bucket_params: tuple[int, ...]  # Decent-DP's buckets at the run's cap (rtmodel_harness.buckets)
    buffer_bytes: int
    activation_bytes: int
    activation_grad_bytes: int
    source: str  # what the activations came from, said in the record
    seconds: float  # wall time of reading all this (fake and meta runs)


def _forward_order(blocks: list, run) -> list:
    """`blocks` in the order a forward first enters them (`run` does forward + backward): the order FSDP2
    gathers them (ModelShape.unit_params); one forward never enters goes last, in the model's order."""
    entered: list[int] = []
    hooks = [
        b.register_forward_pre_hook(lambda _m, _a, i=i: entered.append(i) if i not in entered else None)
        for i, b in enumerate(blocks)
    ]
    try:
        run()
    finally:
        for h in hooks:
            h.remove()
    return [blocks[i] for i in entered] + [b for i, b in enumerate(blocks) if i not in entered]


def model_facts(workload: RunWorkload, device_type: str) -> ModelFacts:
    """The run's model as validate trains it (rtmodel_harness.workloads.build_workload: same model, arguments
    and batch), read without training it: its shape on the meta device, where one forward + backward
    traces the gradients' order (rtmodel_harness.buckets.bucket_layout, as the profile lays out buckets)
    and the order the forward enters the blocks; its activations from
    profiler.activation_memory.estimate_for_workload at the run's batch per rank, amp as its precision, on
    `device_type`'s kernels. Raises what those raise (predicted_peak says it in the record)."""
    import time

    import torch

    from profiler.activation_memory import estimate_for_workload
    from rtmodel_harness.buckets import bucket_layout
    from rtmodel_harness.fsdp import late_grad_params, stack_blocks
    from rtmodel_harness.workloads import build_workload

    started = time.perf_counter()
    args, batch = dict(workload.model_args), workload.batch_per_rank
    amp = workload.precision in AMP_PRECISIONS
    measure = estimate_for_workload(
        workload.model, batch, model_args=args, amp=amp, device_type=device_type, real_up_to_params=REAL_UP_TO
    )
    with torch.device("meta"):
        wl = build_workload(workload.model, args, batch, "meta", rank=0)
    params = [p for p in wl.model.parameters() if p.requires_grad]
    blocks, units = stack_blocks(wl.model), []

    def forward_backward() -> None:
        wl.loss(wl.model, wl.make_batch(0)).backward()

    layout = bucket_layout(
        wl.model,
        workload.bucket_cap_mb,
        run_backward=lambda: units.extend(_forward_order(blocks, forward_backward)),
    )
    element = params[0].element_size()
    # all that forward and backward add above the states (benchmarks/memory_accuracy.py `activations`)
    with_grads = (
        measure.peak_total_bytes - measure.parameter_bytes - measure.buffer_bytes - measure.optimizer_bytes
    )
    source = (
        f"estimate_for_workload({workload.model}, batch {batch}, amp={amp}, {device_type}; FakeTensors): "
        f"{measure.activation_bytes / 2**20:.2f} MiB, {with_grads / 2**20:.2f} MiB with gradients, "
        f"read in {time.perf_counter() - started:.1f} s"
    )
    return ModelFacts(
        params=sum(p.numel() for p in params),
        largest_tensor_params=max(p.numel() for p in params),
        unit_params=tuple(sum(p.numel() for p in u.parameters()) for u in units),
        late_grad_params=late_grad_params(wl.model, units, params, layout.backward_order),
        gossip_bucket_params=tuple(b // element for b in layout.gossip_buckets_bytes),
        buffer_bytes=sum(b.numel() * b.element_size() for b in wl.model.buffers()),
        activation_bytes=measure.activation_bytes,
        activation_grad_bytes=max(0, with_grads),
        source=source,
        seconds=time.perf_counter() - started,
    )


# a model that cannot run on FakeTensors (the synthetic one reads its batch) is measured on real CPU tensors up
# to this size: about 16 bytes per parameter with Adam's states, 4 GB at most in the launcher
REAL_UP_TO = 250_000_000


@functools.lru_cache(maxsize=4)
def _cached_facts(key: str, device_type: str) -> ModelFacts | str:
    """model_facts once per workload and device (predicted_peak asks for every run), or why it failed."""
    from rtmodel_util.run_dirs import torch_caches_scratch
    from rtmodel_validation.job import RunWorkload

    try:
        with torch_caches_scratch():  # MemTracker's import would leave TMPDIR/torchinductor_<user>
            return model_facts(RunWorkload.from_json(json.loads(key)), device_type)
    except Exception as exc:  # noqa: BLE001 - the user's model code among it: said in the record, not raised
        return _one_line(exc)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def predicted_peak(
    scenario: Scenario,
    run: str,
    workload: RunWorkload,
    device: str,
    backend: str,
    local_sgd: LocalSgd | None = None,
) -> tuple[float | None, str]:
    """(the memory model's peak bytes per rank for `run`, where its inputs come from), or (None, why).

    runtime_model.memory.accounting.method_memory as benchmarks/memory_accuracy.py asks it (which it meets
    within 5 % on every row): the model's own shape and activations (model_facts), with what validate
    knows of the run: its world and node size (the scenario), its optimizer, device (torch.optim's foreach
    step is CUDA's default only: torch/optim/optimizer.py, _default_to_fused_or_foreach), backend (gloo's
    reduce-scatter copies its input), local SGD's replica and fragments, and DDP's gradients not bucket
    views (rtmodel_harness.ddp_args). Parameters stay in fp32 under every precision (autocast casts in
    forward), so param, gradient and state bytes are 4.

    Never raises: it runs after the trainings, and a prediction that fails must not lose what was measured."""
    method = MEMORY_METHODS.get(run)
    if method is None:
        return None, f"the memory model has no {run} method"
    try:
        from runtime_model.memory.accounting import TrainingRecipe, method_memory
    except ImportError as exc:
        return (
            None,
            f"no memory model: runtime_model.memory.accounting cannot be imported ({_unimportable(exc)})",
        )
    device_type = device if device in ("cuda", "cpu") else "cpu"
    facts = _cached_facts(json.dumps(workload.to_json(), sort_keys=True, default=str), device_type)
    if isinstance(facts, str):
        return None, f"the model's shape or activations could not be read ({facts})"
    try:
        recipe = TrainingRecipe(
            optimizer=memory_optimizer(workload), ddp_bucket_view=False, foreach_step=device == "cuda"
        )
        shape = {
            "largest_tensor_params": facts.largest_tensor_params,
            "unit_params": facts.unit_params,
            "bucket_params": facts.gossip_bucket_params if method == "decent-dp" else (),
            "backend": backend,
            "buffer_bytes": facts.buffer_bytes,
            "late_grad_params": facts.late_grad_params,
            "activation_grad_bytes": facts.activation_grad_bytes,
        }
        if local_sgd is not None and method == "local-sgd":
            shape.update(replica=local_sgd.replica, fragments=local_sgd.fragments)
        use = method_memory(
            method,
            facts.params,
            recipe,
            world=scenario.shape.gpus,
            gpus_per_node=scenario.shape.gpus_per_node,
            activation_bytes=facts.activation_bytes,
            **shape,
        )
    except Exception as exc:  # noqa: BLE001 - the hook must not lose a finished run (docstring)
        return None, f"the memory model failed: {_one_line(exc)}"
    return float(use.peak_bytes), (
        f"runtime_model.memory.accounting.method_memory ({use.peak_phase}); shape: the model on meta "
        f"({len(facts.unit_params)} FSDP units); activations: {facts.source}"
    )

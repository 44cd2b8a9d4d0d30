"""validate's sharded baseline (`--baseline fsdp`) before any rank starts, and what the model predicts for
it: its time, and every run's peak memory.

Why torch-free: the plan (validation.plan) refuses what cannot run in one line before N processes spend
seconds importing torch; the torch version is read from the installed distribution's metadata.

The two predictions come from the model's own modules and are hooks until those exist:
- time: runtime_model.prediction.sharded.sharded_prediction(scenario, "fsdp") (`fsdp_prediction`);
- peak memory: runtime_model.memory.accounting.method_memory (`predicted_peak` is the hook).
Where they cannot be imported the record holds the measurement and null predictions, and says why.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import TYPE_CHECKING

from validation.errors import ValidationError

if TYPE_CHECKING:
    from runtime_model.core.scenario import Scenario
    from runtime_model.prediction.iteration import IterationPrediction
    from runtime_model.prediction.local_sgd import LocalSgd
    from validation.job import RunWorkload

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
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


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


def predicted_peak(
    scenario: Scenario,
    run: str,
    workload: RunWorkload,
    device: str,
    backend: str,
    local_sgd: LocalSgd | None = None,
) -> tuple[float | None, str]:
    """PREDICTED-PEAK HOOK: (the memory model's peak bytes per rank for `run`, where they come from), or
    (None, why). runtime_model.memory.accounting.method_memory on the run's scenario, as the advisor asks it
    (runtime_model/advice/memory_fit.py memory_of: the profile's gradient buckets stand for the model's
    units and buckets), with what validate knows of the run: its optimizer, device (torch.optim's foreach
    step is CUDA's default only: torch/optim/optimizer.py, _default_to_fused_or_foreach), backend (gloo's
    reduce-scatter copies its input), local SGD's replica and fragments, and DDP's gradients not bucket
    views (rtmodel_harness.ddp_args). Activations are not predicted here: the peak is the states' and
    buffers' (and the step's temporaries), so a measured peak is above it by about the activations.

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
    try:
        recipe = TrainingRecipe(
            optimizer=memory_optimizer(workload), ddp_bucket_view=False, foreach_step=device == "cuda"
        )
        buckets = scenario.buckets
        params = buckets.message_bytes / buckets.element_bytes
        shape = {
            "unit_params": tuple(b.nbytes / buckets.element_bytes for b in buckets.gossip),
            "bucket_params": tuple(
                b.nbytes / buckets.element_bytes for b in (buckets.ddp if method == "ddp" else buckets.gossip)
            ),
            "backend": backend,
        }
        if local_sgd is not None and method == "local-sgd":
            shape.update(replica=local_sgd.replica, fragments=local_sgd.fragments)
        use = method_memory(
            method,
            params,
            recipe,
            world=scenario.shape.gpus,
            gpus_per_node=scenario.shape.gpus_per_node,
            **shape,
        )
    except Exception as exc:  # noqa: BLE001 - the hook must not lose a finished run (docstring)
        return None, f"the memory model failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return float(
        use.peak_bytes
    ), "runtime_model.memory.accounting.method_memory: states, buffers, step temporaries; no activations"

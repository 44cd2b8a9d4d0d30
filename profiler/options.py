"""Everything one profile run is asked to do, checked once and shipped to every rank as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace

from profiler.errors import ProfilingError
from rtmodel_harness.errors import WorkloadError
from rtmodel_harness.model_choice import check_batch, default_batch
from rtmodel_harness.recipe import check_optimizer, check_precision
from rtmodel_util.backend_choice import BACKENDS
from rtmodel_util.launch_env import DEFAULT_TIMEOUT_S, check_local_ranks, check_timeout_s
from runtime_model.core.constraints import (
    BUCKET_CAP_MIB_RANGE,
    MAX_RUN_ITERATIONS,
    RUN_ITERATIONS,
    RUN_WARMUP,
)

# Without --model: the paper's recipe on a GPU host; on a CPU-only host a real model that profiles in
# seconds (a quick CPU profile of full-width transformer-base took 3 minutes on 2 cores). The sleeping
# stand-in `synthetic` is the emulated cluster's, by name.
GPU_DEFAULT_RECIPE = ("transformer-base", "fp16")
CPU_DEFAULT_RECIPE = ("mlp", "fp32")
DEFAULT_MODEL = None  # resolved by default_recipe() on the host that runs the rank
DEFAULT_PRECISION = "fp32"  # with an explicit --model
DEFAULT_OPTIMIZER = "adam"


def default_recipe() -> tuple[str, str]:
    """(model, precision) when --model is not given: GPU_DEFAULT_RECIPE where CUDA GPUs are visible."""
    from rtmodel_util.backend_choice import visible_gpus

    return GPU_DEFAULT_RECIPE if visible_gpus() else CPU_DEFAULT_RECIPE
# (full, quick) defaults: quick trades resolution for a run of seconds
DEFAULTS = {"iterations": (RUN_ITERATIONS, 5), "warmup": (RUN_WARMUP, 1), "reps": (10, 3), "size_factor": (2, 8)}


@dataclass(frozen=True)
class ProfileOptions:
    out: str  # a Path is taken too: resolved() makes it a str (the options travel as JSON)
    model: str | None = DEFAULT_MODEL  # None: default_recipe()
    model_args: dict = field(default_factory=dict)
    batch_per_rank: int | None = None  # in the model's units (model_choice.BATCH_UNITS); None: its default
    precision: str | None = None  # fp32 | tf32 | fp16 | bf16 (rtmodel_harness.recipe); None: the default
    optimizer: str | None = None  # adam | accum-adam; None: DEFAULT_OPTIMIZER
    quick: bool = False
    nproc_per_node: int | None = None  # local launch only; default: number of GPUs, else 2
    ranks_per_node: int | None = None  # pretend k ranks per node (default: LOCAL_WORLD_SIZE)
    resume: bool = False  # keep what an earlier run finished in `out` (the shell's --resume FILE sets both)
    timeout_s: float = DEFAULT_TIMEOUT_S  # per collective / rendezvous; a missing rank becomes an error
    iterations: int | None = None  # measured compute iterations (default RUN_ITERATIONS, quick 5)
    warmup: int | None = None  # unmeasured compute iterations first (default RUN_WARMUP, quick 1)
    reps: int | None = None  # recorded repetitions per message size (default 10, quick 3)
    size_factor: int | None = None  # ratio between message sizes (default 2, quick 8)
    bucket_cap_mb: float | None = None  # None = DDP/Decent-DP default 25 MiB (DDP first bucket 1 MiB)
    backend: str = "auto"  # auto: nccl with CUDA, else gloo
    progress: bool = True
    trace_out: str | None = None  # a directory: each rank's torch.profiler trace of DDP training (trace_out.py)

    def resolved(self) -> ProfileOptions:
        """A copy with quick/full defaults filled in; raises ProfilingError on impossible values."""
        fill = {k: (v[1] if self.quick else v[0]) for k, v in DEFAULTS.items() if getattr(self, k) is None}
        model, precision = default_recipe() if self.model is None else (self.model, DEFAULT_PRECISION)
        fill["model"], fill["precision"] = model, self.precision or precision
        fill["out"], fill["optimizer"] = str(self.out), DEFAULT_OPTIMIZER if self.optimizer is None else self.optimizer
        if self.batch_per_rank is None:
            fill["batch_per_rank"] = default_batch(model)
        o = replace(self, **fill)
        check_precision(o.precision, error=ProfilingError)
        check_optimizer(o.optimizer, error=ProfilingError)
        _check_int(o.iterations, "--iterations", 1, MAX_RUN_ITERATIONS)
        _check_int(o.warmup, "--warmup", 0, MAX_RUN_ITERATIONS)
        _check_int(o.reps, "--reps", 1)
        _check_int(o.size_factor, "--size-factor", 2)
        try:
            check_batch(o.model, o.batch_per_rank)
        except WorkloadError as exc:
            raise ProfilingError(str(exc)) from None
        if o.nproc_per_node is not None:  # bounded: 10^12 ranks were once spawned one by one
            check_local_ranks(o.nproc_per_node, "--nproc-per-node", 1, ProfilingError)
        if o.ranks_per_node is not None:
            check_local_ranks(o.ranks_per_node, "--ranks-per-node", 1, ProfilingError)
            if o.nproc_per_node is not None and o.nproc_per_node % o.ranks_per_node:
                raise ProfilingError(
                    f"--ranks-per-node {o.ranks_per_node} does not divide --nproc-per-node {o.nproc_per_node}"
                )
        check_timeout_s(o.timeout_s, "--timeout-s", ProfilingError)
        if o.bucket_cap_mb is not None and not BUCKET_CAP_MIB_RANGE.contains(o.bucket_cap_mb):
            raise ProfilingError(f"--bucket-cap-mb must be {BUCKET_CAP_MIB_RANGE.describe()}, got {o.bucket_cap_mb}")
        if o.backend not in BACKENDS:
            raise ProfilingError(f"--backend must be one of {', '.join(BACKENDS)}, got {o.backend!r}")
        if not str(o.out):
            raise ProfilingError(
                "--out FILE is required (or --resume FILE to finish a profile an earlier run started)"
            )
        return o

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> ProfileOptions:
        return ProfileOptions(**json.loads(text))


def _check_int(value, flag: str, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (maximum and value > maximum):
        span = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum:,}"
        raise ProfilingError(f"{flag} must be an integer {span}, got {value!r}")

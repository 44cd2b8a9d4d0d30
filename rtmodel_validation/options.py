"""Everything one validation run is asked to do besides which profile: built once (by `rtmodel validate`
or a caller of run_validation) and passed down whole, to the launch, the torchrun rank and the plan.

Why one object: the command's options used to travel as ~15 positional parameters through
run_validation -> _run_in_torchrun -> make_plan, each list a chance to swap two of them. Torch-free: the
plan (rtmodel_validation.plan) reads it on the launcher and on rank 0 of a torchrun job alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rtmodel_util.launch_env import DEFAULT_TIMEOUT_S
from runtime_model.core.constraints import RUN_ITERATIONS, RUN_WARMUP

if TYPE_CHECKING:
    from runtime_model.prediction.local_sgd import LocalSgd


@dataclass(frozen=True)
class ValidateOptions:
    """A validation's choices; None = not given (the profile's, or the advisor's, as each field says).

    Checked where they are used (run_validation: the launch's; rtmodel_validation.plan.make_plan: the run's), so
    each error names its flag in one line."""

    topology: str | None = None  # the topology Decent-DP runs; None: `recommended` must be set
    recommended: bool = False  # run the advisor's recommendation (its best-predicted topology)
    nproc_per_node: int | None = None  # local launch only; None: the profile's world size
    ranks_per_node: int | None = None  # None: the profile's (under torchrun: LOCAL_WORLD_SIZE)
    iterations: int = RUN_ITERATIONS  # timed iterations per run
    warmup: int = RUN_WARMUP  # untimed iterations first (raised to one gossip period + 2)
    model: str | None = None  # train this model instead of the profiled one
    model_args: dict | None = None
    precision: str | None = None  # None: the profile's recipe (rtmodel_harness.recipe)
    optimizer: str | None = None
    local_sgd: LocalSgd | None = None  # checked options (rtmodel_validation.local_sgd): a third run, local SGD
    baseline: str | None = None  # "fsdp": a sharded run too, FSDP2 (rtmodel_validation.sharded); None: none
    backend: str = "auto"  # auto | nccl | gloo (rtmodel_util.backend_choice)
    timeout_s: float = DEFAULT_TIMEOUT_S  # rendezvous / collectives, and a local job as a whole
    progress: bool = False  # one line per phase on stderr (rank 0 under torchrun)
    results_path: str | Path | None = None  # append the result here (None: the caller records it)

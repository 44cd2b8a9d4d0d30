"""Decent-DP preflight: every rank takes one tiny Decent-DP step before any training is timed.

Why: a torch/decent_dp pair that cannot step (decent_dp 0.2.3's AccumAdam calls a check torch 2.11
lacks) used to surface only after the whole DDP run, as a traceback from inside Decent-DP's backward
hooks. Here each rank, right after joining the job, steps the advisor's optimizer (AccumAdam, as
printed: `lambda p: AccumAdam(p, lr=...)`) and the optimizer the run will train with, first alone
(which optimizer failed is then certain), then inside DecentralizedDataParallel on a tiny model with a
topology Decent-DP ships ("complete"). Any failure becomes one ValidationError line naming torch's and
decent_dp's versions and what to do. World size 1 is refused first: Decent-DP divides by group size - 1.

Cost: a Linear(8, 8), two Decent-DP iterations and Decent-DP's two process groups for its topology.
With --baseline fsdp, two FSDP2 iterations on two Linear(8, 8) blocks too (`preflight_fsdp`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from importlib import metadata

import torch

from rtmodel_validation.errors import ValidationError
from rtmodel_validation.job import RankJob

MIN_WORLD_SIZE = 2  # Decent-DP mixes with weight (1 - w) / (|group| - 1)
PREFLIGHT_TOPOLOGY = "complete"  # shipped by Decent-DP, runs on every world size >= 2
PREFLIGHT_LR = 1e-3
ADVISOR_OPTIMIZER = "AccumAdam (the advisor's optimizer)"
RUN_OPTIMIZER = "the run's optimizer (Workload.make_optimizer)"
REMEDY = (
    "`import rtmodel_decentdp` before Decent-DP builds its optimizers (rtmodel validate does), else "
    "pip install 'decent-dp==0.2.3' with a torch in >=2.4,<3"
)
_MAX_CAUSE_CHARS = 300

OptimizerFactory = Callable[[list], torch.optim.Optimizer]


def versions() -> str:
    """'torch 2.13.0, decent_dp 0.2.3': what a failure line names."""
    try:
        dd = metadata.version("decent-dp")
    except metadata.PackageNotFoundError:
        dd = "not installed"
    return f"torch {torch.__version__}, decent_dp {dd}"


def world_size_line(world_size: int) -> str:
    """The one line for a job Decent-DP cannot run: fewer than 2 ranks."""
    return (
        f"Decent-DP needs at least {MIN_WORLD_SIZE} ranks (it averages with the other ranks of a group), "
        f"got world size {world_size}: launch {MIN_WORLD_SIZE} or more (--nproc-per-node {MIN_WORLD_SIZE})"
    )


def failure_line(what: str, device, exc: BaseException) -> str:
    """One line: what failed on which device, the exception, the versions and the remedy."""
    cause = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(cause) > _MAX_CAUSE_CHARS:
        cause = cause[: _MAX_CAUSE_CHARS - 3] + "..."
    return f"Decent-DP preflight failed on {device}: {what} raised {cause} ({versions()}); to fix a version mismatch: {REMEDY}"


def advisor_optimizer(lr: float = PREFLIGHT_LR) -> Callable[[list], torch.optim.Optimizer]:
    """The advisor's line, `optim_fn=lambda p: AccumAdam(p, lr=...)`: AccumAdam on Decent-DP's (name, tensor)s."""
    from decent_dp.optim import AccumAdam

    return lambda named: AccumAdam(named, lr=lr)


def _distributed_errors() -> tuple[type[BaseException], ...]:
    """A peer's failure (a closed connection, a timeout) is not this rank's versions: passed on as it is."""
    err = getattr(torch.distributed, "DistError", None)
    return (err,) if err is not None else ()


def _attempt(what: str, device, fn: Callable[[], object]) -> None:
    try:
        fn()
    except ValidationError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the step is the one line the user sees
        if isinstance(exc, _distributed_errors()):
            raise
        raise ValidationError(failure_line(what, device, exc)) from exc


def _step_alone(make: Callable[[list], torch.optim.Optimizer], device: torch.device) -> None:
    """Build the optimizer as Decent-DP does (a list of (name, parameter)) and take one step."""
    param = torch.nn.Parameter(torch.zeros(8, device=device))
    optimizer = make([("preflight.weight", param)])
    param.grad = torch.ones_like(param)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _step_wrapped(makers: list, device: torch.device, topology: str, local_world_size: int) -> None:
    """Two Decent-DP iterations (its optimizers step from the 2nd), each bucket with the next optimizer."""
    from decent_dp.ddp import DecentralizedDataParallel

    with torch.random.fork_rng(devices=[]):  # the run's own seeding stays as it was
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 8)
        inputs = torch.randn(4, 8)
    buckets = itertools.count()
    ddp = DecentralizedDataParallel(
        model.to(device),
        optim_fn=lambda named: makers[next(buckets) % len(makers)](named),
        topology=topology,
        bucket_size_in_mb=0,  # one bucket per parameter: weight and bias, one optimizer each
        _local_world_size=local_world_size,
    )
    ddp.train()
    inputs = inputs.to(next(ddp.parameters()).device)  # Decent-DP moves the model to the current GPU
    for _ in range(2):
        ddp(inputs).square().mean().backward()
    ddp.global_avg(will_revert=False)  # waits for the last gossip


def preflight_decent_dp(
    device,
    world_size: int,
    optimizer_factory: OptimizerFactory | None = None,
    *,
    optimizer_name: str = RUN_OPTIMIZER,
    topology: str = PREFLIGHT_TOPOLOGY,
    local_world_size: int = 1,
) -> None:
    """Every rank, before any training: Decent-DP steps here with AccumAdam and `optimizer_factory`.

    `optimizer_factory(params)` builds the optimizer the run trains with (a list of tensors, as the
    runner hands Workload.make_optimizer). Needs the process group; raises ValidationError (one line)."""
    if world_size < MIN_WORLD_SIZE:
        raise ValidationError(world_size_line(world_size))
    try:
        import decent_dp.ddp  # noqa: F401
        import decent_dp.optim  # noqa: F401

        import rtmodel_decentdp  # noqa: F401  (registers rtmodel's topologies, makes AccumAdam step)
    except ImportError as exc:
        raise ValidationError(failure_line("importing Decent-DP", device, exc)) from exc
    device = torch.device(device)
    checks = [(ADVISOR_OPTIMIZER, advisor_optimizer())]
    if optimizer_factory is not None:
        checks.append((optimizer_name, lambda named: optimizer_factory([p for _, p in named])))
    for what, make in checks:
        _attempt(what, device, lambda make=make: _step_alone(make, device))
    names = " and ".join(what for what, _ in checks)
    _attempt(
        f"a Decent-DP step ({topology!r} topology) with {names}",
        device,
        lambda: _step_wrapped([make for _, make in checks], device, topology, local_world_size),
    )


def job_optimizer_factory(recipe=None) -> OptimizerFactory:
    """The optimizer the job trains with, as a factory: its recipe's (torch Adam or AccumAdam).

    Why not the workload's make_optimizer: that would build the model a second time (a second copy of
    a large model on the GPU), and what it adds, the `synthetic` model's sleeping stand-in, is rtmodel's
    own class with no torch or decent_dp version to disagree with."""
    from rtmodel_harness.recipe import Recipe

    chosen = recipe or Recipe()
    return lambda params: chosen.make_optimizer(params, PREFLIGHT_LR)


def preflight_job(job: RankJob, device, recipe=None) -> None:
    """run_rank's preflight: the job's world size, its optimizer (`recipe`: the runner's job_recipe(job),
    rtmodel_harness.recipe.Recipe) and its ranks per node."""
    world_size = torch.distributed.get_world_size()
    if world_size < MIN_WORLD_SIZE:
        raise ValidationError(world_size_line(world_size))
    factory = job_optimizer_factory(recipe)
    preflight_decent_dp(device, world_size, factory, local_world_size=job.ranks_per_node)
    if job.baseline == "fsdp":
        preflight_fsdp(torch.device(device), world_size, factory, recipe)


def fsdp_failure_line(device, exc: BaseException) -> str:
    """One line: FSDP2 cannot train here, why, torch's version, and what to do."""
    cause = " ".join(f"{type(exc).__name__}: {exc}".split())
    if len(cause) > _MAX_CAUSE_CHARS:
        cause = cause[: _MAX_CAUSE_CHARS - 3] + "..."
    return (
        f"FSDP2 preflight failed on {device} ({torch.distributed.get_backend()}): two fully_shard steps "
        f"raised {cause} (torch {torch.__version__}); --baseline fsdp cannot run here: leave it out"
    )


def preflight_fsdp(
    device: torch.device, world_size: int, optimizer_factory: OptimizerFactory, recipe=None
) -> None:
    """--baseline fsdp, before any training: two FSDP2 iterations (rtmodel_harness.fsdp.shard_model, the
    run's optimizer, autocast and GradScaler) on two Linear(8, 8) blocks, so a backend or device FSDP2
    cannot train on is one line before DDP and Decent-DP have spent their time, not after."""
    from rtmodel_harness.fsdp import shard_model
    from rtmodel_harness.recipe import Recipe, backward, optimizer_step

    chosen = recipe or Recipe()
    with torch.random.fork_rng(devices=[]):  # the run's own seeding stays as it was
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
        inputs = torch.randn(4, 8)

    def steps() -> None:
        sharded = shard_model(model.to(device), device, world_size)
        optimizer = optimizer_factory(list(sharded.parameters()))
        scaler = chosen.prepare(device)
        for _ in range(2):
            with chosen.autocast(device):
                loss = sharded(inputs.to(device)).float().square().mean()
            backward(loss, scaler)
            optimizer_step(optimizer, scaler)

    try:
        steps()
    except Exception as exc:  # noqa: BLE001 - any failure of the step is the one line the user sees
        if isinstance(exc, _distributed_errors()):
            raise
        raise ValidationError(fsdp_failure_line(device, exc)) from exc

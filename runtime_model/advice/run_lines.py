"""The lines a verdict tells the user to run: the model wrapped for the pick, torchrun for the shape, and
the `rtmodel validate` run that would settle it.

Why their own module: the advisor's verdicts, the families' sentence and the tuned-DDP answer all print
them; each is text the user pastes, so it names the library call exactly (Decent-DP's
DecentralizedDataParallel with its AccumAdam, or torch's DistributedDataParallel) and every rtmodel line
is complete: it runs as printed once its placeholders are filled (tests/test_printed_commands.py).
"""

from __future__ import annotations

import shlex

from runtime_model.core.scenario import Scenario

# validate trains the profiled workload on the profiled shape, so every validate line needs a profile:
# the user's own path when advise read one, else this placeholder (from `rtmodel profile --out PROFILE`)
PROFILE = "PROFILE"


def torchrun_line(scenario: Scenario) -> str:
    shape = scenario.shape
    return (
        f"torchrun --nnodes {shape.nodes} --nproc-per-node {shape.gpus_per_node} "
        "--rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 train.py"
    )


def code_line(topology: str, builtin: bool, ddp_args: str = "") -> str:
    """`ddp_args`: DDP's own arguments beyond the model (the tuned DDP's gradient_as_bucket_view=True)."""
    if topology == "allreduce":
        args = f"model, {ddp_args}" if ddp_args else "model"
        return f"model = torch.nn.parallel.DistributedDataParallel({args})  # keep All-Reduce"
    line = (
        "model = DecentralizedDataParallel(model, optim_fn=lambda p: AccumAdam(p, lr=...), "
        f'topology="{topology}")'
    )
    if not builtin:
        line = "import rtmodel_decentdp  # registers rtmodel's schedules with Decent-DP\n" + line
    return line


def validate_line(topology: str | None = None, local_sgd_h: int | None = None, profile: str = PROFILE) -> str:
    """`rtmodel validate` as it runs: --profile always (validate refuses a line without it); the
    topology, or the advisor's pick (--recommended) when none is named; --local-sgd-h H adds local SGD
    (alone it runs beside the advisor's pick, as validate's --recommended help says)."""
    line = f"rtmodel validate --profile {shlex.quote(profile)}"  # a user's path with a space reads back
    if topology is not None:
        line += f" --topology {topology}"
    elif local_sgd_h is None:
        line += " --recommended"
    if local_sgd_h is not None:
        line += f" --local-sgd-h {local_sgd_h}"
    return line

"""The lines a verdict tells the user to run: the model wrapped for the pick, and torchrun for the shape.

Why their own module: the advisor's verdicts and the tuned-DDP answer both print them; each is text
the user pastes, so it names the library call exactly (Decent-DP's DecentralizedDataParallel with its
AccumAdam, or torch's DistributedDataParallel).
"""

from __future__ import annotations

from runtime_model.core.scenario import Scenario


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

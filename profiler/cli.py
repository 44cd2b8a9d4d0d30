"""`rtmodel profile`: the typer command, registered onto the lead's app by `register(app)`.

Only typer is imported here; torch is imported inside the command body (through the launcher's
ranks), so `rtmodel --help` and `rtmodel advise` stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the `profile` command to `app`."""

    @app.command("profile")
    def profile(
        out: Annotated[Path, typer.Option(help="Profile JSON to write (checkpointed after each section).")],
        model: Annotated[str, typer.Option(
            help="synthetic | mlp | transformer-tiny | package.module:factory")] = "synthetic",
        model_arg: Annotated[list[str] | None, typer.Option(
            metavar="KEY=VALUE", help="Model argument, repeatable (e.g. --model-arg param_mb=100).")] = None,
        batch_per_rank: Annotated[int, typer.Option(help="Samples per rank per iteration.")] = 8,
        quick: Annotated[bool, typer.Option(help="Few iterations, sizes and repetitions (seconds).")] = False,
        nproc_per_node: Annotated[int | None, typer.Option(
            help="Local launch: processes to start (default: GPUs, else 2).")] = None,
        ranks_per_node: Annotated[int | None, typer.Option(
            help="Pretend K ranks per node (default LOCAL_WORLD_SIZE); one machine can then form "
                 "pair-inter / two-nodes patterns.")] = None,
        resume: Annotated[bool, typer.Option(help="Keep sections an earlier run of --out finished.")] = False,
        timeout_s: Annotated[float, typer.Option(help="Rendezvous / collective timeout per rank.")] = 300.0,
        iterations: Annotated[int | None, typer.Option(help="Measured compute iterations (20; quick 5).")] = None,
        warmup: Annotated[int | None, typer.Option(help="Unmeasured iterations first (3; quick 1).")] = None,
        reps: Annotated[int | None, typer.Option(help="Repetitions per message size (10; quick 3).")] = None,
        bucket_cap_mb: Annotated[float | None, typer.Option(help="Gradient bucket cap, MiB (default 25).")] = None,
        backend: Annotated[str, typer.Option(help="auto | gloo | nccl")] = "auto",
        quiet: Annotated[bool, typer.Option(help="No progress lines.")] = False,
    ) -> None:
        """Measure this cluster (compute, bucket timing, all-reduce per group pattern) into a profile JSON.

        Run it plainly to launch local ranks, or under torchrun on every node (see the README)."""
        from profiler.launch import run_profile
        from profiler.model_choice import parse_model_args

        run_profile(out, model, parse_model_args(model_arg), batch_per_rank, quick, nproc_per_node,
                    ranks_per_node=ranks_per_node, resume=resume, timeout_s=timeout_s, iterations=iterations,
                    warmup=warmup, reps=reps, bucket_cap_mb=bucket_cap_mb, backend=backend, progress=not quiet)

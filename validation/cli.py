"""`rtmodel validate`: registered onto the main typer app by `register(app)`.

Imports nothing heavy at module import (no torch, no numpy): `rtmodel --help` stays fast. Locally it
launches the job itself; inside `torchrun ... rtmodel validate ...` each process is one rank.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

FORMATS = ("table", "json")


def _end_torchrun_rank() -> None:
    """Inside torchrun this process was a training rank: leave without interpreter finalisation
    (validation.runner.exit_without_finalisation). A local launch's parent held no process group."""
    if "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ:
        from validation.runner import exit_without_finalisation

        exit_without_finalisation(0)


def register(app: typer.Typer) -> None:
    """Add the `validate` command to `app`."""

    @app.command("validate")
    def validate_cmd(
        profile: Annotated[Path | None, typer.Option("--profile", help="Profile from `rtmodel profile` (its shape "
                                                     "must be the run's shape).")] = None,
        topology: Annotated[str | None, typer.Option("--topology", help="Topology Decent-DP runs.")] = None,
        recommended: Annotated[bool, typer.Option("--recommended", help="Run the advisor's recommendation (the "
                                                  "best-predicted topology if it says keep All-Reduce).")] = False,
        nproc_per_node: Annotated[int | None, typer.Option("--nproc-per-node", help="Ranks to launch on this machine "
                                                           "(default: the profile's world size; ignored under torchrun).")] = None,
        ranks_per_node: Annotated[int | None, typer.Option("--ranks-per-node", help="Ranks per (pretend) node "
                                                           "(default: the profile's, or LOCAL_WORLD_SIZE under torchrun).")] = None,
        iterations: Annotated[int, typer.Option("--iterations", help="Timed iterations per run.")] = 20,
        warmup: Annotated[int, typer.Option("--warmup", help="Untimed iterations first (>= 2).")] = 5,
        model: Annotated[str | None, typer.Option("--model", help="Train this model instead of the profiled one.")] = None,
        model_arg: Annotated[list[str] | None, typer.Option("--model-arg", help="KEY=VALUE model argument "
                                                            "(repeatable).")] = None,
        fmt: Annotated[str, typer.Option("--format", help="table | json")] = "table",
        results: Annotated[Path, typer.Option("--results", help="JSONL file each validation is appended to.")] = Path(
            "rtmodel-validations.jsonl"),
        report: Annotated[bool, typer.Option("--report", help="Summarise the model's accuracy over --results "
                                             "instead of running.")] = False,
        timeout_s: Annotated[float, typer.Option("--timeout-s", help="Give up on the job after this long.")] = 600.0,
    ) -> None:
        """Train with DDP and with Decent-DP, measure per-iteration time, and compare with the model."""
        from rich.console import Console

        from validation.errors import ValidationError

        if fmt not in FORMATS:
            raise ValidationError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        if report:
            from validation.render import render_summary
            from validation.results import dumps, summarise_results

            summary = summarise_results(results)
            if fmt == "json":
                sys.stdout.write(dumps(summary.to_dict(), indent=2) + "\n")
            else:
                render_summary(summary, Console())
            return
        if profile is None:
            raise ValidationError("--profile FILE is required (a profile of this run's shape from `rtmodel profile`)")
        from profiler.model_choice import parse_model_args
        from validation.validate import run_validation

        result = run_validation(
            profile, topology=topology, recommended=recommended, nproc_per_node=nproc_per_node,
            ranks_per_node=ranks_per_node, iterations=iterations, warmup=warmup, model=model,
            model_args=parse_model_args(model_arg), results_path=results, timeout_s=timeout_s,
        )
        if result is None:  # a rank other than 0 of a torchrun job
            _end_torchrun_rank()
            return
        if fmt == "json":
            from validation.results import dumps

            sys.stdout.write(dumps(result.to_dict(), indent=2) + "\n")
        else:
            from validation.render import render_result

            console = Console()
            render_result(result, console)
            console.print(f"appended to {results}", highlight=False)
        _end_torchrun_rank()

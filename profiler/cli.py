"""`rtmodel profile`: the typer command, registered onto the lead's app by `register(app)`.

Only typer is imported here; torch is imported inside the command body (through the launcher's
ranks), so `rtmodel --help` and `rtmodel advise` stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler.options import DEFAULT_MODEL


def register(app: typer.Typer) -> None:
    """Add the `profile` command to `app`."""

    @app.command("profile")
    def profile(
        out: Annotated[str | None, typer.Option(
            help="Profile JSON to write (checkpointed after each section); its directory must exist.",
        )] = None,
        model: Annotated[str | None, typer.Option(
            help="transformer-base | transformer-big | gpt2-small | resnet50 | transformer-xl-base (the presets' "
                 "models; --model-arg width_div=N for a small copy) | synthetic (a sleeping stand-in) | mlp | "
                 "transformer-tiny | package.module:factory (default: transformer-base with fp16 on a GPU host, "
                 "mlp on a CPU-only host).")] = DEFAULT_MODEL,
        model_arg: Annotated[list[str] | None, typer.Option(
            metavar="KEY=VALUE", help="Model argument, repeatable (e.g. --model-arg param_mb=100).")] = None,
        batch_per_rank: Annotated[int | None, typer.Option(
            help="Per rank per iteration, in the model's units: tokens for the transformers and GPT-2 (whole "
                 "32-token sentences / 192-token segments; default 1024 / 192), images for resnet50, samples "
                 "otherwise (default 8).")] = None,
        precision: Annotated[str | None, typer.Option(
            help="fp32 | tf32 | fp16 (autocast + GradScaler, GPU only) | bf16 (autocast); default fp32, or "
                 "fp16 with the default model on a GPU.")] = None,
        optimizer: Annotated[str, typer.Option(
            help="adam (torch.optim.Adam) | accum-adam (Decent-DP's AccumAdam, accum_iter 4).")] = "adam",
        quick: Annotated[bool, typer.Option(help="Few iterations, sizes and repetitions (seconds).")] = False,
        nproc_per_node: Annotated[int | None, typer.Option(
            help="Local launch: processes to start (default: GPUs, else 2).")] = None,
        ranks_per_node: Annotated[int | None, typer.Option(
            help="Pretend K ranks per node (default LOCAL_WORLD_SIZE); one machine can then form "
                 "pair-inter / two-nodes patterns.")] = None,
        resume: Annotated[Path | None, typer.Option(metavar="FILE", help=(
            "Finish the profile FILE an earlier run started: keep the sections it finished on the same "
            "setup, measure the rest into FILE. Alone it needs FILE to exist; with --out FILE too, a "
            "missing FILE is started (for requeued jobs)."))] = None,
        timeout_s: Annotated[float, typer.Option(help="Rendezvous / collective timeout per rank.")] = 300.0,
        iterations: Annotated[int | None, typer.Option(help="Measured compute iterations (20; quick 5).")] = None,
        warmup: Annotated[int | None, typer.Option(help="Unmeasured iterations first (3; quick 1).")] = None,
        reps: Annotated[int | None, typer.Option(help="Repetitions per message size (10; quick 3).")] = None,
        bucket_cap_mb: Annotated[float | None, typer.Option(help="Gradient bucket cap, MiB (default 25).")] = None,
        backend: Annotated[str, typer.Option(help="auto | gloo | nccl")] = "auto",
        quiet: Annotated[bool, typer.Option(help="No progress lines.")] = False,
    ) -> None:
        """Measure this cluster (compute, bucket timing, all-reduce per group pattern) into a profile JSON.

        Run it plainly to launch local ranks, or under torchrun on every node (see docs/profiling.md)."""
        from profiler.launch import run_profile
        from rtmodel_harness.model_choice import parse_model_args
        from rtmodel_util.files import output_path_arg
        from rtmodel_util.processes import launch_env

        launch_env()  # first: a bad RANK must not decide who checks --out (its rank says it: failing.report)
        path = output_file(output_path_arg(out, "--out"), resume)
        run_profile(path, model, parse_model_args(model_arg), batch_per_rank, quick, nproc_per_node,
                    ranks_per_node=ranks_per_node, resume=resume is not None, timeout_s=timeout_s,
                    iterations=iterations, warmup=warmup, reps=reps, bucket_cap_mb=bucket_cap_mb,
                    backend=backend, progress=not quiet, precision=precision, optimizer=optimizer)
        from rtmodel_util.rank_exit import end_launched_rank

        end_launched_rank()  # under torchrun: gloo's threads must not abort a finished rank's exit


def output_file(out: Path | None, resume: Path | None) -> Path:
    """The file the profile is written to: --out, or --resume FILE (both: the same file), checked first.

    --resume FILE alone needs FILE to exist; --out FILE --resume FILE resumes FILE if it exists and
    starts it otherwise (a job script that may be preempted and requeued).

    Only the process that writes it checks it: the local launcher, or rank 0 of a torchrun job (the
    other ranks' machines need not have rank 0's directory).
    """
    from profiler.errors import ProfilingError
    from rtmodel_util.files import check_output_path
    from rtmodel_util.processes import is_lead_process

    if out is None and resume is None:
        raise ProfilingError(
            "--out FILE is required (or --resume FILE to finish a profile an earlier run started)"
        )
    if out is not None and resume is not None and out.resolve() != resume.resolve():
        raise ProfilingError(
            f"--out {out} and --resume {resume} name different files; "
            "--resume FILE alone finishes FILE in place"
        )
    path = resume if resume is not None else out
    if is_lead_process():
        if out is None and not resume.exists():  # a typo must not start a whole new profile
            raise ProfilingError(
                f"--resume {resume}: that file does not exist, so there is nothing to finish; start a "
                f"profile with --out {resume} (a job script that may be requeued can pass both: "
                "--out FILE --resume FILE)"
            )
        check_output_path(path, "--resume" if out is None else "--out")
        if resume is not None:
            from profiler.document import check_resumable

            check_resumable(path)
    return path

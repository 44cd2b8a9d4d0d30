"""`rtmodel profile`: the typer command, registered onto the app by `register(app)`.

Why in the shell, not in profiler/: the profiler measures and knows nothing of the command line; under
torchrun each rank runs this command too (`-m rtmodel_cli profile ...`). Only typer and the option types
(rtmodel_cli.run_options, declared once with validate's) are imported here; torch is imported inside the
command body (through the launcher's ranks), so `rtmodel --help` and `rtmodel advise` stay fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from rtmodel_cli.options import BucketMibOpt
from rtmodel_cli.run_options import (
    BatchPerRankOpt,
    ProfileOutOpt,
    QuickOpt,
    RepsOpt,
    ResumeOpt,
    RunFlags,
    TraceOutOpt,
    takes_run_flags,
)


def register(app: typer.Typer) -> None:
    """Add the `profile` command to `app`."""

    @app.command("profile")
    @takes_run_flags
    def profile(
        out: ProfileOutOpt = None,
        batch_per_rank: BatchPerRankOpt = None,
        quick: QuickOpt = False,
        resume: ResumeOpt = None,
        reps: RepsOpt = None,
        bucket_cap_mb: BucketMibOpt = None,
        trace_out: TraceOutOpt = None,
        *,
        run: RunFlags,
    ) -> None:
        """Measure this cluster (compute, bucket timing, all-reduce per group pattern) into a profile JSON.

        Run it plainly to launch local ranks, or under torchrun on every node (see docs/profiling.md)."""
        from profiler.launch import run_profile
        from profiler.options import ProfileOptions
        from rtmodel_util.files import output_path_arg
        from rtmodel_util.launch_env import launch_env

        launch_env()  # first: a bad RANK must not decide who checks --out (its rank says it: failing.report)
        path = output_file(output_path_arg(out, "--out"), resume)
        opts = ProfileOptions(
            out=str(path), batch_per_rank=batch_per_rank, quick=quick, resume=resume is not None,
            iterations=run.iterations, warmup=run.warmup, reps=reps, bucket_cap_mb=bucket_cap_mb,
            trace_out=None if trace_out is None else str(trace_out), **run.run_kwargs(),
        )  # fmt: skip
        run_profile(opts)
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
    from rtmodel_util.launch_env import is_lead_process

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

"""`rtmodel validate`: registered onto the main typer app by `register(app)`.

Why in the shell, not in rtmodel_validation/: validation runs and compares, and knows nothing of the command
line; this module parses the options, calls it and renders the results (rtmodel_cli.validation_tables).
Imports nothing heavy at module import (no torch, no numpy): `rtmodel --help` stays fast. Locally it
launches the job itself; inside `torchrun ... rtmodel validate ...` each process is one rank.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from rtmodel_cli.local_sgd_options import LocalSgdFlags, local_sgd_asked, takes_local_sgd
from rtmodel_cli.options import ProfileOpt, TopologyOpt
from rtmodel_cli.output_format import Format, TableJsonFormatOpt
from rtmodel_cli.run_options import RunFlags, takes_run_flags
from rtmodel_util.rank_exit import end_launched_rank
from rtmodel_validation.results import DEFAULT_RESULTS_DOC, default_results_path


def results_file(results: str | Path | None, profile: Path | None = None) -> tuple[Path, bool]:
    """(the results file, whether it is rtmodel's default), checked before any work.

    A --results path follows the one output rule (rtmodel_util.files: its directory must exist, and it is
    not the --profile the run reads nor another input), is new, empty or a results file (a profile JSON
    given by mistake is refused, not appended to), and its lock can be taken
    (rtmodel_validation.results_file.check_results_output); the default is ./rtmodel-validations.jsonl in the
    working directory (one per project), created on the first write. Only the process that writes it
    checks it (rank 0 under torchrun)."""
    from rtmodel_cli.command_files import command_input_files
    from rtmodel_util.launch_env import is_lead_process
    from rtmodel_validation.results import check_default_results_path
    from rtmodel_validation.results_file import check_results_output

    writer = is_lead_process()
    if results is not None:
        # as typed: a trailing slash (a directory) is seen before a Path would drop it
        if not writer:
            return Path(results), False
        inputs = {"--profile": profile, **command_input_files(("results",))}
        return check_results_output(results, "--results", inputs=inputs), False
    path = default_results_path()
    return (check_default_results_path(path) if writer else path), True


def record(result, path: Path, is_default: bool) -> None:
    """Append the (already shown) result to the results file; if that fails, say so in one line."""
    from rtmodel_cli.failing import describe, exit_code_of, say_error
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.results import append_record
    from runtime_model.core.errors import RtmodelError, RunFailure

    try:
        append_record(path, result, create_dir=is_default)
    except (RtmodelError, OSError) as exc:  # a user's mistake stays exit 2, a full disk exit 1
        kind = ValidationError if exit_code_of(exc) == 2 else RunFailure
        err = kind(f"{describe(exc)} (the result above was not recorded)")
        from rtmodel_util.launch_env import in_launched_rank

        if in_launched_rank():  # leave as a finished rank does; the shell's error path is not taken
            say_error(str(err))
            end_launched_rank(exit_code_of(exc))
        raise err from exc


def register(app: typer.Typer) -> None:
    """Add the `validate` command to `app`.

    Long because typer reads every option from the one command signature inside it."""

    @app.command("validate")
    @takes_run_flags
    @takes_local_sgd
    def validate_cmd(
        profile: ProfileOpt = None,
        topology: TopologyOpt = None,
        recommended: Annotated[
            bool,
            typer.Option(
                "--recommended",
                help="Run the advisor's recommendation (the best-predicted topology if it says keep "
                "All-Reduce); the default when a --local-sgd-* option is given without --topology.",
            ),
        ] = False,
        baseline: Annotated[
            str | None,
            typer.Option(
                "--baseline",
                metavar="fsdp",
                help="Also run a sharded baseline, after the others: fsdp = FSDP2 fully_shard on each "
                "block (reshard_after_forward=True: ZeRO-3) and on the root, timed and its peak memory "
                "recorded as theirs. Default: none.",
            ),
        ] = None,
        fmt: TableJsonFormatOpt = Format.table,
        results: Annotated[
            str | None,
            typer.Option(
                "--results",
                show_default=str(default_results_path()),
                help=f"JSONL file each validation is appended to and --report reads (default: "
                f"{DEFAULT_RESULTS_DOC}, its directory created on the first write; a path you give must be "
                "in an existing directory).",
            ),
        ] = None,
        report: Annotated[
            bool,
            typer.Option(
                "--report", help="Summarise the model's accuracy over --results instead of running."
            ),
        ] = False,
        *,
        run: RunFlags,
        local_sgd_flags: LocalSgdFlags,
    ) -> None:
        """Train with DDP and with Decent-DP (and local SGD with a --local-sgd-* option), measure per-iteration time,
        and compare with the model."""
        from rtmodel_validation.errors import ValidationError

        if report:
            show_report(results, fmt)
            return
        from rtmodel_util.launch_env import launch_env

        launch_env()  # first: a bad RANK must not decide who says an error or checks --results
        from rtmodel_validation.local_sgd import local_sgd_options

        # one meaning in every command (rtmodel_cli.local_sgd_options)
        asked = local_sgd_asked(local_sgd_flags.as_dict(), by_default=False)
        local_sgd = None if asked is None else local_sgd_options(**asked)
        recommended = recommended_by_default(topology, recommended, local_sgd is not None)
        if profile is None:
            raise ValidationError(
                "--profile FILE is required (a profile of this run's shape from `rtmodel profile`)"
            )
        from rtmodel_validation.options import ValidateOptions
        from rtmodel_validation.validate import run_validation

        # before the run: a run never ends in "cannot write"
        path, is_default = results_file(results, profile)
        counts = {k: v for k, v in (("iterations", run.iterations), ("warmup", run.warmup)) if v is not None}
        opts = ValidateOptions(
            topology=topology,
            recommended=recommended,
            local_sgd=local_sgd,
            baseline=baseline,
            **counts,
            **run.run_kwargs(),
        )  # results_path None: this command shows the result first, then records it (show_and_record)
        result = run_validation(profile, opts)
        if result is not None:  # None: a rank other than 0 of a torchrun job
            show_and_record(result, fmt, path, is_default)
        end_launched_rank()


def recommended_by_default(topology: str | None, recommended: bool, local_sgd: bool) -> bool:
    """--recommended as given, or True for local SGD asked with no --topology: a run always sets local SGD
    beside DDP and one Decent-DP topology, and `rtmodel validate --profile PROFILE --local-sgd-h 30`
    (as advise prints it: runtime_model.advice.run_lines) means the one the advisor would pick."""
    return recommended or (topology is None and local_sgd)


def show_report(results: Path | None, fmt: str) -> None:
    """--report: the model's accuracy over a results file (None: the default one)."""
    from rtmodel_cli.shown_console import terminal_console
    from rtmodel_cli.validation_tables import render_summary
    from rtmodel_validation.results import dumps, summarise_results

    summary = summarise_results(results)
    if fmt == "json":
        sys.stdout.write(dumps(summary.to_dict(), indent=2) + "\n")
    else:
        render_summary(summary, terminal_console(highlight=True))


def show_and_record(result, fmt: str, path: Path, is_default: bool) -> None:
    """Show the result first, then append it (a failed append cannot lose what was measured)."""
    if fmt == "json":  # stdout stays one JSON document; where it was recorded goes to stderr
        from rtmodel_validation.results import dumps

        sys.stdout.write(dumps(result.to_dict(), indent=2) + "\n")
        sys.stdout.flush()
        record(result, path, is_default)
        typer.echo(f"appended to {path}", err=True)
    else:
        from rtmodel_cli.shown_console import terminal_console
        from rtmodel_cli.validation_tables import render_result

        console = terminal_console(highlight=True)
        render_result(result, console)
        render_local_sgd(result, console)
        record(result, path, is_default)
        console.print(f"appended to {path}", highlight=False, soft_wrap=True)  # a path to copy: unwrapped


def render_local_sgd(result, console) -> None:
    """The local-SGD run beside the table of DDP and Decent-DP (same error definition); nothing without it."""
    c, run = result.local_sgd, result.local_sgd_run
    if c is None:
        return
    replica = "DDP inside each node" if run.options.replica == "node" else "every rank its own replica"
    console.print(
        f"{c.name} ({replica}): predicted {c.predicted_mean_s * 1e3:.2f} ms, measured "
        f"{c.measured.mean_s * 1e3:.2f} ms per inner step, error {c.error:+.1%} ({run.iterations} timed "
        f"inner steps after {run.warmup} warm-up: whole periods of H={run.options.inner_steps})",
        highlight=False,
    )

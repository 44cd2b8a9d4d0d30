"""The one failure path of every `rtmodel` command.

Commands raise; they never print errors themselves. `guarded` turns rtmodel's own errors
(`runtime_model.core.errors`: user mistakes exit 2, run failures exit 1) and `OSError` into one line on
stderr (`say_error`: control characters escaped, as a name read from a file may carry them); anything
else is a bug and keeps its traceback. `RTMODEL_DEBUG=1` prints the traceback of
every error as well.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import sys
import traceback

import typer
from typer.core import TyperGroup

from rtmodel_cli.terminal import prepare_terminal
from rtmodel_inputs.request import flag_of  # noqa: F401 (the shell's name for it)
from rtmodel_util.shown import shown
from runtime_model.core.errors import DEBUG_ENV, USER_OS_ERRORS, RtmodelError, UserError

# The running command's option values by parameter name, set by `guarded`: checks that concern every
# option at once (an output must not replace any input file) read them without each command listing them.
_OPTIONS: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "rtmodel_command_options", default=None
)


def command_options() -> dict:
    """The running command's option values by parameter name ({} outside a command)."""
    return dict(_OPTIONS.get() or {})


def say_error(message: str) -> None:
    """The error line on stderr: `error: ` and the message on one line, its control characters escaped
    (rtmodel_util.shown: a name read from a file may carry an escape sequence)."""
    typer.echo(f"error: {' '.join(shown(message).split())}", err=True)


def fail(message: str, code: int = 2) -> None:
    """One clear line on stderr and a non-zero exit: never a traceback for a user mistake."""
    say_error(message)
    raise typer.Exit(code)


def describe(exc: BaseException, option_names: frozenset[str] = frozenset()) -> str:
    """The one line shown for an error: a model input that the command took as an option is named
    by its flag (`gpus_per_node` -> `--gpus-per-node`); OSErrors by their path."""
    if isinstance(exc, RtmodelError):
        message = exc.message_for(lambda name: flag_of(name) if name in option_names else name)
        return " ".join(message.split())
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        return f"{exc.filename}: {reason}" if exc.filename else reason
    return " ".join(str(exc).split()) or type(exc).__name__


def exit_code_of(exc: BaseException) -> int:
    if isinstance(exc, RtmodelError):
        return exc.exit_code
    return 2 if isinstance(exc, USER_OS_ERRORS) else 1


def report(exc: BaseException, option_names: frozenset[str] = frozenset()) -> None:
    """Print `exc` as one line (traceback first under RTMODEL_DEBUG=1) and exit with its code.
    Inside a torchrun job a user error is the same on every rank, so only rank 0 says it; a run
    failure, or a rank's own malformed environment (RANK=7 of 4 is no rank 0), is said by its rank."""
    from rtmodel_util.launch_env import LaunchEnvError, is_lead_process  # here: only failures need it

    if isinstance(exc, UserError) and not isinstance(exc, LaunchEnvError) and not is_lead_process():
        raise typer.Exit(exit_code_of(exc))
    if os.environ.get(DEBUG_ENV) == "1":
        sys.stderr.write(shown("".join(traceback.format_exception(exc))))
    fail(describe(exc, option_names), exit_code_of(exc))


def guarded(command):
    """Wrap a command's callback so that rtmodel's errors and OSErrors end as one line (see module doc).
    The callback's parameter names are its options' names, so errors can name the flag."""
    option_names = frozenset(inspect.signature(command).parameters)

    @functools.wraps(command)
    def run(*args, **kwargs):
        token = _OPTIONS.set(dict(kwargs))
        try:
            return command(*args, **kwargs)
        except (RtmodelError, OSError) as exc:
            report(exc, option_names)
        finally:
            _OPTIONS.reset(token)

    return run


def guard_app(typer_app: typer.Typer) -> typer.Typer:
    """Guard every command registered on `typer_app` and its sub-apps (once, after registration), and
    give each the panelled --help (help_panels.py)."""
    from typer.core import TyperCommand

    from rtmodel_cli.help_panels import PanelledCommand

    for info in typer_app.registered_commands:
        info.callback = guarded(info.callback)
        if info.cls in (None, TyperCommand):  # --help in panels, common options first
            info.cls = PanelledCommand
    for group in typer_app.registered_groups:
        guard_app(group.typer_instance)
    return typer_app


class OneLineUsageErrors(TyperGroup):
    """The app's group: usage errors (unknown option, bad choice, missing value) end as one line too.

    Why: typer shows them as a usage line, a hint and a boxed panel, which breaks the promise of one
    `error:` line per bad input. The command's --help is named in the line instead."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        prepare_terminal()
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            code = 1
        except typer.TyperException as exc:  # click's exceptions, as typer vendors them
            code = getattr(exc, "exit_code", 1)
            if type(exc).__name__ != "NoArgsIsHelpError":  # typer has already printed the help
                say_error(usage_line(exc))
        sys.exit(code if isinstance(code, int) else 0)


# Spellings retired so that each flag name has one meaning (issue "The house"): old -> what says it now.
RETIRED = {
    "--json": "--format json",
    "--topology": "--topologies",
    "--network": "--networks",
    "--model": "--models",
    "--cluster": "--clusters",
}


def usage_line(exc) -> str:
    """click's message on one line, pointing at the command's --help; an unknown option that is a retired
    spelling (RETIRED) names the flag of this command that says it now."""
    message = " ".join(str(exc.format_message()).split())
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return message
    now = RETIRED.get(getattr(exc, "option_name", None) or "")
    if now and now not in message and now.split()[0] in {o for p in ctx.command.params for o in p.opts}:
        message = f"{message}; use {now}"
    return f"{message} (see: {ctx.command_path} --help)"

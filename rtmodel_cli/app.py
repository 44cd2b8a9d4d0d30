"""The `rtmodel` command line: one typer app; every command registers itself from its own module,
`rtmodel_cli/commands/<command>.py`.

Why each command's import sits in a function (`command_module`) and not at the top: a command line
imports only the module of the command it runs (`commands_for`), so `rtmodel advise` pays for no other command's imports, and `advise`,
`topologies` and `--help` never import torch; the cluster commands import it only when run. Every
registered callback is wrapped by `failing.guarded`, so all commands share one error path.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Annotated

import typer

from rtmodel_cli.failing import OneLineUsageErrors, guard_app

# Every command, in the order `rtmodel --help` lists them; command NAME is registered by the module
# rtmodel_cli.commands.NAME (`register(app)`), imported only when a command line needs it.
COMMANDS = ("advise", "topologies", "presets", "profile", "calibrate", "validate", "emulate", "plot")


def _version(value: bool) -> None:
    """--version: the installed distribution's version (pyproject.toml is its single source)."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"rtmodel {version('rtmodel-advisor')}")
        except PackageNotFoundError:
            typer.echo("rtmodel (not installed as a distribution: no version recorded)")
        raise typer.Exit()


def _root(
    show_version: Annotated[
        bool,
        typer.Option("--version", help="Print rtmodel's version and exit.", is_eager=True, callback=_version),
    ] = False,
) -> None:
    pass


def build_app(commands: Iterable[str] = COMMANDS) -> typer.Typer:
    """The app with `commands` registered (all of them unless told)."""
    built = typer.Typer(
        help="Will decentralized (gossip) training beat All-Reduce on your cluster? Predict, profile, validate.",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,  # click's help: whole flag names, help beside them (rich's table cut both)
        pretty_exceptions_enable=False,
        cls=OneLineUsageErrors,
    )
    built.callback()(_root)
    for name in commands:
        command_module(name).register(built)
    return guard_app(built)


def command_module(name: str):
    """The module that registers command `name`, by a plain import each, so a reader (and any import
    graph) sees every command module; imported only when a command line needs it (commands_for)."""
    match name:
        case "advise":
            from rtmodel_cli.commands import advise as module
        case "topologies":
            from rtmodel_cli.commands import topologies as module
        case "presets":
            from rtmodel_cli.commands import presets as module
        case "profile":
            from rtmodel_cli.commands import profile as module
        case "calibrate":
            from rtmodel_cli.commands import calibrate as module
        case "validate":
            from rtmodel_cli.commands import validate as module
        case "emulate":
            from rtmodel_cli.commands import emulate as module
        case "plot":
            from rtmodel_cli.commands import plot as module
        case _:
            raise KeyError(name)
    return module


def commands_for(argv: list[str]) -> tuple[str, ...]:
    """Only the command a command line runs, when its first word names one: the others' modules (torch-free
    but many) are neither imported nor built, the cost the main job would pay for them (docs/scale.md).
    Anything else (--help, --version, a mistyped name that deserves the whole list) gets every command."""
    first = argv[0] if argv else ""
    return (first,) if first in COMMANDS else COMMANDS


def __getattr__(name: str):
    """`app`, with every command, built on first use (tests and `python -c` users import it by name)."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    build_app(commands_for(sys.argv[1:]))()

"""The `rtmodel` command line: one typer app; every command registers itself from its own module.

Why a loop over modules: each stage owns its command beside its code (`profiler/cli.py`, ...), and
this file only lists them. Every registered callback is wrapped by `failing.guarded`, so all commands
share one error path. `advise`, `topologies` and `--help` never import torch; the cluster commands
import it only when run.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from typing import Annotated

import typer

from rtmodel_cli.failing import OneLineUsageErrors, guard_app

COMMAND_MODULES = {  # each command and the module that registers it, in the order `rtmodel --help` lists them
    "advise": "rtmodel_cli.advise",
    "topologies": "rtmodel_cli.topologies",
    "presets": "rtmodel_cli.presets_cmd",
    "profile": "profiler.cli",
    "calibrate": "calibration.cli",
    "validate": "validation.cli",
    "emulate": "emulation.cli",
    "plot": "rtmodel_cli.plot",
}


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


def build_app(commands: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
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
        importlib.import_module(COMMAND_MODULES[name]).register(built)
    return guard_app(built)


def commands_for(argv: list[str]) -> tuple[str, ...]:
    """Only the command a command line runs, when its first word names one: the others' modules (torch-free
    but many) are neither imported nor built, the cost the main job would pay for them (docs/scale.md).
    Anything else (--help, --version, a mistyped name that deserves the whole list) gets every command."""
    first = argv[0] if argv else ""
    return (first,) if first in COMMAND_MODULES else tuple(COMMAND_MODULES)


def __getattr__(name: str):
    """`app`, with every command, built on first use (tests and `python -c` users import it by name)."""
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    build_app(commands_for(sys.argv[1:]))()

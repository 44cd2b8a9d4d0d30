"""The `rtmodel` command line: one typer app; every command registers itself from its own module.

Why a loop over modules: each stage owns its command beside its code (`profiler/cli.py`, ...), and
this file only lists them. Every registered callback is wrapped by `failing.guarded`, so all commands
share one error path. `advise`, `topologies` and `--help` never import torch; the cluster commands
import it only when run.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from rtmodel_cli.failing import OneLineUsageErrors, guard_app

COMMAND_MODULES = (  # in the order `rtmodel --help` lists them
    "rtmodel_cli.advise",
    "rtmodel_cli.topologies",
    "rtmodel_cli.presets_cmd",
    "profiler.cli",
    "calibration.cli",
    "validation.cli",
    "emulation.cli",
    "rtmodel_cli.plot",
)

app = typer.Typer(
    help="Will decentralized (gossip) training beat All-Reduce on your cluster? Predict, profile, validate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineUsageErrors,
)


def _version(value: bool) -> None:
    """--version: the installed distribution's version (pyproject.toml is its single source)."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"rtmodel {version('rtmodel-advisor')}")
        except PackageNotFoundError:
            typer.echo("rtmodel (not installed as a distribution: no version recorded)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option("--version", help="Print rtmodel's version and exit.", is_eager=True, callback=_version),
    ] = False,
) -> None:
    pass


for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app)
guard_app(app)


def main() -> None:
    app()

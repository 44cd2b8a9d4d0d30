"""The one `--format` option of every command that has one: the formats that command writes, as choices.

Why a function and not a type per command: --format was declared four ways (an enum, a second enum, two
strings checked by hand, each with its own message). Now each command names the formats it writes; a
format it has no writer for is refused by typer like any other bad choice, in one line with exit 2
("'csv' is not one of 'table', 'json'"). Imports only typer: `rtmodel calibrate` and `rtmodel validate`
load nothing of the model to parse it.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Annotated

import typer


class Format(StrEnum):
    """Every output format a command may write; each command takes some of them (`format_option`)."""

    table = "table"
    json = "json"
    csv = "csv"


@functools.cache
def format_choices(*allowed: Format) -> type[StrEnum]:
    """The StrEnum of `allowed`, in that order (one class per set): its members equal Format's and their
    strings, so a command compares its value with Format (`fmt == Format.json`) whatever its set."""
    return StrEnum("Format", [(Format(f).name, Format(f).value) for f in allowed])


def format_option(*allowed: Format):
    """The Annotated type of a command's --format parameter: the choices `allowed`, its help their list
    "a | b" (tests/test_commands.py runs each)."""
    choices = format_choices(*allowed)
    return Annotated[choices, typer.Option("--format", help=" | ".join(choices))]


FormatOpt = format_option(*Format)  # advise, topologies: table | json | csv
TableJsonFormatOpt = format_option(Format.table, Format.json)  # calibrate, validate

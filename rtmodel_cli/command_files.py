"""The files a running command reads, however each was named.

Why in the shell: only the shell knows a command's options, and a --scenario file names inputs too
(`nccl_tests = "nt.png"`, rtmodel_inputs.fields: the keys with path=True, relative to the file). Every
command that writes a file passes `command_input_files()` to rtmodel_util.files.check_output_path, so an
output never replaces one of them, named by a flag, by a scenario file, through a symbolic or a hard link
(`plot crossover --scenario s.toml --out nt.png` once wrote its figure over its own nccl-tests file).
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime_model.core.errors import UserError


def command_input_files(own_outputs: tuple[str, ...] = ("out",)) -> dict[str, str]:
    """Every existing file the running command's options name, by how it was named ("--results", "--trace
    a.json" for one of a list, "'nccl_tests' of --scenario s.toml"); its own outputs (parameter names)
    aside. {} outside a command (rtmodel_cli.failing.command_options)."""
    from rtmodel_cli.failing import command_options

    options = command_options()
    found: dict[str, str] = {}
    for name, value in options.items():
        if name not in own_outputs:
            _add(found, f"--{name.replace('_', '-')}", value)
    scenario = options.get("scenario")
    if scenario is not None and "scenario" not in own_outputs and _is_file(scenario):
        found.update(_scenario_inputs(scenario))
    return found


def _scenario_inputs(path: str | os.PathLike) -> dict[str, str]:
    """The existing files a scenario file names (its path keys); {} when it cannot be read: the command's
    own reading of it says why, in one line."""
    from rtmodel_cli import scenario_file

    try:
        values = scenario_file.read(path)
    except (UserError, OSError, ValueError):
        return {}
    found: dict[str, str] = {}
    for key in scenario_file.PATH_KEYS:
        _add(found, f"'{key}' of --scenario {os.fspath(path)}", values.get(key))
    return found


def _add(found: dict[str, str], label: str, value) -> None:
    items = value if isinstance(value, list | tuple) else [value]
    files = [str(item) for item in items if isinstance(item, str | Path) and _is_file(item)]
    for item in files:
        found.setdefault(label if isinstance(value, str | Path) else f"{label} {item}", item)


def _is_file(path: str | os.PathLike) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL: not an existing input
        return False

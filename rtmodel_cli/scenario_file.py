"""`--scenario FILE`: every input of `rtmodel advise` in one TOML or JSON file, kept in a team's repo.

Why a file of option values and nothing more: the keys are the options' names with underscores and
their values are what the flags take, so the file cannot mean something the command line could not say.
Read strictly: an unknown key, a wrong type or a bad file is one `error: --scenario FILE: ...` line.
Options given on the command line win over the file (`merge`); paths in the file are relative to it.

    gpus = 64
    cluster = "a100-ib100"
    compute_ms = 180.0
    topologies = ["base-2", "one-peer-exp"]
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from pathlib import Path

# Every key a scenario file may hold, the type of its value, and which a plot takes: the table of inputs.
from rtmodel_inputs.fields import (  # noqa: E402
    BOOL,
    BOUNDS,
    CHOICE_KEYS,
    FLOAT,
    INT,
    MEASURED_KEYS,
    NUMBER_TEXT,
    PATH_KEYS,
    PLOT_FROM_FILE_ONLY,
    PLOT_IGNORES,
    PLOT_KEYS,
    TEXT,
    TEXTS,
)
from rtmodel_inputs.fields import VALUE_TYPES as KEYS  # noqa: E402
from runtime_model.core.errors import InvalidCombination, InvalidValue, UserError

# Keys that were renamed so that each is its flag's name (--topologies), refused with the new name.
RENAMED = {"topology": "topologies"}

__all__ = ["KEYS", "MEASURED_KEYS", "PATH_KEYS", "PLOT_FROM_FILE_ONLY", "PLOT_IGNORES", "PLOT_KEYS", "read"]
FLAG = "--scenario"


class ScenarioFileError(UserError):
    """A scenario file that cannot be read as option values; the message names the flag and the file."""

    def __init__(self, path: str | os.PathLike, problem: str):
        super().__init__(f"{FLAG} {os.fspath(path)}: {problem}")


def _shown(value) -> str:
    """A value as the file spells it (JSON-like, shortened): "64", 64.5, ["a"], a table."""
    if isinstance(value, dict):
        return "a table"
    import json  # here: only a refusal shows a value

    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _parse(path: Path) -> dict:
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ScenarioFileError(path, f"must end in .toml or .json, got '{path.suffix or 'no extension'}'")
    if path.is_dir():
        raise ScenarioFileError(path, "is a directory, not a file")
    if path.exists() and not path.is_file():  # a FIFO or device: reading it would block or never end
        raise ScenarioFileError(path, "is not a regular file")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ScenarioFileError(path, (exc.strerror or str(exc)).lower()) from None
    except UnicodeDecodeError:
        raise ScenarioFileError(path, "is not UTF-8 text") from None
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioFileError(path, f"not valid TOML: {' '.join(str(exc).split())}") from None
        except RecursionError:
            raise ScenarioFileError(path, "is nested too deeply to be a scenario file") from None
        except ValueError as exc:  # an integer too long to convert
            raise ScenarioFileError(
                path, f"holds a value TOML cannot read: {' '.join(str(exc).split())[:120]}"
            ) from None
    from rtmodel_util.json_document import DocumentError, parse_document

    try:
        doc = parse_document(text)
    except DocumentError as exc:
        raise ScenarioFileError(path, str(exc).removeprefix("is ")) from None
    if not isinstance(doc, dict):
        raise ScenarioFileError(path, f"must hold a JSON object of option values, got {_shown(doc)}")
    return doc


def _checked(path: Path, key: str, value):
    """`value` as the option takes it (ints accepted for numbers), or ScenarioFileError naming `key`."""
    kind = KEYS[key]
    ok = {
        INT: isinstance(value, int) and not isinstance(value, bool),
        FLOAT: isinstance(value, int | float) and not isinstance(value, bool),
        TEXT: isinstance(value, str),
        BOOL: isinstance(value, bool),
        TEXTS: isinstance(value, list) and all(isinstance(v, str) for v in value),
        NUMBER_TEXT: isinstance(value, int | float | str) and not isinstance(value, bool),
    }[kind]
    if not ok:
        raise ScenarioFileError(path, f"'{key}' must be {kind}, got {_shown(value)}")
    if kind == FLOAT:
        value = _float(path, key, value)
    if kind in (INT, FLOAT) and key in BOUNDS:  # the flag's own range, checked as the flag's is
        try:
            BOUNDS[key].check(key, value)
        except InvalidValue as exc:
            raise ScenarioFileError(path, exc.message_for(lambda name: f"'{name}'")) from None
    if kind == FLOAT:
        return value
    if kind == NUMBER_TEXT:
        return str(value)  # the flag's text: 2 -> "2", 1.5 -> "1.5"
    if key in PATH_KEYS:  # relative to the file, so the file works from any working directory
        base = path.parent
        return [base / p for p in value] if kind == TEXTS else base / value
    if key in CHOICE_KEYS:
        from rtmodel_inputs import request

        choices = [c.value for c in getattr(request, CHOICE_KEYS[key])]
        if value not in choices:
            raise ScenarioFileError(path, f"'{key}' must be one of {', '.join(choices)}, got {_shown(value)}")
    return value


def _float(path: Path, key: str, value) -> float:
    """A number as a float: TOML and JSON read integers of hundreds of digits whole, beyond any float."""
    try:
        return float(value)
    except OverflowError:
        digits = len(str(abs(value)))
        raise ScenarioFileError(
            path, f"'{key}' must be a number within a float's range, got an integer of {digits} digits"
        ) from None


def read(path: str | os.PathLike) -> dict:
    """The option values a scenario file holds, keyed by option name (only the keys it has)."""
    path = Path(path)
    doc = _parse(path)
    for key in doc:
        if key in RENAMED:
            raise ScenarioFileError(path, f"'{key}' is now '{RENAMED[key]}' (the key is its flag's name)")
        if key not in KEYS:
            raise ScenarioFileError(path, f"unknown key '{key}' (expected one of: {', '.join(KEYS)})")
    return {key: _checked(path, key, value) for key, value in doc.items()}


def merge(given: dict, from_file: dict) -> tuple[dict, frozenset[str]]:
    """The command's options with the file's values filled in where the command line gave none (None);
    and the names whose value came from the file."""
    taken = frozenset(k for k, v in from_file.items() if k in given and given[k] is None)
    return {**given, **{k: from_file[k] for k in taken}}, taken


@contextlib.contextmanager
def blamed(path: str | os.PathLike | None, taken: frozenset[str]):
    """Errors about an input whose value came from the file name the file and its key, not a flag the
    user did not type: "--scenario team.toml: 'mfu' must be in [0.01, 1], got 5.0"."""
    try:
        yield
    except (InvalidValue, InvalidCombination) as exc:
        names = {exc.name} if isinstance(exc, InvalidValue) else set(exc.values)
        if path is None or not names & taken:
            raise
        from rtmodel_cli.failing import flag_of

        message = exc.message_for(lambda name: f"'{name}'" if name in taken else flag_of(name))
        raise ScenarioFileError(path, message) from exc

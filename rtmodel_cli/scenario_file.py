"""`--scenario FILE`: every input of `rtmodel advise` in one TOML or JSON file, kept in a team's repo.

Why a file of option values and nothing more: the keys are the options' names with underscores and
their values are what the flags take, so the file cannot mean something the command line could not say.
Read strictly: an unknown key, a wrong type or a bad file is one `error: --scenario FILE: ...` line.
Options given on the command line win over the file (`merge`); paths in the file are relative to it.

    gpus = 64
    cluster = "a100-ib100"
    compute_ms = 180.0
    topology = ["base-2", "one-peer-exp"]
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from pathlib import Path

from runtime_model.core.errors import InvalidCombination, InvalidValue, UserError

INT, FLOAT, TEXT, TEXTS, BOOL = "an integer", "a number", "a string", "a list of strings", "true or false"
NUMBER_TEXT = 'a number or a string (such as "1.5:4")'
# Every key a scenario file may hold and the type of its value (the option's type).
KEYS = {
    "gpus": INT,
    "gpus_per_node": INT,
    "gpu": TEXT,
    "network": TEXT,
    "intra": TEXT,
    "model": TEXT,
    "params": FLOAT,  # your own model instead of a preset: parameters (with compute_ms)
    "param_mb": FLOAT,  # or its gradient message in MiB
    "global_batch": FLOAT,
    "precision": TEXT,
    "mfu": FLOAT,
    "compute_cv": FLOAT,
    "straggler": NUMBER_TEXT,  # FACTOR[:COUNT], as --straggler takes it: 1.5 or "1.3:8"
    "rank_cv": FLOAT,
    "node_cv": FLOAT,
    "bucket_cap_mb": FLOAT,
    "ddp_bucket_view": BOOL,  # DDP(gradient_as_bucket_view=True): no bucket copies
    "cluster": TEXT,
    "compute_ms": FLOAT,
    "optimizer_ms": FLOAT,
    "dispatch_us": FLOAT,  # your host's profiler.opcount --dispatch figure, us per op
    "message_dtype": TEXT,
    "nics_per_node": INT,
    "nccl_algo": TEXT,
    "step_ms": FLOAT,  # your measured DDP iteration time (advise backs the compute out of it)
    "step_gpus": INT,  # where it was measured
    "batch_per_gpu": FLOAT,  # advise's weak scaling: global batch = it x gpus (a plot's own flag only)
    "margin": FLOAT,
    "objective": TEXT,  # iteration | accuracy
    "topology": TEXTS,
    "local_sgd_h": INT,  # local SGD's row (0: none), its overlap, fragments, wire bits and replica
    "local_sgd_overlap": INT,
    "local_sgd_fragments": INT,
    "local_sgd_bits": INT,
    "local_sgd_replica": TEXT,
    "presets": TEXTS,  # directories, relative to the file's directory
    "profile": TEXT,  # a path, relative to the file's directory
    "calibration": TEXT,  # a path, relative to the file's directory: `rtmodel calibrate --out`, for profile
    "nccl_tests": TEXT,  # a path, relative to the file's directory: nccl-tests output (the network)
    "trace": TEXTS,  # torch.profiler traces, one per rank, relative to the file's directory
    "traced_batch": FLOAT,  # the per-GPU batch the traces ran (to scale them to --batch-per-gpu)
}
# What a scenario file sets in a plot: the model's inputs. Not `gpus`, `margin`, `topology` or `objective`
# (the plot's own --gpus and --topology say what is drawn, per iteration, against the advisor's margin);
# `profile` and `calibration` are refused (plots sweep presets; `plot variance` and `plot crossover` take
# them on their command line only).
PLOT_IGNORES = ("gpus", "margin", "topology", "objective", "step_ms", "step_gpus", "batch_per_gpu") + tuple(
    k for k in KEYS if k.startswith("local_sgd")
)
MEASURED_KEYS = ("profile", "calibration", "trace", "traced_batch")  # a cluster's measured parameters: advise's file only
PLOT_KEYS = tuple(k for k in KEYS if k not in PLOT_IGNORES and k not in MEASURED_KEYS)
# The inputs no plot has a flag for: a plot takes them from its scenario file only.
PLOT_FROM_FILE_ONLY = ("precision", "mfu", "compute_cv")
PATH_KEYS = ("presets", "profile", "calibration", "nccl_tests", "trace")
CHOICE_KEYS = {"message_dtype": "MessageDtype", "nccl_algo": "NcclAlgo"}  # key -> its enum in options
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
        return float(value)
    if kind == NUMBER_TEXT:
        return str(value)  # the flag's text: 2 -> "2", 1.5 -> "1.5"
    if key in PATH_KEYS:  # relative to the file, so the file works from any working directory
        base = path.parent
        return [base / p for p in value] if kind == TEXTS else base / value
    if key in CHOICE_KEYS:
        from rtmodel_cli import options

        choices = [c.value for c in getattr(options, CHOICE_KEYS[key])]
        if value not in choices:
            raise ScenarioFileError(path, f"'{key}' must be one of {', '.join(choices)}, got {_shown(value)}")
    return value


def read(path: str | os.PathLike) -> dict:
    """The option values a scenario file holds, keyed by option name (only the keys it has)."""
    path = Path(path)
    doc = _parse(path)
    for key in doc:
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

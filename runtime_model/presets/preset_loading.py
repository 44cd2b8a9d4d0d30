"""Reading preset TOML files strictly into the typed presets: the built-ins, then a user's files over them.

Why strict: a preset file is data a user may write (`--presets DIR`); a misspelt key silently ignored
or a missing one found later as a KeyError would give a wrong prediction or a traceback. Every key is
checked against the dataclass that holds it (`preset_types`), and every error is a UserError that
names the file, the entry and the key: "gpus.toml [A100]: unknown key 'tflop' (expected: ...)".

Why layering by whole entries: a user's entry with a built-in's name replaces it whole, so a user's
numbers are never silently mixed with a built-in's; new names are added. defaults.toml is the
exception: it is one table of independent choices, replaced key by key.
"""

from __future__ import annotations

import stat
import tomllib
from collections.abc import Sequence
from dataclasses import MISSING, fields
from functools import cache
from pathlib import Path
from types import MappingProxyType

from runtime_model.core.constraints import Interval
from runtime_model.core.errors import InvalidValue, UserError
from runtime_model.presets import preset_data
from runtime_model.presets.own_model import PARAMS, PARAMS_ONLY_KEYS, PARAMS_WHY, params_only_preset
from runtime_model.presets.preset_types import (
    GPUS,
    INTEGER,
    INTEGER_LIST,
    INTER,
    INTRA,
    MODELS,
    NUMBER_TABLE,
    OPTIMIZERS,
    PASSES,
    TEXT,
    ClusterPreset,
    GpuPreset,
    LinkPreset,
    MemoryPass,
    ModelPreset,
    PresetDefaults,
    PresetLibrary,
)

CLUSTERS = "clusters"
# Library section -> (file, table inside the file or None for top level, entry type).
SECTIONS = {
    GPUS: ("gpus.toml", None, GpuPreset),
    INTER: ("networks.toml", "inter", LinkPreset),
    INTRA: ("networks.toml", "intra", LinkPreset),
    MODELS: ("models.toml", None, ModelPreset),
    CLUSTERS: ("clusters.toml", None, ClusterPreset),
    OPTIMIZERS: ("traffic.toml", "optimizer", MemoryPass),
    PASSES: ("traffic.toml", "pass", MemoryPass),
}
DEFAULTS_FILE = "defaults.toml"
FILES = ("gpus.toml", "networks.toml", "traffic.toml", "models.toml", "clusters.toml", DEFAULTS_FILE)
REF_WORDS = {
    GPUS: "GPU",
    INTER: "network",
    INTRA: "intra-node link",
    MODELS: "model",
    OPTIMIZERS: "optimizer",
}
FINITE = Interval()
MAX_PRESET_FILE_BYTES = (
    16 << 20
)  # the built-in files are a few kilobytes each; a preset file is not megabytes
# Said when a model entry lacks a key: an entry of PARAMS_ONLY_KEYS only is a model known by its count.
PARAMS_ONLY_HINT = (
    f"; or, for a model known only by its parameter count, give params (and optionally "
    f"{', '.join(PARAMS_ONLY_KEYS[1:])}) and --compute-ms, or use --params N --compute-ms MS"
)


class PresetFileError(UserError):
    """A preset file or directory that cannot be read as presets; the message names the path (and the
    entry and key where there is one)."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


def _toml_fields(cls) -> dict:
    return {f.name: f for f in fields(cls) if "toml" in f.metadata}


def _number(where: str, key: str, value, check: Interval | None):
    try:
        return (check or FINITE).check(key, value)
    except InvalidValue as exc:
        raise PresetFileError(where, str(exc)) from None


def _value(where: str, f, value):
    """One TOML value read and checked as field `f` declares."""
    kind, check = f.metadata["toml"], f.metadata["check"]
    if kind == TEXT:
        if not isinstance(value, str) or not value.strip():
            raise PresetFileError(where, f"{f.name} must be a non-empty string, got {value!r}")
        return value
    if kind == NUMBER_TABLE:
        if not isinstance(value, dict) or not value:
            raise PresetFileError(where, f"{f.name} must be a table of name = number, got {value!r}")
        return MappingProxyType(
            {k: float(_number(where, f"{f.name}.{k}", v, check)) for k, v in value.items()}
        )
    if kind == INTEGER_LIST:
        if not isinstance(value, list) or not value:
            raise PresetFileError(where, f"{f.name} must be a non-empty array of integers, got {value!r}")
        return tuple(int(_number(where, f"{f.name}[{i}]", v, check)) for i, v in enumerate(value))
    value = _number(where, f.name, value, check)
    return int(value) if kind == INTEGER else float(value)


def _values(cls, raw, where: str, *, partial: bool = False) -> dict:
    """The checked TOML values of one entry, by field name; every key known, each required one present
    unless `partial`."""
    if not isinstance(raw, dict):
        raise PresetFileError(where, f"must be a table of settings, got {raw!r}")
    specs = _toml_fields(cls)
    for key in raw:
        if key not in specs:
            raise PresetFileError(where, f"unknown key '{key}' (expected: {', '.join(specs)})")
    if not partial:
        hint = PARAMS_ONLY_HINT if cls is ModelPreset else ""
        for key, f in specs.items():
            if key not in raw and f.default is MISSING:
                raise PresetFileError(where, f"missing key '{key}' (expected: {', '.join(specs)}){hint}")
    return {key: _value(where, specs[key], v) for key, v in raw.items()}


def _entry(cls, raw, where: str, name: str):
    values = _values(cls, raw, where)
    try:
        return cls(name=name, **values)
    except UserError as exc:
        raise PresetFileError(where, str(exc)) from None


def _is_params_only(section: str, raw) -> bool:
    """A models.toml entry that gives its parameter count and nothing that needs measured counts."""
    return (
        section == MODELS and isinstance(raw, dict) and "params" in raw and set(raw) <= set(PARAMS_ONLY_KEYS)
    )


def _params_only_values(raw: dict, where: str) -> dict:
    values = _values(ModelPreset, raw, where, partial=True)
    if not PARAMS.contains(values["params"]):
        raise PresetFileError(
            where, f"params must be {PARAMS.describe()} {PARAMS_WHY}, got {values['params']!r}"
        )
    return values


def _parse(text: str, label: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PresetFileError(label, f"not valid TOML: {' '.join(str(exc).split())}") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise PresetFileError(label, "is nested too deeply to be a preset file") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise PresetFileError(
            label, f"holds a value TOML cannot read: {' '.join(str(exc).split())[:120]}"
        ) from None


class _Layers:
    """Entries and defaults accumulated file by file; remembers which file each came from."""

    def __init__(self):
        self.entries: dict[str, dict] = {section: {} for section in SECTIONS}
        self.origin: dict[tuple[str, str], str] = {}  # (section, name) -> "file [entry]"
        self.defaults: dict = {}
        self.defaults_origin: dict[str, str] = {}
        self.files: list[str] = []
        self.params_only: dict[str, dict] = {}  # model name -> its checked values, made in `library`

    def add_file(self, file_name: str, label: str, text: str, *, builtin: bool) -> None:
        data = _parse(text, label)
        self.files.append(label)
        if file_name == DEFAULTS_FILE:
            values = _values(PresetDefaults, data, label, partial=not builtin)
            self.defaults.update(values)
            self.defaults_origin.update(dict.fromkeys(values, label))
            return
        tables = {table: (section, cls) for section, (f, table, cls) in SECTIONS.items() if f == file_name}
        if None in tables:
            self._add_entries(data, label, *tables[None])
            return
        for table, entries in data.items():
            if table not in tables:
                raise PresetFileError(label, f"unknown table '{table}' (expected: {', '.join(tables)})")
            if not isinstance(entries, dict):
                raise PresetFileError(label, f"'{table}' must be a table of entries such as [{table}.NAME]")
            self._add_entries(entries, label, *tables[table], prefix=f"{table}.")

    def _add_entries(self, data: dict, label: str, section: str, cls, prefix: str = "") -> None:
        for name, raw in data.items():
            where = f"{label} [{prefix}{name}]"
            self.origin[(section, name)] = where
            if _is_params_only(section, raw):
                self.params_only[name] = _params_only_values(raw, where)
                self.entries[section].pop(name, None)
                continue
            self.params_only.pop(name, None)
            self.entries[section][name] = _entry(cls, raw, where, name)

    def make_params_only_models(self) -> None:
        """The params-only models, their optimizer and compute CV from the default model unless given
        (the built-in default model when the default is itself params-only)."""
        like = self.entries[MODELS].get(self.defaults["model"])
        if like is None and self.params_only:
            like = builtin_library().model(builtin_library().defaults.model)
        for name, values in self.params_only.items():
            self.entries[MODELS][name] = params_only_preset(name, like=like, **values)

    def check_references(self) -> None:
        """Every name a preset or default gives (a cluster's gpu, a GPU's default_intra) exists."""
        for section, table in self.entries.items():
            for name, entry in table.items():
                self._check_refs(entry, self.origin[(section, name)])
        for key, f in _toml_fields(PresetDefaults).items():
            self._check_ref(f, self.defaults[key], self.defaults_origin[key])

    def _check_refs(self, entry, where: str) -> None:
        for f in _toml_fields(type(entry)).values():
            self._check_ref(f, getattr(entry, f.name), where)

    def _check_ref(self, f, value, where: str) -> None:
        section = f.metadata["ref"]
        if section is None or value is None or value in self.entries[section]:
            return
        choices = ", ".join(sorted(self.entries[section]))
        word = REF_WORDS[section]
        raise PresetFileError(where, f"{f.name} names unknown {word} '{value}' (choose one of: {choices})")

    def library(self) -> PresetLibrary:
        self.make_params_only_models()
        self.check_references()
        frozen = {section: MappingProxyType(dict(table)) for section, table in self.entries.items()}
        return PresetLibrary(
            gpus=frozen[GPUS],
            inter_networks=frozen[INTER],
            intra_links=frozen[INTRA],
            models=frozen[MODELS],
            clusters=frozen[CLUSTERS],
            defaults=PresetDefaults(**self.defaults),
            optimizers=frozen[OPTIMIZERS],
            passes=frozen[PASSES],
            files=tuple(self.files),
        )


def _add_builtins(layers: _Layers) -> None:
    for file_name in FILES:
        layers.add_file(file_name, file_name, preset_data.read_text(file_name), builtin=True)


def _add_dir(layers: _Layers, directory: Path) -> None:
    if not directory.is_dir():
        raise PresetFileError(str(directory), "no such presets directory")
    paths = sorted(directory.glob("*.toml"))
    for path in paths:
        if path.name not in FILES:
            raise PresetFileError(
                str(path), f"unknown preset file name (expected some of: {', '.join(FILES)})"
            )
    if not paths:
        raise PresetFileError(str(directory), f"holds no preset files (expected some of: {', '.join(FILES)})")
    for file_name in FILES:  # a fixed order, so that references are checked the same way every time
        path = directory / file_name
        if not (path.exists() or path.is_symlink()):
            continue
        try:  # a FIFO, a directory or a symlink loop under a preset's name is said, never skipped
            if not stat.S_ISREG(path.stat().st_mode):
                raise PresetFileError(str(path), "is not a regular file (a directory, FIFO or device)")
            if path.stat().st_size > MAX_PRESET_FILE_BYTES:
                raise PresetFileError(
                    str(path),
                    f"{path.stat().st_size:,} bytes is not a preset file (at most {MAX_PRESET_FILE_BYTES:,})",
                )
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PresetFileError(
                str(path), f"cannot be read: {getattr(exc, 'strerror', None) or exc}"
            ) from None
        layers.add_file(file_name, str(path), text, builtin=False)


@cache
def builtin_library() -> PresetLibrary:
    """The presets shipped in runtime_model/presets/preset_data/ (read once per process)."""
    layers = _Layers()
    _add_builtins(layers)
    return layers.library()


def load_library(extra_dirs: Sequence[str | Path] | str | Path = ()) -> PresetLibrary:
    """The built-in presets with each of `extra_dirs` layered over them, in order (for `--presets DIR`).

    A directory holds any subset of gpus.toml, networks.toml, traffic.toml, models.toml, clusters.toml
    and defaults.toml, in the built-in files' format (see runtime_model/presets/preset_data/). An entry with a
    built-in's name ([A100], [inter.ib-100]) replaces that entry whole: give every required key, not
    just the ones that differ; a new name is added. defaults.toml may set any subset of its keys.
    Every file is checked as strictly as the built-ins, and references (a cluster's gpu, a GPU's
    default_intra) are checked across all layers. Raises PresetFileError (a UserError) naming the
    path for a missing directory, an unknown file name, malformed TOML, or a bad entry or key.
    """
    if isinstance(extra_dirs, str | Path):
        extra_dirs = [extra_dirs]
    if not extra_dirs:
        return builtin_library()
    layers = _Layers()
    _add_builtins(layers)
    for directory in extra_dirs:
        _add_dir(layers, Path(directory))
    return layers.library()

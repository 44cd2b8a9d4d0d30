"""`rtmodel presets`: the preset GPUs, networks, models and clusters, with their key figures.

Why a command: the names `--gpu`, `--network`, `--intra`, `--model` and `--cluster` take are otherwise
found only in the TOML files (runtime_model/presets/preset_data/). The tables show the figures the model uses;
`--format json` gives every field of every entry, sources included. `--presets DIR` shows
the library as `rtmodel advise --presets DIR` would see it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from enum import StrEnum
from typing import Annotated

import typer

from rtmodel_cli.options import PresetsOpt
from rtmodel_cli.output_format import Format, format_option
from runtime_model.core.document_header import schema_tag

SCHEMA = schema_tag("presets", 1)  # "rtmodel-presets/1" (every document's header: core.document_header)
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")  # the table's peak columns, in this order
MISSING = "-"  # a precision the GPU does not list


class Kind(StrEnum):
    gpus = "gpus"
    networks = "networks"
    models = "models"
    clusters = "clusters"


KindOpt = Annotated[Kind | None, typer.Option(help="Show only this kind (default: all four).")]
PresetFormatOpt = format_option(Format.table, Format.json)  # one way to ask for JSON: --format json


def register(app: typer.Typer) -> None:
    app.command("presets")(presets_command)


def presets_command(
    kind: KindOpt = None,
    format: PresetFormatOpt = Format.table,
    presets: PresetsOpt = None,
):
    """List the presets: GPUs, networks (inter- and intra-node), models and named clusters."""
    from runtime_model.presets.preset_loading import load_library

    library = load_library(presets or ())
    kinds = [kind] if kind is not None else list(Kind)
    if format == Format.json:
        sys.stdout.write(json.dumps(presets_document(library, kinds), indent=2) + "\n")
        return
    render_presets(library, kinds)


# ----------------------------------------------------------------------------- JSON


def _plain(value):
    """A preset field as JSON: mappings as dicts, tuples as lists."""
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def entry_dict(entry) -> dict:
    """Every field of a preset (its name is the key it is filed under); a model's gradient-ready list of
    parameter sizes is given by its length (`parameter_tensors`)."""
    out = {}
    for f in fields(entry):
        if f.name == "name":
            continue
        if f.name == "backward_numels":
            out["parameter_tensors"] = len(entry.backward_numels)
            continue
        out[f.name] = _plain(getattr(entry, f.name))
    return out


def _section(table) -> dict:
    return {name: entry_dict(table[name]) for name in sorted(table)}


def presets_document(library, kinds: list[Kind]) -> dict:
    """The `--format json` document: the schema, the files read, and one object per kind shown."""
    doc: dict = {"schema": SCHEMA, "files": list(library.files)}
    for kind in kinds:
        if kind is Kind.gpus:
            doc["gpus"] = _section(library.gpus)
        elif kind is Kind.networks:
            doc["networks"] = {
                "inter": _section(library.inter_networks),
                "intra": _section(library.intra_links),
            }
        elif kind is Kind.models:
            doc["models"] = _section(library.models)
        else:
            doc["clusters"] = _section(library.clusters)
    doc["defaults"] = _plain({f.name: getattr(library.defaults, f.name) for f in fields(library.defaults)})
    return doc


# ----------------------------------------------------------------------------- tables


def _num(value: float) -> str:
    return f"{value:,g}" if value < 1e6 else f"{value:,.0f}"


def _rows(entries, row) -> list[list[str]]:
    """One table row per preset, by name: `row(name, preset)` gives its cells."""
    return [row(name, entries[name]) for name in sorted(entries)]


def gpu_rows(library) -> tuple[list[str], list[list[str]]]:
    headers = ["GPU", *PRECISIONS, "GiB", "GB/s", "default", "mfu", "intra"]

    def row(name, g) -> list[str]:
        extra = [p for p in g.tflops if p not in PRECISIONS]
        return [
            name + (f" (+{', '.join(extra)})" if extra else ""),
            *(_num(g.tflops[p]) if p in g.tflops else MISSING for p in PRECISIONS),
            _num(g.memory_GiB),
            _num(g.memory_bandwidth_GBps),
            g.default_precision,
            ", ".join(f"{p} {v:g}" for p, v in g.mfu.items()),
            library.default_intra(name),
        ]

    return headers, _rows(library.gpus, row)


def link_rows(table) -> tuple[list[str], list[list[str]]]:
    headers = ["link", "Gbit/s", "efficiency", "achievable GB/s", "latency µs", "description"]

    def row(name, link) -> list[str]:
        achievable = f"{link.achievable_Gbps / 8:,.1f}"
        return [
            name,
            _num(link.bandwidth_Gbps),
            f"{link.efficiency:g}",
            achievable,
            _num(link.latency_us),
            link.description,
        ]

    return headers, _rows(table, row)


def model_rows(library) -> tuple[list[str], list[list[str]]]:
    headers = ["model", "params", "unit", "default batch", "GFLOP/unit", "description"]

    def row(name, m) -> list[str]:
        batch = m.default_global_batch
        batch_text = f"{int(batch):,}" if batch == int(batch) else f"{batch:,g}"
        flops_text = f"{m.train_flops_per_unit / 1e9:,.3g}"
        if m.params_only:  # known by its size only: its compute is yours (--compute-ms), not counted
            batch_text = flops_text = MISSING
        return [name, f"{m.params / 1e6:,.1f} M", m.unit, batch_text, flops_text, m.description]

    return headers, _rows(library.models, row)


def cluster_rows(library) -> tuple[list[str], list[list[str]]]:
    headers = ["cluster", "node", "intra", "network", "NICs", "precision"]

    def row(name, c) -> list[str]:
        precision = c.precision or f"{library.gpus[c.gpu].default_precision} (GPU's)"
        return [name, f"{c.gpus_per_node} x {c.gpu}", c.intra, c.network, str(c.nics_per_node), precision]

    return headers, _rows(library.clusters, row)


# Per table's columns: priority (0 always shown, higher dropped first), whether cells wrap, whether
# they are right-aligned numbers.
GPU_COLUMNS = (
    [0, 1, 2, 1, 2, 1, 1, 3, 4, 3],
    [False] * 8 + [True, False],
    [False] + [True] * 6 + [False] * 3,
)
LINK_COLUMNS = ([0, 1, 1, 1, 1, 2], [False] * 5 + [True], [False] + [True] * 4 + [False])
MODEL_COLUMNS = ([0, 1, 2, 1, 2, 3], [False] * 5 + [True], [False, True, False, True, True, False])
CLUSTER_COLUMNS = ([0, 0, 1, 1, 2, 3], [False] * 5 + [True], [False, False, False, False, True, False])


def _tables(library, kinds: list[Kind]):
    """Per table: its title, (headers, rows), and its columns' spec (*_COLUMNS)."""
    for kind in kinds:
        if kind is Kind.gpus:
            title = "GPUs (--gpu): dense peak TFLOP/s per precision (- = none), memory GiB and GB/s"
            yield title, gpu_rows(library), GPU_COLUMNS
        elif kind is Kind.networks:
            title = "Inter-node networks (--network): line rate per NIC, per direction"
            yield title, link_rows(library.inter_networks), LINK_COLUMNS
            title = "Intra-node links (--intra): line rate per GPU, per direction"
            yield title, link_rows(library.intra_links), LINK_COLUMNS
        elif kind is Kind.models:
            title = "Models (--model): default global batch in units; forward + backward GFLOP per unit"
            yield title, model_rows(library), MODEL_COLUMNS
        else:
            yield (
                "Clusters (--cluster): GPUs and inter-node NICs per node",
                cluster_rows(library),
                CLUSTER_COLUMNS,
            )


def render_presets(library, kinds: list[Kind], console=None) -> None:
    from rtmodel_cli.fitted_tables import fitted_table, print_dropped
    from rtmodel_cli.shown_console import terminal_console
    from runtime_model.presets.preset_loading import FILES

    console = console or terminal_console()
    dropped_any: list[str] = []
    for title, (headers, rows), (priorities, wrap, right) in _tables(library, kinds):
        table, dropped = fitted_table(console, title, headers, rows, priorities, wrap, right)
        console.print(table)
        dropped_any += [d for d in dropped if d not in dropped_any]
    print_dropped(console, dropped_any, "--format json")
    d = library.defaults
    _dim(
        console,
        f"defaults: --gpu {d.gpu} --network {d.network} --intra {library.default_intra(d.gpu)} (the GPU's; "
        f"{d.intra} for a GPU that names none) --model {d.model} "
        f"--gpus-per-node {d.gpus_per_node}: {d.machine}",
    )
    yours = library.files[len(FILES) :]
    where = "built-in" + (f", then {', '.join(yours)}" if yours else "")
    _dim(
        console,
        f"presets: {where}; every figure's source: --format json or runtime_model/presets/preset_data/*.toml",
    )


def _dim(console, text: str) -> None:
    console.print(text, style="dim", markup=False, highlight=False)

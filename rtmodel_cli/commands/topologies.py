"""`rtmodel topologies`: the gossip schedules for one cluster shape, with rounds and consensus."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from rtmodel_cli.gpu_counts import GpusOpt
from rtmodel_cli.options import GpusPerNodeOpt
from rtmodel_cli.output_format import Format, FormatOpt
from runtime_model.core.defaults import DEFAULT_GPUS  # advise's n: one default


def register(app: typer.Typer) -> None:
    app.command("topologies")(topologies)


def topologies(
    gpus: GpusOpt = DEFAULT_GPUS,
    gpus_per_node: GpusPerNodeOpt = None,
    show_rounds: Annotated[bool, typer.Option(help="Print every round's groups (small n only).")] = False,
    format: FormatOpt = Format.table,
):
    """List the gossip schedules: rounds, degree, consensus, and whether they fit the shape."""
    from runtime_model.advice.report import topology_rows, topology_rows_csv, topology_rows_json
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.presets.preset_choice import default_gpus_per_node

    k = default_gpus_per_node(gpus) if gpus_per_node is None else gpus_per_node
    shape = ClusterShape(gpus, k)
    rows = topology_rows(shape, with_rounds=show_rounds and gpus <= 64)
    if format == Format.json:
        sys.stdout.write(topology_rows_json(rows, shape) + "\n")
    elif format == Format.csv:
        sys.stdout.write(topology_rows_csv(rows))
    else:
        from rtmodel_cli.tables import render_topologies

        render_topologies(rows, shape, show_rounds)

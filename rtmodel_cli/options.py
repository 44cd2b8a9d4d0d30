"""Option definitions shared by the commands (one help text per option, one default per value).

Defaults that are facts about the model live beside the model (`runtime_model.defaults`); this
module only says how they appear on the command line.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from runtime_model import defaults


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FormatOpt = Annotated[Format, typer.Option("--format", help=" | ".join(Format))]
GpusPerNodeOpt = Annotated[
    int | None, typer.Option(help="GPUs per node k (default: the cluster's, else 8; capped at n).")
]
GpuOpt = Annotated[str | None, typer.Option(help="GPU preset (T4, A40, A100, H100, H200).")]
NetworkOpt = Annotated[
    str | None, typer.Option(help="Inter-node network preset (eth-25g, ib-100, ib-400, ...).")
]
IntraOpt = Annotated[str | None, typer.Option(help="Intra-node link preset (pcie3, nvlink3, ...).")]
ModelOpt = Annotated[
    str | None, typer.Option(help="Model preset (transformer-base, resnet50, ...; default transformer-base).")
]
ClusterOpt = Annotated[str | None, typer.Option(help="Named cluster preset (t4-ib100, a100-ib100, ...).")]
GlobalBatchOpt = Annotated[
    float | None,
    typer.Option(
        help="Global batch in the model's unit (tokens, images; default: the model's); at least one per GPU."
    ),
]
BucketMibOpt = Annotated[
    float | None,
    typer.Option(
        "--bucket-cap-mb",
        "--bucket-mb",
        help=f"Gradient bucket cap in MiB (DDP's and Decent-DP's default is {defaults.BUCKET_CAP_MIB:g}).",
    ),
]
TopologiesOpt = Annotated[
    list[str] | None, typer.Option("--topology", help="Only these topologies (repeatable).")
]
ProfileOpt = Annotated[
    Path | None, typer.Option(help="Profile from `rtmodel profile`: use measured parameters.")
]
MarginOpt = Annotated[float, typer.Option(help="Relative margin under which a win is 'too close to call'.")]
PresetsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--presets",
        help="Directory of your own preset TOML files (gpus, networks, models, clusters, defaults) "
        "layered over the built-ins; repeatable, later wins.",
    ),
]

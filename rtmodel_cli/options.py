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
from runtime_model.constraints import NON_NEGATIVE, POSITIVE


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
MarginOpt = Annotated[
    float | None,
    typer.Option(
        help="Relative margin under which a win is 'too close to call' (default: the measured error of the "
        "inputs' source: presets vs the paper's GPU runs, or profiles vs the emulated-cluster runs)."
    ),
]
PresetsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--presets",
        help="Directory of your own preset TOML files (gpus, networks, models, clusters, defaults) "
        "layered over the built-ins; repeatable, later wins.",
    ),
]


class MessageDtype(StrEnum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


# Your own measurements, checked here so that a bad value names its flag before the model sees it.
COMPUTE_MS = POSITIVE
OPTIMIZER_MS = NON_NEGATIVE
ComputeMsOpt = Annotated[
    float | None,
    typer.Option(
        help="Your measured forward+backward time per iteration in ms at this per-GPU batch (from your "
        f"training logs), {COMPUTE_MS.describe()}; replaces the estimate from the GPU and model presets."
    ),
]
OptimizerMsOpt = Annotated[
    float | None,
    typer.Option(
        help="Your measured optimizer step time per iteration in ms, "
        f"{OPTIMIZER_MS.describe()}; replaces the estimate from the presets."
    ),
]
MessageDtypeOpt = Annotated[
    MessageDtype | None,
    typer.Option(
        help="Data type of the communicated gradients/parameters: fp32 (default), or bf16/fp16 "
        "(bf16/fp16 parameters or a compression hook: half the bytes)."
    ),
]
ScenarioOpt = Annotated[
    Path | None,
    typer.Option(
        help="A .toml or .json file of this command's options (keys = option names with underscores; "
        "paths relative to the file); options given on the command line win over it."
    ),
]


def own_numbers(compute_ms: float | None, optimizer_ms: float | None, message_dtype: str | None) -> dict:
    """The keyword arguments of `presets.resolve` for the user's own numbers: checked, and only those
    given (so a model without them still answers when none is)."""
    kw = {}
    if compute_ms is not None:
        kw["compute_ms"] = COMPUTE_MS.check("compute_ms", compute_ms)
    if optimizer_ms is not None:
        kw["optimizer_ms"] = OPTIMIZER_MS.check("optimizer_ms", optimizer_ms)
    if message_dtype is not None:
        kw["message_dtype"] = str(MessageDtype(message_dtype))
    return kw

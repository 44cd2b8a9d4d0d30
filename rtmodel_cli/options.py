"""Option definitions shared by the commands (one help text per option, one default per value).

Defaults that are facts about the model live beside the model (`runtime_model.core.defaults`); this
module only says how they appear on the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rtmodel_inputs.request import MessageDtype, NcclAlgo
from runtime_model.core import defaults
from runtime_model.core.constraints import (
    COMPUTE_CV,
    COMPUTE_MS,
    DISPATCH_US,
    MFU,
    OPTIMIZER_MS,
    PADDING_EFFICIENCY,
)
from runtime_model.presets.preset_loading import builtin_library

GpusPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        help=f"GPUs per node k (not given: the cluster's, else {builtin_library().defaults.gpus_per_node}, "
        "capped at n; calibrate: the profile's)."
    ),
]


def preset_name_option(help_text: str):
    """An option naming a preset (or precision), not given = None: the form every such flag shares."""
    return Annotated[str | None, typer.Option(help=help_text)]


GpuOpt = preset_name_option("GPU preset (T4, V100, A100, H100, ...; `rtmodel presets` lists them).")
NetworkOpt = preset_name_option(
    "Inter-node network preset (tcp-25g, ib-100, ib-400, ...; `rtmodel presets`)."
)
IntraOpt = preset_name_option("Intra-node link preset (pcie3, nvlink3, ...; `rtmodel presets`).")
ModelOpt = preset_name_option("Model preset (transformer-base, resnet50, ...; default transformer-base).")
# Your own model instead of a preset (runtime_model.presets.own_model): its size, and --compute-ms for its compute.
ParamsOpt = Annotated[
    float | None,
    typer.Option(
        metavar="N",
        help="Your own model instead of a --model preset: its trainable parameters (e.g. 1.3e9), an "
        "integer in [1, 1e11]; needs --compute-ms. Messages are N x --message-dtype's bytes.",
    ),
]
ParamMbOpt = Annotated[
    float | None,
    typer.Option(
        metavar="MB",
        help="Your own model by its gradient message in MiB (> 0) instead of --params; needs --compute-ms.",
    ),
]
ClusterOpt = preset_name_option(
    "Named cluster preset (t4-ib100, dgx1-v100, dgx-h100, ...; `rtmodel presets`)."
)
PrecisionOpt = preset_name_option("fp32, tf32, fp16 or bf16, as the GPU has them (default: the GPU's).")
MfuOpt = Annotated[
    float | None,
    typer.Option(
        help=f"Model-FLOPs utilisation assumed for compute time, {MFU.describe()} (default: the GPU's)."
    ),
]
PaddingEfficiencyOpt = Annotated[
    float | None,
    typer.Option(
        help=(
            "Share of a batch's token slots that hold real tokens, "
            f"{PADDING_EFFICIENCY.describe()} (default 1: no padding); the GPU computes on every slot. "
            "`python -m profiler.padding` measures it on your corpus."
        )
    ),
]
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
# One name, one meaning (issue "The house"): --topology is one topology, --topologies several.
TopologyOpt = Annotated[
    str | None,
    typer.Option(
        "--topology",
        metavar="NAME",
        help="One topology (`rtmodel topologies` lists them). validate: the one Decent-DP runs; plot factors "
        "and what-if: the one drawn (default: the fastest Decent-DP runs at each n, what advise picks from).",
    ),
]
TopologiesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--topologies",
        metavar="NAME[,NAME...]",
        help="Only these topologies: a comma list, or the flag repeated (default: all).",
    ),
]


def split_names(values: list[str] | None) -> list[str] | None:
    """A plural flag's names, repeated or comma-separated (`--topologies ring,base-2`), in order, once each;
    None when not given."""
    if values is None:
        return None
    out = [name.strip() for value in values for name in value.split(",")]
    return list(dict.fromkeys(out))
ProfileOpt = Annotated[
    Path | None,
    typer.Option(help="Profile from `rtmodel profile`: use measured parameters (calibrated as it is read)."),
]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option(
        help="Calibration file from `rtmodel calibrate PROFILE --out FILE`, in place of --profile: the same "
        "measured parameters, fitted once (its links as calibrate chose them)."
    ),
]
TraceOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--trace",
        help="Your DDP training's torch.profiler trace (.json or .json.gz, or a directory of them; repeat it, one "
        "file per rank): its compute, buckets and all-reduce replace the presets' (docs/trace.md; needs the "
        "[trace] extra).",
    ),
]
TracedBatchOpt = Annotated[
    float | None,
    typer.Option(
        "--traced-batch",
        help="The per-GPU batch your --trace ran: with --batch-per-gpu, the traced compute is scaled from its "
        "own kernels to that batch.",
    ),
]
NcclTestsOpt = Annotated[
    Path | None,
    typer.Option(
        "--nccl-tests",
        help="Output of nccl-tests' all_reduce_perf (or sendrecv_perf) across 2+ of your nodes: it replaces "
        "the preset's inter-node link (fitted from 1 MiB up; the fit's quality is printed).",
    ),
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


NicsPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        help="Inter-node NICs per node, rail-optimised: local rank i sends through NIC i mod K "
        "(default: the cluster's, else 1; an integer >= 1)."
    ),
]
NcclAlgoOpt = Annotated[
    NcclAlgo | None,
    typer.Option(
        help="NCCL's all-reduce algorithm across nodes, as NCCL_ALGO fixes it: ring, tree, or auto "
        "(default: NCCL's choice, the cheaper of the two per message)."
    ),
]


# Your own measurements, checked here so that a bad value names its flag before the model sees it.
ComputeMsOpt = Annotated[
    float | None,
    typer.Option(
        help="Your measured forward+backward time per iteration in ms at this per-GPU batch (from your "
        f"training logs), {COMPUTE_MS.describe()}; replaces the estimate from the GPU and model presets."
    ),
]
GpuMemoryGibOpt = Annotated[
    float | None,
    typer.Option(
        metavar="GIB",
        help="One GPU's memory in GiB, in place of --gpu's preset or a trace's GPU; with a --profile it turns "
        "on the memory check (the GPU a profile ran on is not known).",
    ),
]
ActivationGibOpt = Annotated[
    float | None,
    typer.Option(
        metavar="GIB",
        help="Your activations per GPU in GiB (peak allocated less parameters, gradients and optimizer "
        "states, at your batch per GPU); replaces the model preset's measured figure.",
    ),
]
ActivationCheckpointingOpt = Annotated[
    bool | None,
    typer.Option(
        "--activation-checkpointing/--no-activation-checkpointing",
        help="You checkpoint activations: the model preset's checkpointed figure (profiler.memcount).",
    ),
]
OptimizerMsOpt = Annotated[
    float | None,
    typer.Option(
        help="Your measured optimizer step time per iteration in ms, "
        f"{OPTIMIZER_MS.describe()}; replaces the estimate from the presets."
    ),
]
DdpBucketViewOpt = Annotated[
    bool | None,
    typer.Option(
        "--ddp-bucket-view/--ddp-bucket-copy",
        help="How your DDP holds gradients: --ddp-bucket-view for DistributedDataParallel("
        "gradient_as_bucket_view=True) (one in-place divide per gradient), --ddp-bucket-copy for torch's "
        "default (each gradient copied into its bucket and back; the default here too).",
    ),
]
DispatchUsOpt = Annotated[
    float | None,
    typer.Option(
        metavar="US",
        help="Your host's dispatch cost per kernel-launching op in us: dispatch_us_per_op as `python -m "
        "profiler.opcount --model transformer-base --dispatch` prints it on that host, "
        f"{DISPATCH_US.describe()}; replaces the GPU preset's (a host-bound iteration is ops x this).",
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


# Compute variation, C_i(t) = mu x s_i x (1 + node term + iid term) (runtime_model/core/variation.py).
ComputeCvOpt = Annotated[
    float | None,
    typer.Option(
        help="The i.i.d. part of compute variation: coefficient of variation of each rank's per-iteration "
        f"compute, drawn afresh every iteration, {COMPUTE_CV.describe()} (0 = none; default: the model's)."
    ),
]
StragglerOpt = Annotated[
    str | None,
    typer.Option(
        metavar="FACTOR[:COUNT]",
        help="COUNT ranks (default 1; the first ranks, node 0 first) persistently FACTOR times slower than "
        "the rest, e.g. 1.5 or 1.3:8 for a whole 8-GPU node.",
    ),
]
RankCvOpt = Annotated[
    float | None,
    typer.Option(
        help="Persistent spread of speed across ranks, coefficient of variation in [0, 1] (default 0)."
    ),
]
NodeCvOpt = Annotated[
    float | None,
    typer.Option(help="Node-correlated variation per iteration, in [0, 1] (default 0)."),
]


PerGpuOpt = Annotated[
    float | None,
    typer.Option(
        help="Batch per GPU in the model's unit, at least 1 (weak scaling: the global batch is it x n); in place of --global-batch."
    ),
]

"""Presets (data files in preset_data/*.toml) turned into the model's data types.

Why data files: a preset is physical data (peak FLOP/s, line rates, parameter counts) plus one
stated efficiency figure; keeping them out of code makes every number reviewable and citable, and
lets a user add their own (`load_library(extra_dirs)`, the shell's `--presets DIR`). The files are
read strictly into typed presets (`preset_types`, `preset_loading`); this module turns a user's
choice of names and numbers into a Scenario. Every function takes the library to use (default: the
built-in one); pass the same library to `resolve` and to `scenario_from_choice`.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_model.constraints import AT_LEAST_ONE, COMPUTE_CV, MFU, POSITIVE, Interval
from runtime_model.defaults import BUCKET_CAP_MIB, DDP_FIRST_BUCKET_MIB, MIB
from runtime_model.distributions import NormalCompute
from runtime_model.errors import InvalidValue
from runtime_model.preset_loading import PresetFileError, builtin_library, load_library
from runtime_model.preset_types import LinkPreset, PresetLibrary, UnknownPreset
from runtime_model.scenario import (
    Bucket,
    BucketLayout,
    ClusterShape,
    Compute,
    Link,
    Network,
    Scenario,
    check_gpus,
)

__all__ = [
    "LinkPreset",
    "PresetChoice",
    "PresetFileError",
    "PresetLibrary",
    "UnknownPreset",
    "bucket_layout",
    "builtin_library",
    "compute_from_preset",
    "link_from_preset",
    "link_names",
    "load_library",
    "names",
    "network_preset",
    "resolve",
    "scenario_from_choice",
]

BYTES_PER_PARAM = 4  # gradients/parameters communicated in fp32, even under mixed precision
ADAM_BYTES_PER_PARAM = 28  # read p, g, m, v (16 B) + write p, m, v (12 B), fp32
# A bucket cap of a million MiB or more is a bytes-for-MiB mix-up, not a bucket.
BUCKET_CAP_MIB_RANGE = Interval(0.0, 1e6, closed="neither")


def link_from_preset(preset: LinkPreset) -> Link:
    return Link(
        latency_s=preset.latency_us * 1e-6,
        bandwidth_Bps=preset.bandwidth_Gbps * 1e9 / 8,
        source=f"preset {preset.name}",
    )


def network_preset(inter: str, intra: str, library: PresetLibrary | None = None) -> Network:
    """The Network of an inter-node network and an intra-node link, by preset name."""
    lib = library or builtin_library()
    inter_link = link_from_preset(lib.network(inter))
    intra_link = link_from_preset(lib.intra(intra))
    return Network(intra=intra_link, inter=inter_link, name=f"{intra}+{inter}")


def bucket_layout(
    total_params: int, tail_params: int, cap_mb: float, first_cap_mb: float | None
) -> tuple[Bucket, ...]:
    """Buckets in backward order from a parameter count (caps in MiB, as torch's bucket_cap_mb).

    Non-embedding gradients appear uniformly during backward; `tail_params` (input embeddings)
    appear at its very end. DDP closes a bucket when adding more would pass the cap (first bucket
    1 MiB); Decent-DP closes it once it reaches the cap (`first_cap_mb=None`).
    """
    POSITIVE.check("bucket_cap_mb", cap_mb)
    body = (total_params - tail_params) * BYTES_PER_PARAM
    tail = tail_params * BYTES_PER_PARAM
    cap = cap_mb * MIB
    buckets: list[Bucket] = []
    done = 0.0
    first = True
    while done < body - 0.5:
        size = min((first_cap_mb * MIB) if (first and first_cap_mb) else cap, body - done)
        done += size
        first = False
        buckets.append(Bucket(int(size), min(1.0, done / body)))
    while tail > 0.5:
        size = min(cap, tail)
        tail -= size
        buckets.append(Bucket(int(size), 1.0))
    return tuple(buckets)


@dataclass(frozen=True)
class PresetChoice:
    """What the user asked for, with defaults filled in (echoed in the output)."""

    gpus: int
    gpus_per_node: int
    gpu: str
    network: str
    intra: str
    model: str
    global_batch: float
    precision: str
    mfu: float
    compute_cv: float
    bucket_cap_mb: float


def resolve(
    gpus: int,
    gpus_per_node: int | None = None,
    gpu: str | None = None,
    network: str | None = None,
    intra: str | None = None,
    model: str | None = None,
    global_batch: float | None = None,
    precision: str | None = None,
    mfu: float | None = None,
    compute_cv: float | None = None,
    bucket_cap_mb: float | None = BUCKET_CAP_MIB,
    cluster: str | None = None,
    *,
    library: PresetLibrary | None = None,
) -> PresetChoice:
    """Fill defaults from a named cluster, the GPU or the library's defaults, and check every name
    and number. Only None means "not given": an empty name is looked up (and is unknown), a 0 is
    checked (and refused). Unknown names raise UnknownPreset; numbers outside their range raise
    InvalidValue named by these parameters' names (gpus, gpus_per_node, mfu, compute_cv, global_batch,
    bucket_cap_mb)."""
    lib = library or builtin_library()
    check_gpus("gpus", gpus)
    if gpus_per_node is not None:
        AT_LEAST_ONE.check("gpus_per_node", gpus_per_node)
    if cluster is not None:
        c = lib.cluster(cluster)
        gpu = c.gpu if gpu is None else gpu
        gpus_per_node = c.gpus_per_node if gpus_per_node is None else gpus_per_node
        intra = c.intra if intra is None else intra
        network = c.network if network is None else network
    gpu = lib.defaults.gpu if gpu is None else gpu
    g = lib.gpu(gpu)
    model = lib.defaults.model if model is None else model
    m = lib.model(model)
    precision = g.default_precision if precision is None else precision
    if precision not in g.tflops:
        raise UnknownPreset("precision", precision, list(g.tflops), "precision")
    network, intra = link_names(network, intra, gpu, lib)
    choice = PresetChoice(
        gpus=gpus,
        gpus_per_node=min(lib.defaults.gpus_per_node, gpus) if gpus_per_node is None else gpus_per_node,
        gpu=gpu,
        network=network,
        intra=intra,
        model=model,
        global_batch=float(global_batch if global_batch is not None else m.default_global_batch),
        precision=precision,
        mfu=float(mfu if mfu is not None else g.mfu),
        compute_cv=float(compute_cv if compute_cv is not None else m.compute_cv),
        bucket_cap_mb=BUCKET_CAP_MIB if bucket_cap_mb is None else bucket_cap_mb,
    )
    MFU.check("mfu", choice.mfu)
    COMPUTE_CV.check("compute_cv", choice.compute_cv)
    POSITIVE.check("global_batch", choice.global_batch)
    # A GPU with less than one unit (token, image) of a batch the user gave has nothing to train on. The
    # model's default batch is not held to this (advise --gpus 65536 with transformer-base's 25,000
    # tokens keeps answering, as it always has); give --global-batch for a meaningful large-n answer.
    if global_batch is not None and choice.global_batch < gpus:
        raise InvalidValue(
            "global_batch",
            f">= the number of GPUs ({gpus}): at least one {m.unit} per GPU",
            choice.global_batch,
        )
    BUCKET_CAP_MIB_RANGE.check("bucket_cap_mb", choice.bucket_cap_mb)
    return choice


def link_names(
    network: str | None, intra: str | None, gpu: str | None = None, library: PresetLibrary | None = None
) -> tuple[str, str]:
    """The (inter-node network, intra-node link) preset names: given ones checked, missing ones the
    library's defaults (the intra link of `gpu`'s usual node, else of the default GPU)."""
    lib = library or builtin_library()
    network = lib.defaults.network if network is None else network
    lib.network(network)
    intra = lib.default_intra(lib.defaults.gpu if gpu is None else gpu) if intra is None else intra
    lib.intra(intra)
    return network, intra


def compute_from_preset(choice: PresetChoice, library: PresetLibrary | None = None) -> Compute:
    """Forward:backward = 1:2 of FLOPs / (peak x MFU); Adam as a memory-bound pass over 28 B/param."""
    lib = library or builtin_library()
    g = lib.gpu(choice.gpu)
    m = lib.model(choice.model)
    units = choice.global_batch / choice.gpus
    seconds = units * m.train_flops_per_unit / (g.tflops[choice.precision] * 1e12 * choice.mfu)
    fwd, bwd = seconds / 3, 2 * seconds / 3
    opt = m.params * ADAM_BYTES_PER_PARAM / (g.memory_bandwidth_GBps * 1e9)
    src = f"preset {choice.model} on {choice.gpu} {choice.precision} at MFU {choice.mfu:g}"
    return Compute(
        forward_s=fwd,
        backward_s=bwd,
        optimizer_s=opt,
        distribution=NormalCompute(seconds, seconds * choice.compute_cv),
        source=src,
    )


def buckets_from_preset(choice: PresetChoice, library: PresetLibrary | None = None) -> BucketLayout:
    """DDP's and Decent-DP's buckets for the model at the chosen cap (DDP's first bucket 1 MiB)."""
    m = (library or builtin_library()).model(choice.model)
    return BucketLayout(
        ddp=bucket_layout(m.params, m.embedding_params, choice.bucket_cap_mb, DDP_FIRST_BUCKET_MIB),
        gossip=bucket_layout(m.params, m.embedding_params, choice.bucket_cap_mb, None),
    )


def scenario_from_choice(choice: PresetChoice, library: PresetLibrary | None = None) -> Scenario:
    """The Scenario of a resolved choice; `library` must be the one `resolve` used."""
    shape = ClusterShape(choice.gpus, choice.gpus_per_node)
    net = network_preset(choice.network, choice.intra, library)
    return Scenario(
        shape=shape,
        network=net,
        compute=compute_from_preset(choice, library),
        buckets=buckets_from_preset(choice, library),
        description=str(choice),
    )


def names(library: PresetLibrary | None = None) -> dict[str, list[str]]:
    """Valid preset names per model input (for help texts and error messages)."""
    return (library or builtin_library()).names()

"""A user's choice of preset names and numbers, with defaults filled in and every value checked
(`resolve`); `presets` turns a resolved choice into a Scenario.

Defaults come from a named cluster, then the GPU's and the model's presets, then the library's
defaults. Only None means "not given". Every check raises an error that names the parameter
(UnknownPreset, InvalidValue, InvalidCombination), so the shell can name its flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_model.core.constraints import (
    AT_LEAST_ONE,
    BUCKET_CAP_MIB_RANGE,
    COMPUTE_CV,
    COMPUTE_MS,
    DISPATCH_US,
    GLOBAL_BATCH,
    MFU,
    NICS_PER_NODE,
    OPTIMIZER_MS,
    PADDING_EFFICIENCY,
    WHOLE_BATCH,
)
from runtime_model.core.errors import InvalidCombination, InvalidValue
from runtime_model.core.scenario import NCCL_ALGORITHMS, check_gpus
from runtime_model.core.variation import STRAGGLER_FACTOR
from runtime_model.presets.own_model import NeedsComputeMs
from runtime_model.presets.preset_loading import builtin_library
from runtime_model.presets.preset_types import ModelPreset, PresetLibrary, UnknownPreset

# Bytes per communicated element. DDP all-reduces the gradients and Decent-DP the parameters in their
# own dtype: fp32 under autocast too (AMP keeps fp32 master parameters); bf16/fp16 parameters or a
# compression hook halve it.
MESSAGE_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# NCCL's own choice per call (cheaper of ring and tree) unless NCCL_ALGO fixes one (--nccl-algo).
DEFAULT_NCCL_ALGO = "auto"
# A bucket cap of a million MiB or more is a bytes-for-MiB mix-up, not a bucket.


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
    bucket_cap_mb: float | None  # None: DDP's and Decent-DP's defaults (25 MiB; DDP's first bucket 1 MiB)
    message_dtype: str = "fp32"
    compute_ms: float | None = None  # the user's measured forward + backward per iteration
    optimizer_ms: float | None = None  # the user's measured optimizer step per iteration
    straggler_factor: float = 1.0  # the first straggler_count ranks are this many times slower
    straggler_count: int = 0
    rank_cv: float = 0.0  # persistent spread of speed across ranks
    node_cv: float = 0.0  # node-correlated per-iteration variation
    nics_per_node: int = 1  # inter-node NICs per node, rail-optimised (local rank i -> NIC i mod nics)
    nccl_algo: str = DEFAULT_NCCL_ALGO  # auto (NCCL's choice), ring or tree
    dispatch_us: float | None = None  # your host's dispatch cost per op (opcount --dispatch); None: the GPU's
    ddp_bucket_view: bool = False  # DDP(gradient_as_bucket_view=True): gradients live in the buckets
    padding_efficiency: float = 1.0  # real tokens / padded slots of a batch: the device computes on the slots


@dataclass(frozen=True)
class PresetRequest:
    """What a user asks of the presets, as given: None means "not given" (`resolve` fills it in).
    `straggler` = (factor, count): the first `count` ranks run `factor` times slower."""

    gpus: int
    gpus_per_node: int | None = None
    gpu: str | None = None
    network: str | None = None
    intra: str | None = None
    model: str | None = None
    global_batch: float | None = None
    precision: str | None = None
    mfu: float | None = None
    compute_cv: float | None = None
    bucket_cap_mb: float | None = None
    cluster: str | None = None
    compute_ms: float | None = None
    optimizer_ms: float | None = None
    message_dtype: str | None = None
    straggler: tuple[float, int] | None = None
    rank_cv: float | None = None
    node_cv: float | None = None
    nics_per_node: int | None = None
    nccl_algo: str | None = None
    dispatch_us: float | None = None
    ddp_bucket_view: bool | None = None
    padding_efficiency: float | None = None


def resolve(request: PresetRequest, *, library: PresetLibrary | None = None) -> PresetChoice:
    """Fill defaults from a named cluster, the GPU or the library's defaults, and check every name
    and number. Only None means "not given": an empty name is looked up (and is unknown), a 0 is
    checked (and refused). Unknown names raise UnknownPreset; numbers outside their range raise
    InvalidValue named by the request's field names (gpus, gpus_per_node, mfu, compute_cv, global_batch,
    bucket_cap_mb, compute_ms, optimizer_ms, straggler_factor, straggler_count, rank_cv, node_cv,
    nics_per_node, nccl_algo, dispatch_us). `mfu`: the large-batch efficiency (default_mfu). A
    params-only model (own_model) needs compute_ms (NeedsComputeMs). `dispatch_us` (your host's opcount
    --dispatch figure) replaces the GPU preset's; refused with both compute_ms and optimizer_ms (nothing
    left to price). `ddp_bucket_view`: DDP(gradient_as_bucket_view=True), no bucket copies (default:
    torch's, False). `padding_efficiency`: the share of a batch's token slots that hold real tokens
    (default 1: no padding); the device's per-unit work and activations are priced on the slots."""
    lib, r = library or builtin_library(), request
    _check_counts(r.gpus, r.gpus_per_node, r.nics_per_node, r.nccl_algo)
    gpu, gpus_per_node, intra, network, precision, nics_per_node = (
        _from_cluster(lib.cluster(r.cluster), r) if r.cluster is not None else _given_links(r)
    )
    gpu = lib.defaults.gpu if gpu is None else gpu
    g = lib.gpu(gpu)
    model = lib.defaults.model if r.model is None else r.model
    m = lib.model(model)
    if m.params_only and r.compute_ms is None:
        raise NeedsComputeMs(model)
    precision = g.default_precision if precision is None else precision
    if precision not in g.tflops:  # a precision the GPU's datasheet does not list (T4: no TF32 or BF16)
        raise UnknownPreset("precision", precision, list(g.tflops), "precision")
    network, intra = link_names(network, intra, gpu, lib)
    choice = PresetChoice(
        gpus=r.gpus,
        gpus_per_node=default_gpus_per_node(r.gpus, lib) if gpus_per_node is None else gpus_per_node,
        gpu=gpu,
        network=network,
        intra=intra,
        model=model,
        global_batch=float(r.global_batch if r.global_batch is not None else m.default_global_batch),
        precision=precision,
        mfu=float(r.mfu if r.mfu is not None else default_mfu(gpu, model, precision, lib)),
        compute_cv=float(r.compute_cv if r.compute_cv is not None else m.compute_cv),
        bucket_cap_mb=r.bucket_cap_mb,
        message_dtype="fp32" if r.message_dtype is None else r.message_dtype,
        compute_ms=r.compute_ms,
        optimizer_ms=r.optimizer_ms,
        straggler_factor=1.0 if r.straggler is None else r.straggler[0],
        straggler_count=0 if r.straggler is None else r.straggler[1],
        rank_cv=0.0 if r.rank_cv is None else r.rank_cv,
        node_cv=0.0 if r.node_cv is None else r.node_cv,
        nics_per_node=1 if nics_per_node is None else nics_per_node,
        nccl_algo=DEFAULT_NCCL_ALGO if r.nccl_algo is None else r.nccl_algo,
        dispatch_us=r.dispatch_us,
        ddp_bucket_view=bool(r.ddp_bucket_view),
        padding_efficiency=1.0 if r.padding_efficiency is None else float(r.padding_efficiency),
    )
    _check_numbers(choice, m, r.global_batch, r.compute_ms, r.optimizer_ms)
    return choice


# What a named cluster fills in where the request leaves it out.
CLUSTER_FIELDS = ("gpu", "gpus_per_node", "intra", "network", "precision", "nics_per_node")


def _given_links(r: PresetRequest) -> tuple:
    """The request's own (gpu, gpus_per_node, intra, network, precision, nics_per_node), None where not given."""
    return tuple(getattr(r, n) for n in CLUSTER_FIELDS)


def _from_cluster(c, r: PresetRequest) -> tuple:
    """(gpu, gpus_per_node, intra, network, precision, nics_per_node): the given ones, else the cluster's."""
    return tuple(getattr(c, n) if getattr(r, n) is None else getattr(r, n) for n in CLUSTER_FIELDS)


def default_gpus_per_node(gpus: int, library: PresetLibrary | None = None) -> int:
    """GPUs per node when neither the user nor a named cluster says: the library's default, capped at n
    (8 GPUs on 8-GPU nodes are one node, 2 GPUs are not a 4-GPU node)."""
    return min((library or builtin_library()).defaults.gpus_per_node, gpus)


def default_mfu(gpu: str, model: str, precision: str, library: PresetLibrary) -> float:
    """The efficiency when none is given: the model's own measured on this GPU, else the GPU's figure."""
    from runtime_model.presets.efficiency import model_mfu

    own = model_mfu(gpu, model, precision, library)
    return own[0] if own is not None else library.gpu(gpu).mfu[precision]


def _check_counts(gpus: int, gpus_per_node: int | None, nics_per_node: int | None, nccl_algo: str | None):
    """The cluster's counts and the NCCL algorithm, checked before any preset is looked up."""
    check_gpus("gpus", gpus)
    if gpus_per_node is not None:
        AT_LEAST_ONE.check("gpus_per_node", gpus_per_node)
    if nics_per_node is not None:
        NICS_PER_NODE.check("nics_per_node", nics_per_node)
    if nccl_algo is not None and nccl_algo not in NCCL_ALGORITHMS:
        raise UnknownPreset("NCCL algorithm", nccl_algo, list(NCCL_ALGORITHMS), "nccl_algo")


def _check_numbers(
    choice: PresetChoice,
    m: ModelPreset,
    global_batch: float | None,
    compute_ms: float | None,
    optimizer_ms: float | None,
):
    """The numbers of a choice with its defaults filled in (and its message dtype); global_batch,
    compute_ms and optimizer_ms as the user gave them (None: not given); `m` is the chosen model."""
    gpus, model = choice.gpus, choice.model
    check_variation(choice.straggler_factor, choice.straggler_count, choice.rank_cv, choice.node_cv, gpus)
    if choice.message_dtype not in MESSAGE_DTYPE_BYTES:
        raise UnknownPreset("message dtype", choice.message_dtype, list(MESSAGE_DTYPE_BYTES), "message_dtype")
    check_measured_times(compute_ms, optimizer_ms, choice.dispatch_us)
    MFU.check("mfu", choice.mfu)
    PADDING_EFFICIENCY.check("padding_efficiency", choice.padding_efficiency)
    if compute_ms is not None and choice.padding_efficiency < 1:  # a measured compute ran on its own slots
        raise InvalidCombination(
            "{compute_ms} is measured on your batches as they were padded; {padding_efficiency} prices the "
            "presets' compute: give one",
            compute_ms=f"{compute_ms:g}",
            padding_efficiency=f"{choice.padding_efficiency:g}",
        )
    COMPUTE_CV.check("compute_cv", choice.compute_cv)
    GLOBAL_BATCH.check("global_batch", choice.global_batch)
    if global_batch is not None:
        WHOLE_BATCH.check("global_batch", global_batch)
    # A GPU with less than one unit (token, image) of the batch has nothing to train on: refused for a
    # batch the user gave and for the model's default alike (the default is the batch its source trained
    # at, not one for any n). A measured compute_ms does not lift it for a preset model, whose host work
    # and provenance still take the batch per GPU from the global batch; a params-only model has none.
    if global_batch is not None and choice.global_batch < gpus:
        raise InvalidValue(
            "global_batch",
            f">= the number of GPUs ({gpus}): at least one {m.unit} per GPU",
            choice.global_batch,
        )
    if global_batch is None and not m.params_only and choice.global_batch < gpus:
        raise InvalidCombination(
            f"{{gpus}} is more GPUs than {model}'s default global batch has {m.unit}s "
            f"({choice.global_batch:,.0f}, the batch its source trained at): give {{global_batch}} "
            f"you would train with, at least one {m.unit} per GPU",
            gpus=gpus,
            global_batch="N",
        )
    if choice.bucket_cap_mb is not None:
        BUCKET_CAP_MIB_RANGE.check("bucket_cap_mb", choice.bucket_cap_mb)


def check_measured_times(
    compute_ms: float | None, optimizer_ms: float | None, dispatch_us: float | None = None
):
    """The user's own measured numbers (None: not given), each in its range, and a host dispatch figure
    that something still prices: the one check of each, wherever it is used (a preset's compute, or a
    profile's replaced by compute_ms); InvalidValue names the input, the shell shows it as its flag."""
    if compute_ms is not None:
        COMPUTE_MS.check("compute_ms", compute_ms)
    if optimizer_ms is not None:
        OPTIMIZER_MS.check("optimizer_ms", optimizer_ms)
    check_dispatch(dispatch_us, compute_ms, optimizer_ms)


def check_dispatch(dispatch_us: float | None, compute_ms: float | None, optimizer_ms: float | None):
    """A host dispatch figure in range, and one that something still prices: with both measured times
    given, the host's ops price only estimates they replace, so it would be silently ignored."""
    if dispatch_us is None:
        return
    DISPATCH_US.check("dispatch_us", dispatch_us)
    if compute_ms is not None and optimizer_ms is not None:
        raise InvalidCombination(
            "{dispatch_us} would not be used: {compute_ms} and {optimizer_ms} give the compute itself "
            "(the host's dispatch prices only the estimates they replace); drop the host's figure",
            dispatch_us=dispatch_us,
            compute_ms=compute_ms,
            optimizer_ms=optimizer_ms,
        )


def check_variation(straggler_factor: float, straggler_count: int, rank_cv: float, node_cv: float, gpus: int):
    """The variation inputs as the model takes them: a straggler is slower (factor in [1, 100]), at
    least one and at most n ranks; the CVs in [0, 1]. InvalidValue names the input."""
    STRAGGLER_FACTOR.check("straggler_factor", straggler_factor)
    if straggler_factor != 1.0 or straggler_count:
        AT_LEAST_ONE.check("straggler_count", straggler_count)
        if straggler_count > gpus:
            raise InvalidValue("straggler_count", f"at most the number of GPUs ({gpus})", straggler_count)
    COMPUTE_CV.check("rank_cv", rank_cv)
    COMPUTE_CV.check("node_cv", node_cv)


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

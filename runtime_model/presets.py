"""Presets (data files in preset_data/*.toml) turned into the model's data types.

Why data files: a preset is physical data (peak FLOP/s, line rates, parameter counts) plus one
stated efficiency figure; keeping them out of code makes every number reviewable and citable, and
lets a user add their own (`load_library(extra_dirs)`, the shell's `--presets DIR`). The files are
read strictly into typed presets (`preset_types`, `preset_loading`); this module turns a user's
choice of names and numbers into a Scenario. Every function takes the library to use (default: the
built-in one); pass the same library to `resolve` and to `scenario_from_choice`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime_model.bucketing import preset_bucket_layout
from runtime_model.constraints import (
    AT_LEAST_ONE,
    COMPUTE_CV,
    COMPUTE_MS,
    GLOBAL_BATCH,
    MFU,
    OPTIMIZER_MS,
    Interval,
)
from runtime_model.defaults import BUCKET_CAP_MIB, DDP_FIRST_BUCKET_MIB
from runtime_model.distributions import NormalCompute
from runtime_model.errors import InvalidCombination, InvalidValue
from runtime_model.gpu_compute import IterationWork, Work, ddp_compute, decent_dp_compute
from runtime_model.own_model import NeedsComputeMs, piece_numels
from runtime_model.preset_loading import PresetFileError, builtin_library, load_library
from runtime_model.preset_types import AMP_PRECISIONS, LinkPreset, PresetLibrary, UnknownPreset
from runtime_model.scenario import (
    NCCL_ALGORITHMS,
    BucketLayout,
    ClusterShape,
    Compute,
    Link,
    Network,
    Scenario,
    check_gpus,
)
from runtime_model.variation import STRAGGLER_FACTOR, Variation

__all__ = [
    "LinkPreset",
    "PresetChoice",
    "PresetFileError",
    "PresetLibrary",
    "UnknownPreset",
    "builtin_library",
    "computes_from_preset",
    "iteration_work",
    "link_from_preset",
    "link_names",
    "load_library",
    "names",
    "network_preset",
    "resolve",
    "scenario_from_choice",
]

# Bytes per communicated element. DDP all-reduces the gradients and Decent-DP the parameters in their
# own dtype: fp32 under autocast too (AMP keeps fp32 master parameters); bf16/fp16 parameters or a
# compression hook halve it.
MESSAGE_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# NCCL's own choice per call (cheaper of ring and tree) unless NCCL_ALGO fixes one (--nccl-algo).
DEFAULT_NCCL_ALGO = "auto"
# A bucket cap of a million MiB or more is a bytes-for-MiB mix-up, not a bucket.
BUCKET_CAP_MIB_RANGE = Interval(0.0, 1e6, closed="neither")


def link_from_preset(preset: LinkPreset) -> Link:
    """A preset's achievable link: line rate x its published all-reduce efficiency."""
    return Link(
        latency_s=preset.latency_us * 1e-6,
        bandwidth_Bps=preset.achievable_Gbps * 1e9 / 8,
        source=f"preset {preset.name}",
    )


def network_preset(
    inter: str,
    intra: str,
    library: PresetLibrary | None = None,
    nics_per_node: int = 1,
    nccl_algo: str | None = DEFAULT_NCCL_ALGO,
) -> Network:
    """The Network of an inter-node network (one NIC of it) and an intra-node link, by preset name;
    GPU presets run NCCL, so its algorithms cost the collectives (`nccl_algo`, default: NCCL's choice)."""
    lib = library or builtin_library()
    inter_link = link_from_preset(lib.network(inter))
    intra_link = link_from_preset(lib.intra(intra))
    nics = f", {nics_per_node} NICs per node" if nics_per_node > 1 else ""
    return Network(
        intra=intra_link,
        inter=inter_link,
        name=f"{intra}+{inter}{nics}",
        nics_per_node=nics_per_node,
        nccl_algo=nccl_algo,
    )


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
    bucket_cap_mb: float | None = None,
    cluster: str | None = None,
    compute_ms: float | None = None,
    optimizer_ms: float | None = None,
    message_dtype: str | None = None,
    straggler: tuple[float, int] | None = None,
    rank_cv: float | None = None,
    node_cv: float | None = None,
    nics_per_node: int | None = None,
    nccl_algo: str | None = None,
    *,
    library: PresetLibrary | None = None,
) -> PresetChoice:
    """Fill defaults from a named cluster, the GPU or the library's defaults, and check every name
    and number. Only None means "not given": an empty name is looked up (and is unknown), a 0 is
    checked (and refused). Unknown names raise UnknownPreset; numbers outside their range raise
    InvalidValue named by these parameters' names (gpus, gpus_per_node, mfu, compute_cv, global_batch,
    bucket_cap_mb, compute_ms, optimizer_ms, straggler_factor, straggler_count, rank_cv, node_cv,
    nics_per_node, nccl_algo). `mfu`
    is the large-batch efficiency of the chosen precision (default: the GPU's figure for it).
    `straggler` = (factor, count): the first `count` ranks run `factor` times slower. A params-only
    model (own_model) needs compute_ms (NeedsComputeMs)."""
    lib = library or builtin_library()
    check_gpus("gpus", gpus)
    if gpus_per_node is not None:
        AT_LEAST_ONE.check("gpus_per_node", gpus_per_node)
    if nics_per_node is not None:
        AT_LEAST_ONE.check("nics_per_node", nics_per_node)
    if nccl_algo is not None and nccl_algo not in NCCL_ALGORITHMS:
        raise UnknownPreset("NCCL algorithm", nccl_algo, list(NCCL_ALGORITHMS), "nccl_algo")
    if cluster is not None:
        c = lib.cluster(cluster)
        gpu = c.gpu if gpu is None else gpu
        gpus_per_node = c.gpus_per_node if gpus_per_node is None else gpus_per_node
        intra = c.intra if intra is None else intra
        network = c.network if network is None else network
        precision = c.precision if precision is None else precision
        nics_per_node = c.nics_per_node if nics_per_node is None else nics_per_node
    gpu = lib.defaults.gpu if gpu is None else gpu
    g = lib.gpu(gpu)
    model = lib.defaults.model if model is None else model
    m = lib.model(model)
    if m.params_only and compute_ms is None:
        raise NeedsComputeMs(model)
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
        mfu=float(mfu if mfu is not None else g.mfu[precision]),
        compute_cv=float(compute_cv if compute_cv is not None else m.compute_cv),
        bucket_cap_mb=bucket_cap_mb,
        message_dtype="fp32" if message_dtype is None else message_dtype,
        compute_ms=compute_ms,
        optimizer_ms=optimizer_ms,
        straggler_factor=1.0 if straggler is None else straggler[0],
        straggler_count=0 if straggler is None else straggler[1],
        rank_cv=0.0 if rank_cv is None else rank_cv,
        node_cv=0.0 if node_cv is None else node_cv,
        nics_per_node=1 if nics_per_node is None else nics_per_node,
        nccl_algo=DEFAULT_NCCL_ALGO if nccl_algo is None else nccl_algo,
    )
    check_variation(choice.straggler_factor, choice.straggler_count, choice.rank_cv, choice.node_cv, gpus)
    if choice.message_dtype not in MESSAGE_DTYPE_BYTES:
        raise UnknownPreset("message dtype", choice.message_dtype, list(MESSAGE_DTYPE_BYTES), "message_dtype")
    if compute_ms is not None:
        COMPUTE_MS.check("compute_ms", compute_ms)
    if optimizer_ms is not None:
        OPTIMIZER_MS.check("optimizer_ms", optimizer_ms)
    MFU.check("mfu", choice.mfu)
    COMPUTE_CV.check("compute_cv", choice.compute_cv)
    GLOBAL_BATCH.check("global_batch", choice.global_batch)
    # A GPU with less than one unit (token, image) of the batch has nothing to train on: refused for a
    # batch the user gave and for the model's default alike (the default is the batch its source trained
    # at, not one for any n). A measured compute_ms is at the user's own batch, so no batch is implied.
    if global_batch is not None and choice.global_batch < gpus:
        raise InvalidValue(
            "global_batch",
            f">= the number of GPUs ({gpus}): at least one {m.unit} per GPU",
            choice.global_batch,
        )
    if global_batch is None and compute_ms is None and choice.global_batch < gpus:
        raise InvalidCombination(
            f"{{gpus}} is more GPUs than {model}'s default global batch has {m.unit}s "
            f"({choice.global_batch:,.0f}, the batch its source trained at): give {{global_batch}} "
            f"you would train with, at least one {m.unit} per GPU",
            gpus=gpus,
            global_batch="N",
        )
    if choice.bucket_cap_mb is not None:
        BUCKET_CAP_MIB_RANGE.check("bucket_cap_mb", choice.bucket_cap_mb)
    return choice


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


def variation_of(choice: PresetChoice) -> Variation:
    return Variation(choice.straggler_factor, choice.straggler_count, choice.rank_cv, choice.node_cv)


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


def iteration_work(choice: PresetChoice, library: PresetLibrary | None = None) -> IterationWork:
    """One GPU's host and device work per iteration from the GPU's and the model's presets.

    Device: matmul FLOPs at peak x large-batch efficiency (mfu), memory-bound kernels' bytes at
    bandwidth x streaming efficiency; host: kernel-launching ops x the host's dispatch cost. The
    optimizer, GradScaler, DDP's bucket copies and Decent-DP's mixing are passes over the parameters
    (traffic.toml). A params-only model's forward and backward are the measured compute_ms, split as
    its FLOPs (own_model), on the device."""
    lib = library or builtin_library()
    g, m = lib.gpu(choice.gpu), lib.model(choice.model)
    mode = "amp" if choice.precision in AMP_PRECISIONS else "full"
    units = choice.global_batch / choice.gpus
    flops_per_s = g.tflops[choice.precision] * 1e12 * choice.mfu
    stream_Bps = g.memory_bandwidth_GBps * 1e9 * g.memory_efficiency
    dispatch_s = g.dispatch_us * 1e-6
    backward_flops = m.train_flops_per_unit - m.forward_flops_per_unit

    def kernels(ops: float, flops: float, nbytes: float) -> Work:
        return Work(ops * dispatch_s, flops / flops_per_s + nbytes / stream_Bps)

    def passes(*names: str, calls: float = 1.0) -> Work:
        found = [lib.optimizers[n] if n in lib.optimizers else lib.memory_pass(n) for n in names]
        return Work(
            sum(p.host_ops for p in found) * calls * dispatch_s,
            sum(p.bytes_per_param for p in found) * m.params / stream_Bps,
        )

    forward = kernels(
        m.forward_ops[mode],
        m.forward_flops_per_unit * units,
        m.forward_bytes_per_unit[mode] * units + m.forward_fixed_bytes[mode],
    )
    backward = kernels(
        m.backward_ops[mode],
        backward_flops * units,
        m.backward_bytes_per_unit[mode] * units + m.backward_fixed_bytes[mode],
    )
    if m.params_only:
        measured_s, share = choice.compute_ms * 1e-3, forward_share(m)
        forward, backward = Work(0.0, measured_s * share), Work(0.0, measured_s * (1 - share))
    step = (m.optimizer, "grad-scaler-unscale") if mode == "amp" else (m.optimizer,)
    return IterationWork(
        forward=forward,
        backward=backward,
        optimizer=passes(*step),
        ddp_copies=passes("ddp-bucket-copy", calls=len(m.backward_numels)),
        mixing=passes("decent-dp-mixing"),
        amp=mode == "amp",
        step_syncs=m.optimizer == "accum-adam",
    )


def computes_from_preset(
    choice: PresetChoice, buckets: BucketLayout, library: PresetLibrary | None = None
) -> tuple[Compute, Compute]:
    """(DDP's compute, Decent-DP's compute) per iteration; the user's own measured times
    (compute_ms, optimizer_ms) replace the estimates where given, the same for both libraries."""
    work = iteration_work(choice, library)
    m = (library or builtin_library()).model(choice.model)
    prec = f"{choice.gpu} {choice.precision}"
    src = f"preset {choice.model} on {prec}: host {choice.model} ops x dispatch, device FLOPs at {choice.mfu:g} of peak + memory traffic"
    if m.params_only:
        src = f"{m.name} ({m.params:,} parameters) on {prec}: optimizer and mixing as memory traffic"
    variation = variation_of(choice)
    ddp = replace(ddp_compute(work, choice.compute_cv, src), variation=variation)
    gossip = replace(decent_dp_compute(work, buckets.gossip, choice.compute_cv, src), variation=variation)
    if choice.compute_ms is None and choice.optimizer_ms is None:
        return ddp, gossip
    share = forward_share(m) if m.params_only else None
    return _measured(ddp, choice, share), _measured(gossip, choice, share)


def forward_share(model) -> float:
    """The forward's share of forward + backward by the model's matmul FLOPs."""
    return model.forward_flops_per_unit / model.train_flops_per_unit


def _measured(compute: Compute, choice: PresetChoice, fwd_share: float | None = None) -> Compute:
    """`compute` with the user's measured forward+backward (split as estimated, or by `fwd_share`) and
    optimizer times."""
    seconds = compute.compute_s if choice.compute_ms is None else choice.compute_ms * 1e-3
    if fwd_share is None:
        fwd_share = compute.forward_s / compute.compute_s if compute.compute_s > 0 else 1 / 3
    optimizer_s = compute.optimizer_s if choice.optimizer_ms is None else choice.optimizer_ms * 1e-3
    given = [
        f"compute {choice.compute_ms:g} ms" if choice.compute_ms is not None else "",
        f"optimizer {choice.optimizer_ms:g} ms" if choice.optimizer_ms is not None else "",
    ]
    return replace(
        compute,
        forward_s=seconds * fwd_share,
        backward_s=seconds * (1 - fwd_share),
        optimizer_s=optimizer_s,
        distribution=NormalCompute(seconds, seconds * choice.compute_cv),
        source="your measured " + " and ".join(x for x in given if x) + f" ({compute.source} for the rest)",
    )


def buckets_from_preset(choice: PresetChoice, library: PresetLibrary | None = None) -> BucketLayout:
    """DDP's and Decent-DP's buckets of the model's parameter list, cut as the two libraries cut them:
    Decent-DP at the cap (25 MiB); DDP's first bucket 1 MiB when no cap is given (torch applies a
    given bucket_cap_mb to the first bucket too), the rest at the cap. A params-only model's list is
    equal pieces of the smallest cap (own_model.piece_numels)."""
    m = (library or builtin_library()).model(choice.model)
    cap = BUCKET_CAP_MIB if choice.bucket_cap_mb is None else choice.bucket_cap_mb
    first = DDP_FIRST_BUCKET_MIB if choice.bucket_cap_mb is None else choice.bucket_cap_mb
    element_bytes = MESSAGE_DTYPE_BYTES[choice.message_dtype]
    numels = list(m.backward_numels)
    if m.params_only:
        numels = piece_numels(m.params, element_bytes, cap, first)
    return preset_bucket_layout(numels, element_bytes, cap, first, m.embedding_params)


def scenario_from_choice(choice: PresetChoice, library: PresetLibrary | None = None) -> Scenario:
    """The Scenario of a resolved choice; `library` must be the one `resolve` used."""
    shape = ClusterShape(choice.gpus, choice.gpus_per_node)
    net = network_preset(choice.network, choice.intra, library, choice.nics_per_node, choice.nccl_algo)
    buckets = buckets_from_preset(choice, library)
    ddp, gossip = computes_from_preset(choice, buckets, library)
    return Scenario(
        shape=shape,
        network=net,
        compute=ddp,
        buckets=buckets,
        description=str(choice),
        gossip_compute=gossip,
    )


def names(library: PresetLibrary | None = None) -> dict[str, list[str]]:
    """Valid preset names per model input (for help texts and error messages)."""
    return (library or builtin_library()).names()

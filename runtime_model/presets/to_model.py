"""Presets (data files in preset_data/*.toml) turned into the model's data types.

Why data files: a preset is physical data (peak FLOP/s, line rates, parameter counts) plus one
stated efficiency figure; keeping them out of code makes every number reviewable and citable, and
lets a user add their own (`load_library(extra_dirs)`, the shell's `--presets DIR`). The files are
read strictly into typed presets (`preset_types`, `preset_loading`); this module turns a user's
choice of names and numbers (`resolve`, from `preset_choice`) into a Scenario. Every function takes the
library to use (default: the built-in one); pass the same library to `resolve` and to `scenario_from_choice`.
"""

from __future__ import annotations

import math
from dataclasses import replace

from runtime_model.core.defaults import BUCKET_CAP_MIB, DDP_FIRST_BUCKET_MIB
from runtime_model.core.distributions import NormalCompute
from runtime_model.core.scenario import BucketLayout, ClusterShape, Compute, Link, Network, Scenario
from runtime_model.core.variation import Variation
from runtime_model.prediction.bucketing import preset_bucket_layout
from runtime_model.prediction.gpu_compute import IterationWork, Work, ddp_compute, decent_dp_compute
from runtime_model.presets.own_model import piece_numels
from runtime_model.presets.preset_choice import (
    DEFAULT_NCCL_ALGO,
    MESSAGE_DTYPE_BYTES,
    PresetChoice,
    PresetRequest,
    link_names,
    resolve,
)
from runtime_model.presets.preset_loading import PresetFileError, builtin_library, load_library
from runtime_model.presets.preset_types import AMP_PRECISIONS, LinkPreset, PresetLibrary, UnknownPreset

__all__ = [
    "LinkPreset",
    "PresetChoice",
    "PresetFileError",
    "PresetLibrary",
    "PresetRequest",
    "UnknownPreset",
    "builtin_library",
    "computes_from_preset",
    "device_units_per_gpu",
    "host_gpu",
    "iteration_work",
    "link_from_preset",
    "link_names",
    "load_library",
    "names",
    "network_preset",
    "resolve",
    "scenario_from_choice",
]


def link_from_preset(preset: LinkPreset) -> Link:
    """A preset's achievable link: line rate x its published efficiency, its fabric, and one flow's cap
    where a source gives one (inf otherwise: a flow fills the link)."""
    cap = math.inf if preset.flow_cap_Gbps is None else preset.flow_cap_Gbps * 1e9 / 8
    return Link(
        latency_s=preset.latency_us * 1e-6,
        bandwidth_Bps=preset.achievable_Gbps * 1e9 / 8,
        source=f"preset {preset.name}",
        flow_cap_Bps=cap,
        fabric=preset.fabric or "",
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


def variation_of(choice: PresetChoice) -> Variation:
    return Variation(choice.straggler_factor, choice.straggler_count, choice.rank_cv, choice.node_cv)


def iteration_work(choice: PresetChoice, library: PresetLibrary | None = None) -> IterationWork:
    """One GPU's host and device work per iteration from the GPU's and the model's presets.

    Device: matmul FLOPs at peak x large-batch efficiency (mfu), memory-bound kernels' bytes at
    bandwidth x streaming efficiency; host: kernel-launching ops x (the host CPU's dispatch cost + the
    CUDA launch cost, gpus.toml), plus the per-tensor host work of the optimizer and GradScaler (their
    Python and foreach bookkeeping: traffic.toml host_dispatches_per_tensor x dispatch). The optimizer,
    GradScaler, DDP's bucket copies and Decent-DP's mixing are passes over the parameters
    (traffic.toml). A params-only model's forward and backward are the measured compute_ms, split as
    its FLOPs (own_model), on the device. The host's dispatch cost is the user's dispatch_us where given.
    Padded batches (padding_efficiency < 1): the kernels run on every slot, so the per-unit device work
    is the slots' (device_units_per_gpu); the host issues the same ops whatever their shapes."""
    lib = library or builtin_library()
    g, m = host_gpu(choice, lib), lib.model(choice.model)
    mode = "amp" if choice.precision in AMP_PRECISIONS else "full"
    units = device_units_per_gpu(choice)
    flops_per_s = g.tflops[choice.precision] * 1e12 * choice.mfu
    stream_Bps = g.memory_bandwidth_GBps * 1e9 * g.memory_efficiency
    op_s, dispatch_s = g.host_op_us * 1e-6, g.dispatch_us * 1e-6
    tensors = len(m.backward_numels)
    backward_flops = m.train_flops_per_unit - m.forward_flops_per_unit

    def kernels(ops: float, flops: float, nbytes: float) -> Work:
        return Work(ops * op_s, flops / flops_per_s + nbytes / stream_Bps)

    def passes(*names: str, calls: float = 1.0) -> Work:
        found = [lib.traffic(n) for n in names]
        return Work(
            sum(
                p.host_ops * calls * op_s + p.host_dispatches_per_tensor * tensors * dispatch_s for p in found
            ),
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
    step = lib.step_passes(choice.model, choice.precision)
    return IterationWork(
        forward=forward,
        backward=backward,
        optimizer=passes(*step),
        ddp_copies=passes("ddp-bucket-view" if choice.ddp_bucket_view else "ddp-bucket-copy", calls=tensors),
        mixing=passes("decent-dp-mixing"),
        amp=mode == "amp",
        step_syncs=m.optimizer == "accum-adam",
        step_call_host_s=sum(lib.traffic(n).host_ops for n in (*step, "decent-dp-mixing")) * op_s,
    )


def device_units_per_gpu(choice: PresetChoice) -> float:
    """The units (tokens, images) one GPU's kernels run on per iteration: its share of the global batch,
    padded slots included (padding_efficiency: the share of slots holding real units)."""
    return choice.global_batch / choice.gpus / choice.padding_efficiency


def ddp_iteration_parts(choice: PresetChoice, library: PresetLibrary | None = None) -> dict:
    """A DDP iteration of the preset compute by part (Work: host and device seconds each)."""
    w = iteration_work(choice, library)
    return {
        "forward": w.forward,
        "backward": w.backward,
        "DDP's bucket copies": w.ddp_copies,
        "step": w.optimizer,
    }


def host_and_device_ms(parts: dict) -> tuple[float, float]:
    """The host's issue time and the device's work over a DDP iteration's parts (ddp_iteration_parts), ms."""
    return sum(p.host_s for p in parts.values()) * 1e3, sum(p.device_s for p in parts.values()) * 1e3


def host_floor_line(choice: PresetChoice, library: PresetLibrary | None = None) -> str | None:
    """One line on what binds a DDP iteration of the preset compute: the host's issue time per part
    against the device's work (None where measured times replace the presets' compute)."""
    lib = library or builtin_library()
    if choice.compute_ms is not None or lib.model(choice.model).params_only:
        return None
    parts = ddp_iteration_parts(choice, lib)
    host_ms, device_ms = host_and_device_ms(parts)
    each = ", ".join(f"{name} {p.host_s * 1e3:.1f}" for name, p in parts.items())
    binds = (
        "host-bound: the GPU waits for Python"
        if host_ms > device_ms
        else "device-bound: the GPU is the limit"
    )
    return f"{host_ms:.1f} ms of host issue per DDP iteration ({each}) against {device_ms:.1f} ms of device work: {binds}"


def host_gpu(choice: PresetChoice, library: PresetLibrary | None = None):
    """The chosen GPU preset, with the user's host dispatch figure (dispatch_us) in place of its own:
    dispatch is a fact about the host's CPU and torch build, not the GPU, so a user measures their own."""
    g = (library or builtin_library()).gpu(choice.gpu)
    if choice.dispatch_us is None:
        return g
    return replace(g, dispatch_us=choice.dispatch_us, dispatch_source="yours: profiler.opcount --dispatch")


def computes_from_preset(
    choice: PresetChoice, buckets: BucketLayout, library: PresetLibrary | None = None
) -> tuple[Compute, Compute]:
    """(DDP's compute, Decent-DP's compute) per iteration; the user's own measured times
    (compute_ms, optimizer_ms) replace the estimates where given, the same for both libraries."""
    work = iteration_work(choice, library)
    m = (library or builtin_library()).model(choice.model)
    prec = f"{choice.gpu} {choice.precision}"
    view = ", DDP gradient_as_bucket_view" if choice.ddp_bucket_view else ""
    padded = ""
    if choice.padding_efficiency < 1:
        padded = f", on padded batches ({1 / choice.padding_efficiency:.2f}x slots per real unit)"
    src = (
        f"preset {choice.model} on {prec}: host {choice.model} ops x (dispatch + CUDA launch) and per-tensor "
        f"optimizer work, device FLOPs at {choice.mfu:g} of peak + memory traffic{view}{padded}"
    )
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

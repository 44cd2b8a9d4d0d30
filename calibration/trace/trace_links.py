"""The link a trace's own all-reduces measured: its buckets' (bytes, time) fitted as calibration fits a
profile's all-reduce pattern, inverted through the model's cost formula into the link class they ran on.

Why: the trace's NCCL kernels are this cluster's all-reduce, under the compute they overlapped; a preset
link only guesses it (HTA's 2-rank A100 trace ran its 102 MB in 17.4 ms per iteration where NVLink's
preset gives 0.5 ms). The trace's own group keeps its times bucket size by bucket size; other groups
get the link inverted from them (inside one node: the intra-node link; across nodes: the inter-node one,
the intra-node link from presets). Too few sizes, or times that do not grow with the size, leave the
preset link in place, and say so.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from calibration.fitting import fit_affine
from calibration.inversion import MeasuredLine, invert_line
from calibration.tabulated import tabulated_cost
from runtime_model.core.scenario import Bucket, ClusterShape, Link, Network
from runtime_model.prediction.collectives import global_allreduce_shape

SOURCE = "measured: the trace's all-reduce kernels"


def traced_network(
    network: Network, shape: ClusterShape, buckets: tuple[Bucket, ...], times_s, algo: str | None = "ring",
    sizes_recorded: bool = True,
) -> tuple[Network, str]:  # fmt: skip
    """(`network` with the trace's group cost and, where its times resolve one, its link; the line that
    says which). `algo`: the algorithm the traced all-reduces ran (NCCL's ring; None: gloo's flat ring).
    Sizes the trace did not record (bucket_bytes) resolve no link: they were split by the times."""
    if shape.gpus < 2:
        return network, "a world of one sends nothing: the links are the presets'"
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node, network.nics_per_node)
    nbytes = [b.nbytes for b in buckets]
    sizes = sorted(set(nbytes))
    fit = fit_affine(np.asarray(nbytes, float), np.asarray(times_s, float)) if len(sizes) > 1 else None
    resolved = fit is not None and fit.per_byte_s > 0 and "per_byte_s" not in fit.unresolved
    per_byte = fit.per_byte_s if resolved else max(times_s) / max(nbytes)  # beyond the sizes: their rate
    cost = tabulated_cost(nbytes, times_s, min(times_s), per_byte, SOURCE)
    net = replace(network, group_costs={**network.group_costs, group.key: cost})
    if fit is None or not sizes_recorded:
        why = "one bucket size" if sizes_recorded else "bucket sizes not recorded"
        return (
            net,
            f"{why}: the trace's own group ({group.key}) keeps its times, other groups the presets' links",
        )
    if not resolved:
        return (
            net,
            "the trace's all-reduce times do not grow with the bucket size: other groups keep the presets' links",
        )
    line = MeasuredLine(
        group, f"trace {group.key}", fit.fixed_s, fit.fixed_sd_s, fit.per_byte_s, fit.per_byte_rel_sd
    )
    est = invert_line(line, algo, network.intra)
    cls = line.link_class
    preset = getattr(network, cls)
    latency_resolved = "fixed_s" not in fit.unresolved and est.latency_s > 0
    link = Link(
        est.latency_s if latency_resolved else preset.latency_s,
        est.bandwidth_Bps,
        source=f"{SOURCE} ({group.key}, {len(sizes)} bucket sizes, {'NCCL' if algo else 'gloo'}'s ring inverted)",
        latency_sd_s=est.latency_sd_s if latency_resolved else preset.latency_sd_s,
        bandwidth_rel_sd=min(est.bandwidth_rel_sd, 1.0),
    )
    where = "inside a node" if cls == "intra" else "between nodes"
    line_text = (
        f"the link {where} from the trace's all-reduces: {link.bandwidth_Bps / 1e9:,.2f} GB/s (the preset's "
        f"{preset.bandwidth_Bps / 1e9:,.1f} GB/s; fit over {len(sizes)} bucket sizes, worst size "
        f"{fit.worst_rel_residual:.0%}); kernels that overlap compute run slower than alone"
    )
    return replace(net, **{cls: link}), line_text

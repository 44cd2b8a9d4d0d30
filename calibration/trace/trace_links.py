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
from runtime_model.core.scenario import Bucket, ClusterShape, Link, Network, TabulatedCost
from runtime_model.prediction.collectives import global_allreduce_shape

SOURCE = "measured: the trace's all-reduce kernels"


def traced_network(
    network: Network, shape: ClusterShape, buckets: tuple[Bucket, ...], times_s
) -> tuple[Network, str]:
    """(`network` with the trace's group cost and, where its times resolve one, its link; the line that
    says which)."""
    if shape.gpus < 2:
        return network, "a world of one sends nothing: the links are the presets'"
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node, network.nics_per_node)
    sizes, medians = _by_size(buckets, times_s)
    cost = TabulatedCost(min(medians), _slope(sizes, medians), SOURCE, 0.0, 0.0, sizes, medians)
    net = replace(network, group_costs={**network.group_costs, group.key: cost})
    if len(sizes) < 2:
        return (
            net,
            f"one bucket size: the trace's own group ({group.key}) keeps its time, other groups the presets' links",
        )
    fit = fit_affine(np.asarray(sizes), np.asarray(medians))
    if fit.per_byte_s <= 0 or "per_byte_s" in fit.unresolved:
        return (
            net,
            "the trace's all-reduce times do not grow with the bucket size: other groups keep the presets' links",
        )
    line = MeasuredLine(
        group, f"trace {group.key}", fit.fixed_s, fit.fixed_sd_s, fit.per_byte_s, fit.per_byte_rel_sd
    )
    est = invert_line(line, "ring", network.intra)
    cls = line.link_class
    preset = getattr(network, cls)
    resolved = "fixed_s" not in fit.unresolved and est.latency_s > 0
    link = Link(
        est.latency_s if resolved else preset.latency_s,
        est.bandwidth_Bps,
        source=f"{SOURCE} ({group.key}, {len(sizes)} bucket sizes, NCCL's ring inverted)",
        latency_sd_s=est.latency_sd_s if resolved else preset.latency_sd_s,
        bandwidth_rel_sd=min(est.bandwidth_rel_sd, 1.0),
    )
    where = "inside a node" if cls == "intra" else "between nodes"
    line_text = (
        f"the link {where} from the trace's all-reduces: {link.bandwidth_Bps / 1e9:,.2f} GB/s (the preset's "
        f"{preset.bandwidth_Bps / 1e9:,.1f} GB/s; fit over {len(sizes)} bucket sizes, worst size "
        f"{fit.worst_rel_residual:.0%}); kernels that overlap compute run slower than alone"
    )
    return replace(net, **{cls: link}), line_text


def _by_size(buckets, times_s) -> tuple[tuple[float, ...], tuple[float, ...]]:
    by_size: dict[int, list[float]] = {}
    for b, t in zip(buckets, times_s, strict=True):
        by_size.setdefault(b.nbytes, []).append(float(t))
    sizes = tuple(sorted(by_size))
    return tuple(map(float, sizes)), tuple(float(np.median(by_size[s])) for s in sizes)


def _slope(sizes, times) -> float:
    """Seconds per byte beyond the largest traced size: the least-squares line's, else its mean rate."""
    if len(sizes) > 1:
        slope = float(np.polyfit(np.asarray(sizes), np.asarray(times), 1)[0])
        if slope > 0:
            return slope
    return times[-1] / sizes[-1]

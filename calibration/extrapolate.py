"""How a calibration measured on one small cluster is stretched to the shape a user asks about.

Why: a profile from 2 nodes x 2 GPUs says little directly about 64 nodes x 8 GPUs. Every term the
model extrapolates (a ring latency term grown from p=4 to p=512, NIC sharing beyond what was
measured, buckets bigger than the largest message measured) is stated, and the far ones are flagged
with "WARNING:" so the advisor can print them next to its answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rtmodel_documents.calibration_document import Calibration
from runtime_model.core.distributions import EmpiricalCompute
from runtime_model.core.scenario import ClusterShape, GroupShape

_KEY = re.compile(r"^p(\d+)-s(\d+)-q(\d+)$")


def extrapolation_notes(
    calibration: Calibration,
    target: ClusterShape,
    message_bytes: Sequence[int] | None = None,
    far: float = 4.0,
) -> list[str]:
    """Statements of how each model term scales from the measured shape to `target`.

    message_bytes: message sizes the prediction will use (default: the calibrated bucket sizes).
    far: a ratio beyond the measured range that earns a WARNING (group size, message size).
    """
    ms, net = calibration.measured_shape, calibration.network
    notes = [
        f"measured {ms.nodes} node(s) x {ms.gpus_per_node} GPUs ({ms.gpus} ranks); "
        f"target {target.nodes} node(s) x {target.gpus_per_node} GPUs ({target.gpus} ranks)"
    ]
    measured = [_parse_key(k) for k in net.group_costs]
    measured = [g for g in measured if g is not None]
    for label, group in _target_groups(target):
        notes.extend(_group_note(label, group, measured, calibration, far))

    sizes = (
        list(message_bytes)
        if message_bytes
        else [b.nbytes for b in (*calibration.buckets.ddp, *calibration.buckets.gossip)]
    )
    notes.extend(_size_notes(calibration, sizes, far))

    for cls in ("intra", "inter"):
        src = calibration.provenance.get(f"{cls}.bandwidth_Bps", "")
        if src.startswith("preset") and (
            cls == "intra" and target.gpus_per_node > 1 or cls == "inter" and target.nodes > 1
        ):
            notes.append(f"WARNING: the {cls}-node link is a {src}, not measured on this cluster")

    dist = calibration.compute.distribution
    if isinstance(dist, EmpiricalCompute) and target.gpus * 4 > len(dist.samples_s):
        notes.append(
            f"compute: E(max of {target.gpus} workers) from {len(dist.samples_s)} empirical samples saturates near "
            "the largest sample; the tail beyond it is not measured (a Normal fit extrapolates it instead)"
        )
    notes.extend(_variation_notes(calibration, target))
    return notes


def _variation_notes(cal: Calibration, target: ClusterShape) -> list[str]:
    """How the measured compute variation (runtime_model.core.variation) is taken to the target shape."""
    ms, var = cal.measured_shape, cal.compute.variation
    out = []
    if var.rank_factors is not None:
        if len(var.rank_factors) == target.gpus:
            out.append(f"compute: the {target.gpus} measured per-rank speed factors used as measured (rank i = rank i)")
        else:
            out.append(
                f"compute: the {len(var.rank_factors)} measured per-rank speed factors do not fit {target.gpus} ranks: "
                f"a persistent rank spread of the measured cv {var.rank_cv:.3g} is drawn instead (fixed seed)"
            )
    if var.node_cv > 0:
        out.append(f"compute: node-correlated variation cv {var.node_cv:.3g} per node of {target.gpus_per_node} ranks")
    if target.gpus > ms.gpus:
        part = "C distribution" if var.is_iid else "within-rank (i.i.d.) part of C"
        out.append(
            f"compute: workers assumed independent draws of the measured {part} ({ms.gpus} ranks measured)"
        )
    return out


def _target_groups(target: ClusterShape) -> list[tuple[str, GroupShape]]:
    """The group shapes predictions on `target` use: global all-reduce and the gossip building blocks."""
    n, k, m = target.gpus, target.gpus_per_node, target.nodes
    out = []
    if n > 1:
        out.append(("global all-reduce", GroupShape(n, m, 1)))
    if k >= 2:
        out.append(("intra-node pair", GroupShape(2, 1, 1)))
    if m >= 2:
        out.append((f"inter-node pair (all {k} GPUs of a node crossing)", GroupShape(2, 2, k)))
    if k >= 2 and m > 1:
        out.append(("one-node group", GroupShape(k, 1, 1)))
    if m > 2:
        out.append(("two-node group", GroupShape(2 * k, 2, 1)))
    return out


def _group_note(
    label: str, g: GroupShape, measured: list[GroupShape], cal: Calibration, far: float
) -> list[str]:
    if g.key in cal.network.group_costs:
        return [f"{label} {g.key}: group cost measured directly"]
    cls = "intra" if g.nodes == 1 else "inter"
    same = [h for h in measured if (h.nodes == 1) == (g.nodes == 1)]
    src = cal.provenance.get(f"{cls}.latency_s", "?")
    if not same:
        return [
            f"{label} {g.key}: derived from the {cls}-node link ({src}); no {cls}-node group was measured"
        ]
    pmax = max(h.size for h in same)
    qmax = max(h.nic_sharing for h in same)
    smax = max(h.nodes for h in same)
    q = g.nic_sharing if g.nodes > 1 else 1
    out = [
        f"{label} {g.key}: derived from the {cls}-node link: ring latency term 2(p-1)*alpha_{cls} "
        + (
            f"extrapolated from p<={pmax} to p={g.size}"
            if g.size > pmax
            else f"at p={g.size} (measured p<={pmax})"
        )
        + f"; bandwidth term 2(p-1)/p*q*S*beta_{cls} with q={q} (measured q<={qmax})"
    ]
    if g.size > far * pmax:
        out.append(
            f"WARNING: {label} has {g.size} ranks, more than {far:g}x the largest measured {cls}-node "
            f"group ({pmax}); the latency term grows linearly in p, untested here"
        )
    if g.nodes > 1 and q > qmax:
        out.append(
            f"WARNING: {label} shares a NIC among {q} flows, measured at most {qmax}: assumes the flows "
            "split the NIC bandwidth evenly"
        )
    if g.nodes > far * smax:
        out.append(
            f"WARNING: {label} spans {g.nodes} nodes, measured at most {smax}: switch/fabric congestion "
            "beyond that is not in the model"
        )
    return out


def _size_notes(cal: Calibration, sizes: list[int], far: float) -> list[str]:
    pattern_fits = [f for f in cal.fits if f.kind == "pattern" and f.size_range_bytes]
    if not sizes or not pattern_fits:
        return []
    lo = min(f.size_range_bytes[0] for f in pattern_fits)
    hi = max(f.size_range_bytes[1] for f in pattern_fits)
    out = [f"messages {min(sizes)}..{max(sizes)} bytes; measured sizes {lo}..{hi} bytes"]
    if max(sizes) > far * hi:
        out.append(
            f"WARNING: messages up to {max(sizes)} bytes, more than {far:g}x the largest measured size "
            f"({hi} bytes): the per-byte cost is extrapolated"
        )
    if min(sizes) * far < lo:
        out.append(
            f"WARNING: messages down to {min(sizes)} bytes, below 1/{far:g} of the smallest measured size "
            f"({lo} bytes): the latency term is extrapolated"
        )
    regime_starts = [
        f.size_range_bytes[0] for f in pattern_fits if any(w.startswith("two regimes") for w in f.warnings)
    ]
    if regime_starts and min(sizes) < max(regime_starts):
        out.append(
            f"WARNING: messages of {min(sizes)} bytes fall into a small-message regime (< "
            f"{max(regime_starts)} bytes) that the model does not use; their cost is overestimated or "
            "underestimated accordingly"
        )
    return out


def _parse_key(key: str) -> GroupShape | None:
    m = _KEY.match(key)
    return GroupShape(int(m[1]), int(m[2]), int(m[3])) if m else None

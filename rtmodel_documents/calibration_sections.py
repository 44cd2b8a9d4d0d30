"""The calibration document's network and compute sections, both ways (rtmodel_documents.calibration_document
holds the schema): the runtime model's own types (Network, Link, AffineCost, Compute, its distribution and
Variation, BucketLayout) as JSON and back.

Why numbers go through num(): an unresolved uncertainty is infinite or NaN, which standard JSON cannot
hold; it is written as the string "inf" / "nan" and float() reads it back.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

from rtmodel_documents.profile_checks import CalibrationError
from runtime_model.core.distributions import EmpiricalCompute, NormalCompute
from runtime_model.core.scenario import AffineCost, Bucket, BucketLayout, Compute, Link, Network
from runtime_model.core.variation import Variation


def num(x: float | None) -> float | str | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else str(x)


def opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


def network_out(net: Network) -> dict:
    return {
        "name": net.name,
        "concurrent_collectives": net.concurrent_collectives,
        "group_concurrency": net.group_concurrency,
        "nccl_algo": net.nccl_algo,
        "intra": _link_out(net.intra),
        "inter": _link_out(net.inter),
        "group_costs": {
            key: {
                "fixed_s": num(c.fixed_s),
                "per_byte_s": num(c.per_byte_s),
                "source": c.source,
                "fixed_sd_s": num(c.fixed_sd_s),
                "per_byte_rel_sd": num(c.per_byte_rel_sd),
            }
            for key, c in net.group_costs.items()
        },
    }


def network_in(net: dict) -> Network:
    return Network(
        intra=_link_in(net["intra"]),
        inter=_link_in(net["inter"]),
        name=net["name"],
        concurrent_collectives=int(net.get("concurrent_collectives", 1)),
        group_concurrency=float(net.get("group_concurrency", 1.0)),  # absent before it was measured
        nccl_algo=net.get("nccl_algo"),  # absent in files from before it was kept: the flat ring
        group_costs={
            key: AffineCost(
                float(c["fixed_s"]),
                float(c["per_byte_s"]),
                c["source"],
                float(c["fixed_sd_s"]),
                float(c["per_byte_rel_sd"]),
            )
            for key, c in net["group_costs"].items()
        },
    )


def _link_out(link: Link) -> dict:
    return {
        "latency_s": link.latency_s,
        "bandwidth_Bps": link.bandwidth_Bps,
        "source": link.source,
        "latency_sd_s": num(link.latency_sd_s),
        "bandwidth_rel_sd": num(link.bandwidth_rel_sd),
        "flow_cap_Bps": num(link.flow_cap_Bps),
    }


def _link_in(d: dict) -> Link:
    return Link(
        float(d["latency_s"]),
        float(d["bandwidth_Bps"]),
        d["source"],
        float(d["latency_sd_s"]),
        float(d["bandwidth_rel_sd"]),
        float(d.get("flow_cap_Bps", math.inf)),  # files written before it: no per-flow cap
    )


def compute_out(comp: Compute, buckets: BucketLayout, extra: dict) -> dict:
    """The compute section: `comp`, the bucket layout, then `extra` (Decent-DP's and DDP's own parts)."""
    return {
        "forward_s": comp.forward_s,
        "backward_s": comp.backward_s,
        "optimizer_s": comp.optimizer_s,
        "source": comp.source,
        "ddp_buckets": [{"nbytes": b.nbytes, "ready_fraction": b.ready_fraction} for b in buckets.ddp],
        "gossip_buckets": [{"nbytes": b.nbytes, "ready_fraction": b.ready_fraction} for b in buckets.gossip],
        "distribution": _dist_out(comp.distribution),
        **({} if comp.variation.is_iid else {"variation": _variation_out(comp.variation)}),
        **({} if comp.step_spread is None else {"step_spread": _dist_out(comp.step_spread)}),
        **extra,
    }


def compute_in(comp: dict) -> Compute:
    return Compute(
        forward_s=float(comp["forward_s"]),
        backward_s=float(comp["backward_s"]),
        optimizer_s=float(comp["optimizer_s"]),
        distribution=_dist_in(comp["distribution"]),
        source=comp["source"],
        variation=_variation_in(comp["variation"]) if "variation" in comp else Variation(),
        step_spread=_dist_in(comp["step_spread"]) if "step_spread" in comp else None,
    )


def buckets_in(comp: dict) -> BucketLayout:
    return BucketLayout(
        ddp=tuple(Bucket(int(b["nbytes"]), float(b["ready_fraction"])) for b in comp["ddp_buckets"]),
        gossip=tuple(Bucket(int(b["nbytes"]), float(b["ready_fraction"])) for b in comp["gossip_buckets"]),
    )


def gossip_out(gossip: Compute) -> dict:
    """Decent-DP's compute differs from DDP's only in its step part: its mean and its spread."""
    out = {"gossip_optimizer_s": gossip.optimizer_s}
    if gossip.step_spread is not None:
        out["gossip_step_spread"] = _dist_out(gossip.step_spread)
    return out


def gossip_in(compute: Compute, comp: dict) -> Compute | None:
    if "gossip_optimizer_s" not in comp:
        return None
    spread = _dist_in(comp["gossip_step_spread"]) if "gossip_step_spread" in comp else None
    return replace(compute, optimizer_s=float(comp["gossip_optimizer_s"]), step_spread=spread)


def ddp_work_out(work) -> dict:
    return asdict(work)


def _dist_out(dist) -> dict:
    if isinstance(dist, EmpiricalCompute):
        return {"kind": "empirical", "samples_s": list(dist.samples_s)}
    if isinstance(dist, NormalCompute):
        return {"kind": "normal", "mean_s": dist.mean_s, "sd_s": dist.sd_s}
    raise CalibrationError(f"cannot serialise compute distribution {type(dist).__name__}")


def _dist_in(d: dict):
    if d["kind"] == "empirical":
        return EmpiricalCompute(tuple(float(x) for x in d["samples_s"]))
    if d["kind"] == "normal":
        return NormalCompute(float(d["mean_s"]), float(d["sd_s"]))
    raise CalibrationError(f"unknown compute distribution kind {d['kind']!r} in calibration file")


def _variation_out(v: Variation) -> dict:
    return {
        "straggler_factor": v.straggler_factor,
        "straggler_count": v.straggler_count,
        "rank_cv": v.rank_cv,
        "node_cv": v.node_cv,
        "rank_factors": None if v.rank_factors is None else list(v.rank_factors),
        "source": v.source,
    }


def _variation_in(d: dict) -> Variation:
    factors = d.get("rank_factors")
    return Variation(
        straggler_factor=float(d.get("straggler_factor", 1.0)),
        straggler_count=int(d.get("straggler_count", 0)),
        rank_cv=float(d.get("rank_cv", 0.0)),
        node_cv=float(d.get("node_cv", 0.0)),
        rank_factors=None if factors is None else tuple(float(x) for x in factors),
        source=str(d.get("source", "")),
    )

"""Calibration <-> JSON (the PARAMS file `rtmodel calibrate PROFILE --out PARAMS` writes).

Schema "rtmodel-calibration/1" - one JSON object (files written before the common header say
{"format": "rtmodel-calibration", "version": 1} instead of "schema"; both read):
    {"schema": "rtmodel-calibration/1",
     "measured_shape": {"gpus": 4, "gpus_per_node": 2},
     "network": {"name": str, "concurrent_collectives": int,
                 "group_concurrency": float (optional, 1 when absent: runtime_model.core.scenario.Network),
                 "nccl_algo": "auto" | "ring" | "tree" | null   (optional; null/absent: the flat ring),
                 "intra": LINK, "inter": LINK,      LINK = {"latency_s", "bandwidth_Bps", "source",
                                                            "latency_sd_s", "bandwidth_rel_sd",
                                                            "flow_cap_Bps" (optional, "inf": none)}
                 "group_costs": {"p2-s2-q2": {"fixed_s", "per_byte_s", "source", "fixed_sd_s", "per_byte_rel_sd"}}},
     "compute": {"forward_s", "backward_s", "optimizer_s", "source",
                 "gossip_optimizer_s" (optional: Decent-DP's step part where the profile measured it),
                 "step_spread", "gossip_step_spread" (optional: each step's measured samples, as "distribution"),
                 "ddp_work_s": {"forward_s", "backward_s", "optimizer_s"} (optional: DDP's own host work),
                 "ddp_buckets": [{"nbytes", "ready_fraction"}], "gossip_buckets": [...],
                 "distribution": {"kind": "empirical", "samples_s": [...]} | {"kind": "normal", "mean_s", "sd_s"},
                 "variation": {"straggler_factor", "straggler_count", "rank_cv", "node_cv",
                               "rank_factors": [...] | null, "source"}   (only when not i.i.d.)},
     "fits": [{"name", "kind", "params": {NAME: {"value", "sd"}}, "r2", "worst_rel_residual",
               "n_points", "n_samples", "size_range_bytes": [lo, hi] | null, "warnings": [...]}],
     "provenance": {PARAMETER: str}, "notes": [str], "profile_info": {str: str | null}}
Non-finite numbers (an unresolved uncertainty) are written as the strings "inf" / "nan", so the file
stays standard JSON; floats otherwise round-trip exactly.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from calibration.profile_io import CalibrationError
from calibration.results import Calibration, DdpWork, FitReport
from rtmodel_util.files import write_json_atomic
from runtime_model.core.distributions import EmpiricalCompute, NormalCompute
from runtime_model.core.document_header import HeaderError, check_header, document_header
from runtime_model.core.scenario import AffineCost, Bucket, BucketLayout, ClusterShape, Compute, Link, Network
from runtime_model.core.variation import Variation

KIND = "calibration"  # the header: "rtmodel-calibration/<VERSION>" (runtime_model.core.document_header)
VERSION = 1


def calibration_to_json(cal: Calibration) -> dict:
    """A JSON-ready dict (json.dump it) describing `cal` completely."""
    net, comp, buckets = cal.network, cal.compute, cal.buckets
    return {
        **document_header(KIND, VERSION),
        "measured_shape": {
            "gpus": cal.measured_shape.gpus,
            "gpus_per_node": cal.measured_shape.gpus_per_node,
        },
        "network": {
            "name": net.name,
            "concurrent_collectives": net.concurrent_collectives,
            "group_concurrency": net.group_concurrency,
            "nccl_algo": net.nccl_algo,
            "intra": _link_out(net.intra),
            "inter": _link_out(net.inter),
            "group_costs": {
                key: {
                    "fixed_s": _num(c.fixed_s),
                    "per_byte_s": _num(c.per_byte_s),
                    "source": c.source,
                    "fixed_sd_s": _num(c.fixed_sd_s),
                    "per_byte_rel_sd": _num(c.per_byte_rel_sd),
                }
                for key, c in net.group_costs.items()
            },
        },
        "compute": {
            "forward_s": comp.forward_s,
            "backward_s": comp.backward_s,
            "optimizer_s": comp.optimizer_s,
            "source": comp.source,
            "ddp_buckets": [{"nbytes": b.nbytes, "ready_fraction": b.ready_fraction} for b in buckets.ddp],
            "gossip_buckets": [
                {"nbytes": b.nbytes, "ready_fraction": b.ready_fraction} for b in buckets.gossip
            ],
            "distribution": _dist_out(comp.distribution),
            **({} if comp.variation.is_iid else {"variation": _variation_out(comp.variation)}),
            **({} if comp.step_spread is None else {"step_spread": _dist_out(comp.step_spread)}),
            **({} if cal.gossip_compute is None else _gossip_out(cal.gossip_compute)),
            **({} if cal.ddp_work is None else {"ddp_work_s": asdict(cal.ddp_work)}),
        },
        "fits": [
            {
                "name": f.name,
                "kind": f.kind,
                "params": {k: {"value": _num(v), "sd": _num(sd)} for k, (v, sd) in f.params.items()},
                "r2": _num(f.r2),
                "worst_rel_residual": _num(f.worst_rel_residual),
                "n_points": f.n_points,
                "n_samples": f.n_samples,
                "size_range_bytes": list(f.size_range_bytes) if f.size_range_bytes else None,
                "warnings": list(f.warnings),
            }
            for f in cal.fits
        ],
        "provenance": dict(cal.provenance),
        "notes": list(cal.notes),
        "profile_info": dict(cal.profile_info),
    }


def calibration_from_json(doc: dict, origin: str = "the document") -> Calibration:
    """Inverse of calibration_to_json; raises CalibrationError (one line, naming `origin`) on a foreign,
    newer or broken file. Reads either header (module doc)."""
    try:
        check_header(doc, KIND, VERSION, "rtmodel calibration file")
    except HeaderError as exc:
        raise CalibrationError(f"{origin} {exc}") from None
    try:
        net, comp, shape = doc["network"], doc["compute"], doc["measured_shape"]
        network = Network(
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
        buckets = BucketLayout(
            ddp=tuple(Bucket(int(b["nbytes"]), float(b["ready_fraction"])) for b in comp["ddp_buckets"]),
            gossip=tuple(
                Bucket(int(b["nbytes"]), float(b["ready_fraction"])) for b in comp["gossip_buckets"]
            ),
        )
        compute = Compute(
            forward_s=float(comp["forward_s"]),
            backward_s=float(comp["backward_s"]),
            optimizer_s=float(comp["optimizer_s"]),
            distribution=_dist_in(comp["distribution"]),
            source=comp["source"],
            variation=_variation_in(comp["variation"]) if "variation" in comp else Variation(),
            step_spread=_dist_in(comp["step_spread"]) if "step_spread" in comp else None,
        )
        fits = [
            FitReport(
                name=f["name"],
                kind=f["kind"],
                params={k: (float(p["value"]), float(p["sd"])) for k, p in f["params"].items()},
                r2=_opt_float(f["r2"]),
                worst_rel_residual=_opt_float(f["worst_rel_residual"]),
                n_points=int(f["n_points"]),
                n_samples=int(f["n_samples"]),
                size_range_bytes=tuple(int(x) for x in f["size_range_bytes"])
                if f["size_range_bytes"]
                else None,
                warnings=list(f["warnings"]),
            )
            for f in doc["fits"]
        ]
        return Calibration(
            network=network,
            compute=compute,
            buckets=buckets,
            measured_shape=ClusterShape(int(shape["gpus"]), int(shape["gpus_per_node"])),
            fits=fits,
            provenance=dict(doc["provenance"]),
            notes=list(doc["notes"]),
            profile_info=dict(doc.get("profile_info", {})),
            gossip_compute=_gossip_in(compute, comp),
            ddp_work=_ddp_work_in(comp),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CalibrationError):
            raise
        raise CalibrationError(f"broken calibration file ({type(exc).__name__}: {exc})") from None


def _gossip_out(gossip: Compute) -> dict:
    """Decent-DP's compute differs from DDP's only in its step part: its mean and its spread."""
    out = {"gossip_optimizer_s": gossip.optimizer_s}
    if gossip.step_spread is not None:
        out["gossip_step_spread"] = _dist_out(gossip.step_spread)
    return out


def _gossip_in(compute: Compute, comp: dict) -> Compute | None:
    if "gossip_optimizer_s" not in comp:
        return None
    spread = _dist_in(comp["gossip_step_spread"]) if "gossip_step_spread" in comp else None
    return replace(compute, optimizer_s=float(comp["gossip_optimizer_s"]), step_spread=spread)


def _ddp_work_in(comp: dict) -> DdpWork | None:
    if "ddp_work_s" not in comp:
        return None
    return DdpWork(**{k: float(v) for k, v in comp["ddp_work_s"].items()})


def _num(x: float | None) -> float | str | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else str(x)


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


def _link_out(link: Link) -> dict:
    return {
        "latency_s": link.latency_s,
        "bandwidth_Bps": link.bandwidth_Bps,
        "source": link.source,
        "latency_sd_s": _num(link.latency_sd_s),
        "bandwidth_rel_sd": _num(link.bandwidth_rel_sd),
        "flow_cap_Bps": _num(link.flow_cap_Bps),
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


def save_calibration(cal: Calibration, path) -> None:
    """Write the PARAMS file whole or not at all (rtmodel_util.files): a crash never leaves half a file."""
    write_json_atomic(path, calibration_to_json(cal))


def load_calibration(path) -> Calibration:
    """Read a PARAMS file; CalibrationError (one line) when it is missing or not valid JSON."""
    p = Path(path)
    if not p.is_file():
        raise CalibrationError(f"calibration file not found: {p}")
    from rtmodel_util.json_document import DocumentError, parse_document

    try:
        doc = parse_document(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise CalibrationError(f"{p} is not UTF-8 text ({exc.reason}); rerun `rtmodel calibrate`") from None
    except DocumentError as exc:
        raise CalibrationError(f"{p} {exc}; rerun `rtmodel calibrate`") from None
    return calibration_from_json(doc, str(p))

"""The calibration: fitted runtime-model parameters with an account of how well they fit, and the PARAMS
file `rtmodel calibrate PROFILE --out PARAMS` writes of it, both ways (to_json / from_json).

Why the reports travel with the parameters: a fitted bandwidth is only as good as its residuals and
the range of sizes it saw; the advisor and the CLI print these so a user can judge a prediction.
Why the class is the document: the file holds exactly these fields, so one type reads and writes it
(the network and compute sections' codec: rtmodel_documents.calibration_sections).

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

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rtmodel_documents import calibration_sections as sec
from rtmodel_documents.profile_checks import CalibrationError
from runtime_model.core.distributions import shifted
from runtime_model.core.document_header import HeaderError, check_header, document_header
from runtime_model.core.scenario import BucketLayout, ClusterShape, Compute, Network, Scenario

KIND = "calibration"  # the header: "rtmodel-calibration/<VERSION>" (runtime_model.core.document_header)
VERSION = 1


@dataclass(frozen=True)
class DdpWork:
    """DDP's own work per phase (seconds per iteration): what the phases took under DDP with its
    exchanges skipped, less the bare phases (bucket copy-in in backward's hooks, the copy-back, the
    reducer's bookkeeping); never below 0."""

    forward_s: float
    backward_s: float
    optimizer_s: float

    def on(self, compute: Compute) -> Compute:
        """DDP's compute: the bare one with this work added (the spread of C moved, not widened)."""
        return replace(
            compute,
            forward_s=compute.forward_s + self.forward_s,
            backward_s=compute.backward_s + self.backward_s,
            optimizer_s=compute.optimizer_s + self.optimizer_s,
            distribution=shifted(compute.distribution, self.forward_s + self.backward_s),
        )


@dataclass
class FitReport:
    """One fit: parameter -> (value, 1-sigma uncertainty), goodness of fit, data range, warnings.

    kind: "pattern" (an all-reduce pattern's line, the one the model uses), "pattern-small" (the
    small-message regime of a pattern, reported only), "link" (a link class combined from patterns),
    "compute" (the compute-time distribution and bucket timing).
    """

    name: str
    kind: str
    params: dict[str, tuple[float, float]]
    r2: float | None = None
    worst_rel_residual: float | None = None
    n_points: int = 0  # message sizes for pattern fits, estimates for links, samples for compute
    n_samples: int = 0
    size_range_bytes: tuple[int, int] | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "params": {k: {"value": sec.num(v), "sd": sec.num(sd)} for k, (v, sd) in self.params.items()},
            "r2": sec.num(self.r2),
            "worst_rel_residual": sec.num(self.worst_rel_residual),
            "n_points": self.n_points,
            "n_samples": self.n_samples,
            "size_range_bytes": list(self.size_range_bytes) if self.size_range_bytes else None,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_json(cls, f: dict) -> FitReport:
        return cls(
            name=f["name"],
            kind=f["kind"],
            params={k: (float(p["value"]), float(p["sd"])) for k, p in f["params"].items()},
            r2=sec.opt_float(f["r2"]),
            worst_rel_residual=sec.opt_float(f["worst_rel_residual"]),
            n_points=int(f["n_points"]),
            n_samples=int(f["n_samples"]),
            size_range_bytes=tuple(int(x) for x in f["size_range_bytes"]) if f["size_range_bytes"] else None,
            warnings=list(f["warnings"]),
        )


@dataclass
class Calibration:
    """Fitted runtime-model parameters for the measured cluster and how they were obtained.

    provenance maps a parameter (e.g. "inter.bandwidth_Bps") to where it came from, e.g.
    "measured (pair-inter p2-s2-q2, 17 sizes)" or "preset tcp-25g".
    """

    network: Network
    compute: Compute
    buckets: BucketLayout
    measured_shape: ClusterShape
    fits: list[FitReport]
    provenance: dict[str, str]
    notes: list[str]
    profile_info: dict[str, str | None] = field(default_factory=dict)
    gossip_compute: Compute | None = None  # Decent-DP's own, where its per-bucket work was measured
    ddp_work: DdpWork | None = None  # DDP's own host work, where the profile measured it

    def scenario(self, shape: ClusterShape, description: str = "") -> Scenario:
        """These parameters placed on `shape`: the one way a calibration becomes a Scenario (DDP's and
        Decent-DP's own work included where the profile measured them; `compute` is the bare one)."""
        if self.ddp_work is None:
            return Scenario(shape, self.network, self.compute, self.buckets, description, self.gossip_compute)
        ddp = self.ddp_work.on(self.compute)
        gossip = self.gossip_compute if self.gossip_compute is not None else self.compute
        return Scenario(shape, self.network, ddp, self.buckets, description, gossip)

    def fit(self, name: str) -> FitReport:
        """The report named `name` (KeyError lists the available names)."""
        for f in self.fits:
            if f.name == name:
                return f
        raise KeyError(f"no fit named {name!r}; have: {', '.join(f.name for f in self.fits)}")

    def to_json(self) -> dict:
        """A JSON-ready dict (json.dump it) describing this calibration completely (the module's schema)."""
        extra = {
            **({} if self.gossip_compute is None else sec.gossip_out(self.gossip_compute)),
            **({} if self.ddp_work is None else {"ddp_work_s": sec.ddp_work_out(self.ddp_work)}),
        }
        return {
            **document_header(KIND, VERSION),
            "measured_shape": {
                "gpus": self.measured_shape.gpus,
                "gpus_per_node": self.measured_shape.gpus_per_node,
            },
            "network": sec.network_out(self.network),
            "compute": sec.compute_out(self.compute, self.buckets, extra),
            "fits": [f.to_json() for f in self.fits],
            "provenance": dict(self.provenance),
            "notes": list(self.notes),
            "profile_info": dict(self.profile_info),
        }

    @classmethod
    def from_json(cls, doc: Any, origin: str = "the document") -> Calibration:
        """The calibration a PARAMS document holds; CalibrationError (one line, naming `origin`) on a
        foreign, newer or broken document. Reads either header (module doc)."""
        try:
            check_header(doc, KIND, VERSION, "rtmodel calibration file")
        except HeaderError as exc:
            raise CalibrationError(f"{origin} {exc}") from None
        try:
            net, comp, shape = doc["network"], doc["compute"], doc["measured_shape"]
            network, buckets, compute = sec.network_in(net), sec.buckets_in(comp), sec.compute_in(comp)
            return cls(
                network=network,
                compute=compute,
                buckets=buckets,
                measured_shape=ClusterShape(int(shape["gpus"]), int(shape["gpus_per_node"])),
                fits=[FitReport.from_json(f) for f in doc["fits"]],
                provenance=dict(doc["provenance"]),
                notes=list(doc["notes"]),
                profile_info=dict(doc.get("profile_info", {})),
                gossip_compute=sec.gossip_in(compute, comp),
                ddp_work=DdpWork(**{k: float(v) for k, v in comp["ddp_work_s"].items()})
                if "ddp_work_s" in comp
                else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CalibrationError):
                raise
            raise CalibrationError(f"broken calibration file ({type(exc).__name__}: {exc})") from None


def save_calibration(cal: Calibration, path) -> None:
    """Write the PARAMS file whole or not at all (rtmodel_util.files): a crash never leaves half a file."""
    from rtmodel_util.files import write_json_atomic

    write_json_atomic(path, cal.to_json())


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
    return Calibration.from_json(doc, str(p))

"""Reading a profile file (rtmodel-profile/1, or the older tool/schema_version header) before anything
is fitted: the file, then the document's checks (rtmodel_util.profile_document.ProfileDocument.from_json,
the schema the profiler writes through), then the typed Profile (calibration.profile).

Why a separate pass: a profile comes from a long run on someone's cluster; when it is broken the user
needs ONE line that says what is wrong and what to do (rerun, --resume, other file), not a KeyError
from deep inside a fit. The Profile is built here and only here, so everything downstream reads named
fields of well-formed data. CalibrationError and ProfileError live with the schema (rtmodel_util.profile_checks)
and are importable from here as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from calibration.measurement import Measurement
from calibration.profile import AllReduceMeasurement, ComputeProfile, Profile, Workload
from calibration.units import fmt_bytes
from rtmodel_util.profile_checks import CalibrationError, ProfileError
from rtmodel_util.profile_document import PatternResult, ProfileCompute, ProfileDocument
from rtmodel_util.profile_schema import DDP_WRAPPED_KEYS
from runtime_model.core.scenario import ClusterShape, GroupShape

__all__ = ["CalibrationError", "ProfileError", "load_profile", "profile_from_document", "validate_profile"]


def load_profile(path: str | Path) -> Profile:
    """Read, validate and type a profile file; raises ProfileError with one clear line when it is unusable."""
    p = Path(path)
    if not p.exists():
        raise ProfileError(f"profile not found: {p}")
    if not p.is_file():
        raise ProfileError(f"profile path is not a file: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read profile {p}: {exc}") from None
    if not text.strip():
        raise ProfileError(
            f"{p} is empty (the profiler writes it atomically: was it copied while incomplete?)"
        )
    from rtmodel_util.json_document import DocumentError, parse_document

    try:
        doc = parse_document(text, nan_ok=True)  # the field checks name the sample that is NaN
    except DocumentError as exc:
        hint = "" if "not valid JSON" not in str(exc) else "; the file looks truncated or corrupted: copy it again or rerun the profiler"
        raise ProfileError(f"{p} {exc}{hint}") from None
    return profile_from_document(doc, origin=str(p))


def profile_from_document(doc: Any, origin: str = "profile") -> Profile:
    """Validate a parsed profile document and build its typed Profile (ProfileError when unusable)."""
    return _build_profile(ProfileDocument.from_json(doc, origin, need_complete=True), doc, origin)


def validate_profile(doc: Any, origin: str = "profile") -> None:
    """Check a parsed profile document; raises ProfileError naming the first problem found."""
    ProfileDocument.from_json(doc, origin, need_complete=True)


# ----------------------------------------------------------------------------- typed profile


def _build_profile(typed: ProfileDocument, doc: dict, origin: str) -> Profile:
    """The checked document as a Profile (no checks here: ProfileDocument.from_json has run)."""
    shape, wl = typed.shape, typed.workload
    return Profile(
        origin=origin,
        shape=ClusterShape(gpus=shape.world_size, gpus_per_node=shape.ranks_per_node),
        backend=shape.backend,
        device=shape.device,
        torch_version=shape.torch_version,
        nccl_version=shape.nccl_version,
        node_names=shape.node_names or (),
        created_utc=typed.created_utc,
        workload=Workload(
            model=wl.model,
            model_args=dict(wl.model_args or {}),
            batch_per_rank=int(wl.batch_per_rank) if wl.batch_per_rank else None,
            bucket_cap_mb=float(wl.bucket_cap_mb) if wl.bucket_cap_mb else None,
            ddp_buckets_bytes=wl.ddp_buckets_bytes,
            gossip_buckets_bytes=wl.gossip_buckets_bytes,
            precision=wl.precision,
            optimizer=wl.optimizer,
        ),
        compute=_build_compute(typed.compute),
        allreduce=tuple(
            AllReduceMeasurement(
                pattern=pat.pattern,
                group=GroupShape(pat.group_size, pat.nodes_spanned, pat.nic_sharing),
                message_bytes=res.bytes,
                timing=Measurement(res.samples_s, f"{pat.pattern} {fmt_bytes(res.bytes)}"),
                group_timing=_group_timing(res, pat.pattern),
            )
            for pat in typed.communication.patterns
            for res in pat.results
        ),
        document=doc,
        nccl_algo_env=shape.nccl_algo_env,
        unmeasured_links=dict(shape.unmeasured_links or {}),
        in_flight=typed.communication.in_flight or (),
    )


def _group_timing(res: PatternResult, pattern: str) -> Measurement | None:
    if res.group_samples_s is None:
        return None
    samples = tuple(t for times in res.group_samples_s for t in times)
    return Measurement(samples, f"{pattern} {fmt_bytes(res.bytes)} (own group)")


def _build_compute(compute: ProfileCompute) -> ComputeProfile:
    def per_rank(key: str) -> tuple[Measurement, ...]:
        phase = key.removesuffix("_s")
        return tuple(Measurement(t, f"{phase} rank {r}") for r, t in enumerate(getattr(compute, key)))

    return ComputeProfile(
        forward=per_rank("forward_s"),
        backward=per_rank("backward_s"),
        optimizer=per_rank("optimizer_s"),
        ddp_bucket_ready_s=compute.ddp_bucket_ready_s,
        gossip_bucket_ready_s=compute.gossip_bucket_ready_s,
        gossip_step=per_rank("gossip_step_s") if compute.gossip_step_s else None,
        ddp_wrapped=tuple(per_rank(k) for k in DDP_WRAPPED_KEYS) if getattr(compute, DDP_WRAPPED_KEYS[0]) else None,
    )

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
from calibration.profile_checks import check_peak_memory
from calibration.units import fmt_bytes
from rtmodel_util.profile_checks import CalibrationError, ProfileError
from rtmodel_util.profile_document import PatternResult, ProfileCompute, ProfileDocument
from rtmodel_util.profile_schema import DDP_WRAPPED_KEYS
from runtime_model.core.physical_bounds import MAX_GPUS_PER_NODE, MAX_ALGBW_Bps
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
        hint = (
            ""
            if "not valid JSON" not in str(exc)
            else "; the file looks truncated or corrupted: copy it again or rerun the profiler"
        )
        raise ProfileError(f"{p} {exc}{hint}") from None
    return profile_from_document(doc, origin=str(p))


def profile_from_document(doc: Any, origin: str = "profile") -> Profile:
    """Validate a parsed profile document and build its typed Profile (ProfileError when unusable)."""
    typed = ProfileDocument.from_json(doc, origin, need_complete=True)
    check_physics(typed, origin)
    return _build_profile(typed, doc, origin)


# What a measured profile can hold beside its fields' own checks (rtmodel_util.profile_checks), each one
# line naming the field and the bound:
# - ranks at most MAX_GPUS (2^24, the most rtmodel answers for), at most MAX_RANKS_PER_NODE on one node (a
#   GPU node holds 8 to 72 accelerators; 1,024 leaves room for CPU ranks a host runs);
# - the gradient buckets describe one model: DDP's and Decent-DP's buckets hold its gradients, so each list
#   sums to at most param_bytes x BUCKET_SLACK + 1 MiB (padding and alignment, in the profiles here 1.000006x)
#   where param_bytes is recorded, and the two lists' sums are within BUCKETS_AGREE of each other;
# - a collective moves its bytes no faster than MAX_ALGBW_Bps (bytes / time: 10 TB/s, as nccl-tests' and a
#   trace's: NVLink 5 carries 1.8 TB/s per GPU, both directions together);
# - a batch per rank of at most 1e10 units (the largest global batches are ~1.6e7 tokens), a bucket cap in
#   (0, 1e6) MiB (the flag's range).
# - a rank's peak memory at most what its device holds (calibration.profile_checks).
MAX_RANKS_PER_NODE = MAX_GPUS_PER_NODE
BUCKET_SLACK = 1.25
BUCKETS_AGREE = 2.0


def check_physics(typed: ProfileDocument, origin: str) -> None:
    """ProfileError (one line) where the profile holds what no measured run can."""
    from runtime_model.core.constraints import BUCKET_CAP_MIB_RANGE, GLOBAL_BATCH
    from runtime_model.core.defaults import MAX_GPUS

    shape, wl, comm = typed.shape, typed.workload, typed.communication
    if shape.world_size > MAX_GPUS:
        raise ProfileError(
            f"{origin}: shape.world_size must be at most {MAX_GPUS:,}, got {shape.world_size:,}"
        )
    if shape.ranks_per_node > MAX_RANKS_PER_NODE:
        raise ProfileError(
            f"{origin}: shape.ranks_per_node must be at most {MAX_RANKS_PER_NODE:,}, got {shape.ranks_per_node:,}"
        )
    if wl.batch_per_rank and not GLOBAL_BATCH.contains(wl.batch_per_rank):
        raise ProfileError(
            f"{origin}: workload.batch_per_rank must be {GLOBAL_BATCH.describe()}, got {wl.batch_per_rank!r}"
        )
    for key in ("bucket_cap_mb", "ddp_first_bucket_mb"):
        value = getattr(wl, key)
        if value and not BUCKET_CAP_MIB_RANGE.contains(value):
            raise ProfileError(
                f"{origin}: workload.{key} must be {BUCKET_CAP_MIB_RANGE.describe()}, got {value!r}"
            )
    _check_buckets(wl, origin)
    for j, pattern in enumerate(comm.patterns):
        for i, res in enumerate(pattern.results):
            _check_rate(res.bytes, min(res.samples_s), f"communication.patterns[{j}].results[{i}]", origin)
    for j, entry in enumerate(comm.in_flight or ()):
        _check_rate(sum(entry.buckets_bytes), min(entry.in_flight_s), f"communication.in_flight[{j}]", origin)
    check_peak_memory(typed, origin)  # a rank holds no more than its device has


def _check_buckets(wl, origin: str) -> None:
    sums = {key: sum(getattr(wl, key)) for key in ("ddp_buckets_bytes", "gossip_buckets_bytes")}
    if wl.param_bytes:
        top = wl.param_bytes * BUCKET_SLACK + 2**20
        for key, total in sums.items():
            if total > top:
                raise ProfileError(
                    f"{origin}: workload.{key} sum to {total:,} bytes, more than the model's gradients hold "
                    f"(workload.param_bytes {wl.param_bytes:,} x {BUCKET_SLACK:g} + 1 MiB): not a measured bucket layout"
                )
    ddp, gossip = sums["ddp_buckets_bytes"], sums["gossip_buckets_bytes"]
    if max(ddp, gossip) > BUCKETS_AGREE * min(ddp, gossip):
        raise ProfileError(
            f"{origin}: workload.ddp_buckets_bytes sum to {ddp:,} bytes and workload.gossip_buckets_bytes to "
            f"{gossip:,}: both hold one model's gradients, so they agree within {BUCKETS_AGREE:g}x"
        )


def _check_rate(nbytes: int, fastest_s: float, where: str, origin: str) -> None:
    if nbytes / fastest_s > MAX_ALGBW_Bps:
        raise ProfileError(
            f"{origin}: {where} moved {nbytes:,} bytes in {fastest_s * 1e6:,.3f} us: {nbytes / fastest_s / 1e9:,.0f} GB/s "
            f"is beyond any machine's links (at most {MAX_ALGBW_Bps / 1e9:,.0f} GB/s)"
        )


def validate_profile(doc: Any, origin: str = "profile") -> None:
    """Check a parsed profile document; raises ProfileError naming the first problem found."""
    check_physics(ProfileDocument.from_json(doc, origin, need_complete=True), origin)


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
        ddp_wrapped=tuple(per_rank(k) for k in DDP_WRAPPED_KEYS)
        if getattr(compute, DDP_WRAPPED_KEYS[0])
        else None,
    )

"""Reading and checking a profile document (schema v1) before anything is fitted.

Why a separate pass: a profile comes from a long run on someone's cluster; when it is broken the user
needs ONE line that says what is wrong and what to do (rerun, --resume, other file), not a KeyError
from deep inside a fit. The checked document is then turned into a typed Profile (calibration.profile)
here and only here, so everything downstream reads named fields of well-formed data.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

from calibration.measurement import Measurement
from calibration.profile import AllReduceMeasurement, ComputeProfile, Profile, Workload
from calibration.units import fmt_bytes
from rtmodel_util.profile_patterns import PATTERN_NAMES
from rtmodel_util.profile_schema import (
    CHECKPOINT_SECTIONS,
    DDP_WRAPPED_KEYS,
    LINK_CLASSES,
    REQUIRED_SECTIONS,
    SCHEMA_VERSION,
    TOOL,
    UNMEASURED_LINKS,
)
from runtime_model.core.errors import UserError
from runtime_model.core.scenario import ClusterShape, GroupShape


class CalibrationError(UserError):
    """A profile or calibration request that cannot work as given."""


class ProfileError(CalibrationError):
    """The profile document cannot be used (missing, corrupt, wrong tool or version, bad numbers)."""


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
    validate_profile(doc, origin)
    return _build_profile(doc, origin)


def validate_profile(doc: Any, origin: str = "profile") -> None:
    """Check a parsed profile document; raises ProfileError naming the first problem found."""
    if not isinstance(doc, dict):
        raise ProfileError(f"{origin} is not an rtmodel profile (a JSON object was expected)")
    tool = doc.get("tool")
    if tool != TOOL:
        raise ProfileError(f"{origin} is not an rtmodel profile (tool={tool!r}, expected {TOOL!r})")
    version = doc.get("schema_version")
    if isinstance(version, bool) or version != SCHEMA_VERSION:  # true == 1 in Python, not in the schema
        raise ProfileError(
            f"{origin} has schema_version {version!r}; this rtmodel reads schema_version "
            f"{SCHEMA_VERSION} only (use the rtmodel version that wrote it, or re-profile)"
        )
    if doc.get("complete") is not True:
        done = doc.get("sections_done") or []
        missing = [s for s in CHECKPOINT_SECTIONS if s not in done]
        raise ProfileError(
            f"{origin} is an incomplete profile (sections missing: {', '.join(missing) or 'none listed'}; "
            f"done: {', '.join(done) or 'none'}); finish it with `rtmodel profile --resume {shlex.quote(origin)}` "
            "and the options of the run that started it"
        )
    for section in REQUIRED_SECTIONS:
        if not isinstance(doc.get(section), dict):
            raise ProfileError(
                f"{origin}: section {section!r} is missing (the profile is unusable; re-profile)"
            )
    _check_shape(doc["shape"], origin)
    _check_workload(doc["workload"], origin)
    _check_compute(
        doc["compute"],
        doc["shape"]["world_size"],
        len(doc["workload"]["ddp_buckets_bytes"]),
        len(doc["workload"]["gossip_buckets_bytes"]),
        origin,
    )
    _check_communication(doc["communication"], doc["shape"], origin)


# ----------------------------------------------------------------------------- field checks


# What a real profile can hold. A step or a collective that takes more than a day was not measured (and
# 1e300 s overflows the model into NaN verdicts); a message or bucket over 1e13 bytes (10 TB) is more than
# any GPU's memory holds.
MAX_TIME_S = 86_400.0
MAX_BYTES = 10**13


def _where(origin: str, path: str) -> str:
    return f"{origin}: {path}"


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _require_int(value: Any, path: str, origin: str, minimum: int = 1, maximum: int | None = None) -> int:
    if not _is_number(value) or not math.isfinite(value) or int(value) != value or value < minimum:
        raise ProfileError(f"{_where(origin, path)} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ProfileError(f"{_where(origin, path)} must be at most {maximum:,}, got {value!r}")
    return int(value)


def _check_time(value: Any, path: str, origin: str, positive: bool) -> None:
    if not _is_number(value):
        raise ProfileError(
            f"{_where(origin, path)} is not a number ({value!r}); times must be numbers in seconds"
        )
    if math.isnan(value):
        raise ProfileError(f"{_where(origin, path)} is NaN; times must be finite numbers of seconds")
    if math.isinf(value):
        raise ProfileError(f"{_where(origin, path)} is infinite; times must be finite numbers of seconds")
    if value < 0:
        raise ProfileError(f"{_where(origin, path)} is negative ({value}); times must be >= 0 s")
    if value > MAX_TIME_S:
        raise ProfileError(
            f"{_where(origin, path)} is {value:g} s, more than a day; not a measured time (re-profile)"
        )
    if positive and value == 0:
        raise ProfileError(f"{_where(origin, path)} is 0; a measured collective takes > 0 s")


def _check_times(values: Any, path: str, origin: str, positive: bool = False) -> None:
    """A non-empty list of valid times."""
    if not isinstance(values, list) or not values:
        raise ProfileError(f"{_where(origin, path)} must be a non-empty list of times")
    for i, v in enumerate(values):
        _check_time(v, f"{path}[{i}]", origin, positive)


def _check_shape(shape: dict, origin: str) -> None:
    n = _require_int(shape.get("world_size"), "shape.world_size", origin)
    k = _require_int(shape.get("ranks_per_node"), "shape.ranks_per_node", origin)
    m = _require_int(shape.get("nodes"), "shape.nodes", origin)
    if n != k * m:
        raise ProfileError(
            f"{origin}: shape says world_size {n} but nodes {m} x ranks_per_node {k} = {k * m}"
        )
    algo = shape.get("nccl_algo_env")  # optional: profiles before it lack it (NCCL's own choice assumed)
    if algo is not None and not isinstance(algo, str):
        raise ProfileError(f"{_where(origin, 'shape.nccl_algo_env')} must be NCCL_ALGO's text or null, got {algo!r}")
    marks = shape.get(UNMEASURED_LINKS, {})  # optional: profiles before it lack it (every link measured)
    if not isinstance(marks, dict) or any(
        cls not in LINK_CLASSES or not isinstance(why, str) or not why.strip() or len(why) > 500
        for cls, why in marks.items()
    ):
        raise ProfileError(
            f"{_where(origin, 'shape.' + UNMEASURED_LINKS)} must map link classes ({', '.join(LINK_CLASSES)}) to "
            f"why each was not measured (a sentence of at most 500 characters), got {ascii(marks)[:200]}"
        )


def _check_workload(workload: dict, origin: str) -> None:
    for key in ("ddp_buckets_bytes", "gossip_buckets_bytes"):
        sizes = workload.get(key)
        if not isinstance(sizes, list) or not sizes:
            raise ProfileError(
                f"{_where(origin, 'workload.' + key)} must be a non-empty list of bucket sizes"
            )
        for i, s in enumerate(sizes):
            _require_int(s, f"workload.{key}[{i}]", origin, maximum=MAX_BYTES)
    args = workload.get("model_args")
    if args is not None and not isinstance(args, dict):
        raise ProfileError(f"{_where(origin, 'workload.model_args')} must be an object of model arguments")
    if workload.get("batch_per_rank"):  # absent (older profiles) is allowed; validation asks for it
        _require_int(workload["batch_per_rank"], "workload.batch_per_rank", origin)
    cap = workload.get("bucket_cap_mb")
    if cap and (not _is_number(cap) or not 0 < cap < math.inf):
        raise ProfileError(
            f"{_where(origin, 'workload.bucket_cap_mb')} must be a positive number of MB, got {cap!r}"
        )


def _check_compute(compute: dict, world_size: int, n_ddp: int, n_gossip: int, origin: str) -> None:
    for key in ("forward_s", "backward_s", "optimizer_s"):
        per_rank = compute.get(key)
        if not isinstance(per_rank, list) or not per_rank:
            raise ProfileError(
                f"{_where(origin, 'compute.' + key)} is missing (one list of times per rank expected)"
            )
        if len(per_rank) != world_size:
            raise ProfileError(
                f"{_where(origin, 'compute.' + key)} has {len(per_rank)} ranks but world_size is {world_size}"
            )
        for r, times in enumerate(per_rank):
            _check_times(times, f"compute.{key}[{r}]", origin)
    for r, (fwd, bwd) in enumerate(zip(compute["forward_s"], compute["backward_s"], strict=True)):
        if len(fwd) != len(bwd):
            raise ProfileError(
                f"{_where(origin, f'compute.forward_s[{r}]')} has {len(fwd)} iterations but backward_s has {len(bwd)}"
            )
        if not sum(fwd) + sum(bwd) > 0:
            raise ProfileError(
                f"{_where(origin, f'compute.forward_s[{r}]')}: rank {r}'s forward and backward took 0 s in every "
                "iteration; a training step takes time (re-profile)"
            )
    # optional: Decent-DP's per-bucket work, and the phases under DDP, in wrapped iterations
    for key in ("gossip_step_s", *DDP_WRAPPED_KEYS):
        _check_optional_rows(compute.get(key), key, world_size, origin)
    present = [key for key in DDP_WRAPPED_KEYS if compute.get(key) is not None]  # null is not measured
    if present and len(present) < len(DDP_WRAPPED_KEYS):
        missing = ", ".join(f"compute.{k}" for k in DDP_WRAPPED_KEYS if k not in present)
        raise ProfileError(
            f"{_where(origin, 'compute.' + present[0])} comes without {missing} (absent or null; re-profile)"
        )
    iterations = [len(t) for t in compute["backward_s"]]
    for key, n_buckets in (("ddp_bucket_ready_s", n_ddp), ("gossip_bucket_ready_s", n_gossip)):
        per_rank = compute.get(key)
        if not isinstance(per_rank, list) or len(per_rank) != world_size:
            raise ProfileError(
                f"{_where(origin, 'compute.' + key)} must hold one list per rank ({world_size})"
            )
        for r, per_iter in enumerate(per_rank):
            if not isinstance(per_iter, list) or len(per_iter) != iterations[r]:
                raise ProfileError(
                    f"{_where(origin, f'compute.{key}[{r}]')} must hold one entry per measured iteration "
                    f"({iterations[r]})"
                )
            for i, ready in enumerate(per_iter):
                _check_times(ready, f"compute.{key}[{r}][{i}]", origin)
                if len(ready) != n_buckets:
                    raise ProfileError(
                        f"{_where(origin, f'compute.{key}[{r}][{i}]')} has {len(ready)} buckets but the "
                        f"workload lists {n_buckets}"
                    )


def _check_communication(comm: dict, shape: dict, origin: str) -> None:
    """The measured collectives; every group must exist in the profiled shape (no rank beyond world_size,
    no node beyond its nodes, no more ranks sharing a NIC than a node holds)."""
    world, nodes, per_node = int(shape["world_size"]), int(shape["nodes"]), int(shape["ranks_per_node"])
    patterns = comm.get("patterns")
    if not isinstance(patterns, list) or not patterns:
        raise ProfileError(
            f"{origin}: communication.patterns is missing or empty (nothing to fit; re-profile)"
        )
    for j, pat in enumerate(patterns):
        where = f"communication.patterns[{j}]"
        if not isinstance(pat, dict):
            raise ProfileError(f"{_where(origin, where)} must be an object")
        name = pat.get("pattern")
        if name not in PATTERN_NAMES:
            raise ProfileError(
                f"{_where(origin, where)}.pattern is {name!r}; known: {', '.join(PATTERN_NAMES)}"
            )
        size = _require_int(pat.get("group_size"), f"{where}.group_size", origin, minimum=2, maximum=world)
        spans = _require_int(pat.get("nodes_spanned"), f"{where}.nodes_spanned", origin, maximum=nodes)
        _require_int(pat.get("nic_sharing"), f"{where}.nic_sharing", origin, maximum=per_node)
        if spans > size:
            raise ProfileError(f"{_where(origin, where)} spans {spans} nodes with only {size} ranks")
        groups = pat.get("concurrent_groups")
        if groups is not None:
            groups = _require_int(groups, f"{where}.concurrent_groups", origin)
            if groups * size > world:
                raise ProfileError(
                    f"{_where(origin, where)}: {groups} groups of {size} ranks need {groups * size} ranks; "
                    f"the profile has {world}"
                )
        results = pat.get("results")
        if not isinstance(results, list) or not results:
            raise ProfileError(f"{_where(origin, where)}.results is missing or empty ({name})")
        for i, res in enumerate(results):
            if not isinstance(res, dict):
                raise ProfileError(f"{_where(origin, f'{where}.results[{i}]')} must be an object")
            _require_int(res.get("bytes"), f"{where}.results[{i}].bytes", origin, maximum=MAX_BYTES)
            _check_times(res.get("samples_s"), f"{where}.results[{i}].samples_s", origin, positive=True)
            per_group = res.get("group_samples_s")  # optional: profiles before it lack it
            if per_group is not None:
                if not isinstance(per_group, list) or not per_group:
                    raise ProfileError(
                        f"{_where(origin, f'{where}.results[{i}].group_samples_s')} must be a non-empty list"
                    )
                if len(per_group) > world // size:
                    raise ProfileError(
                        f"{_where(origin, f'{where}.results[{i}].group_samples_s')} names {len(per_group)} "
                        f"groups of {size} ranks; the profile's {world} ranks hold at most {world // size}"
                    )
                for g, times in enumerate(per_group):
                    _check_times(times, f"{where}.results[{i}].group_samples_s[{g}]", origin, positive=True)


# ----------------------------------------------------------------------------- typed profile


def _build_profile(doc: dict, origin: str) -> Profile:
    """The checked document as a Profile (no checks here: validate_profile has run)."""
    shape, wl = doc["shape"], doc["workload"]
    node_names = shape.get("node_names")
    return Profile(
        origin=origin,
        shape=ClusterShape(gpus=int(shape["world_size"]), gpus_per_node=int(shape["ranks_per_node"])),
        backend=shape.get("backend"),
        device=shape.get("device"),
        torch_version=shape.get("torch_version"),
        nccl_version=shape.get("nccl_version"),
        node_names=tuple(str(n) for n in node_names) if isinstance(node_names, list) else (),
        created_utc=doc.get("created_utc"),
        workload=Workload(
            model=None if wl.get("model") is None else str(wl["model"]),
            model_args=dict(wl.get("model_args") or {}),
            batch_per_rank=int(wl["batch_per_rank"]) if wl.get("batch_per_rank") else None,
            bucket_cap_mb=float(wl["bucket_cap_mb"]) if wl.get("bucket_cap_mb") else None,
            ddp_buckets_bytes=tuple(int(b) for b in wl["ddp_buckets_bytes"]),
            gossip_buckets_bytes=tuple(int(b) for b in wl["gossip_buckets_bytes"]),
            precision=None if wl.get("precision") is None else str(wl["precision"]),
            optimizer=None if wl.get("optimizer") is None else str(wl["optimizer"]),
        ),
        compute=_build_compute(doc["compute"]),
        allreduce=tuple(
            AllReduceMeasurement(
                pattern=pat["pattern"],
                group=GroupShape(int(pat["group_size"]), int(pat["nodes_spanned"]), int(pat["nic_sharing"])),
                message_bytes=int(res["bytes"]),
                timing=Measurement(tuple(res["samples_s"]), f"{pat['pattern']} {fmt_bytes(res['bytes'])}"),
                group_timing=_group_timing(res, pat["pattern"]),
            )
            for pat in doc["communication"]["patterns"]
            for res in pat["results"]
        ),
        document=doc,
        nccl_algo_env=shape.get("nccl_algo_env"),
        unmeasured_links=dict(shape.get(UNMEASURED_LINKS) or {}),
    )


def _group_timing(res: dict, pattern: str) -> Measurement | None:
    per_group = res.get("group_samples_s")
    if per_group is None:
        return None
    samples = tuple(t for times in per_group for t in times)
    return Measurement(samples, f"{pattern} {fmt_bytes(res['bytes'])} (own group)")


def _check_optional_rows(rows, key: str, world_size: int, origin) -> None:
    if rows is None:
        return
    if not isinstance(rows, list) or len(rows) != world_size:
        raise ProfileError(f"{_where(origin, 'compute.' + key)} must hold one list per rank ({world_size})")
    for r, times in enumerate(rows):
        _check_times(times, f"compute.{key}[{r}]", origin)


def _build_compute(compute: dict) -> ComputeProfile:
    def per_rank(key: str) -> tuple[Measurement, ...]:
        phase = key.removesuffix("_s")
        return tuple(Measurement(tuple(t), f"{phase} rank {r}") for r, t in enumerate(compute[key]))

    def ready(key: str) -> tuple[tuple[tuple[float, ...], ...], ...]:
        return tuple(tuple(tuple(it) for it in rank) for rank in compute[key])

    return ComputeProfile(
        forward=per_rank("forward_s"),
        backward=per_rank("backward_s"),
        optimizer=per_rank("optimizer_s"),
        ddp_bucket_ready_s=ready("ddp_bucket_ready_s"),
        gossip_bucket_ready_s=ready("gossip_bucket_ready_s"),
        gossip_step=per_rank("gossip_step_s") if compute.get("gossip_step_s") else None,
        ddp_wrapped=tuple(per_rank(k) for k in DDP_WRAPPED_KEYS) if compute.get(DDP_WRAPPED_KEYS[0]) else None,
    )

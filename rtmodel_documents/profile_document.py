"""The profile document as frozen dataclasses, both ways: the profiler (and calibration's synthetic
profiles) builds these and writes `to_json()`; calibration reads through `from_json()`, which checks
every key and value and raises ProfileError with one line naming the field.

Why typed both ways: written as nested dicts by one side and re-validated by hand on the other, a key
renamed by the writer failed only in the reader, on someone's cluster. Now the writer's own unit test
round-trips what it writes through the reader (tests/test_profile_schema.py).

Absent and null: a field added to the schema after profiles were first written
(profile_checks.OPTIONAL_KEYS) is left out by to_json when it is None, so a document reads back as
written; the others are always written (null where unknown). Numbers keep the type they were written
with (lists become tuples). The communication section's classes are rtmodel_documents.profile_communication's
(importable from here too).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from rtmodel_documents import profile_checks as ck
from rtmodel_documents.profile_checks import ProfileError, Times, fail, frozen
from rtmodel_documents.profile_communication import (
    InFlightResult,
    PatternResult,
    ProfileCommunication,
    ProfilePattern,
)
from rtmodel_documents.profile_schema import (
    CHECKPOINT_SECTIONS,
    DDP_WRAPPED_KEYS,
    KIND,
    LINK_CLASSES,
    REQUIRED_SECTIONS,
    SCHEMA_VERSION,
    utc_now,
)
from runtime_model.core.document_header import LEGACY, SCHEMA_KEY, HeaderError, check_header, document_header

__all__ = [
    "InFlightResult", "PatternResult", "ProfileCommunication", "ProfileCompute", "ProfileDocument", "ProfilePattern",
    "ProfileShape", "ProfileWorkload", "frozen", "new_document",
]  # fmt: skip
PerRank = tuple[Times, ...]  # rank -> measured iteration
ReadyTimes = tuple[tuple[Times, ...], ...]  # rank -> measured iteration -> bucket


@dataclass(frozen=True, kw_only=True)
class ProfileShape(ck.Section):
    """Who ran: ranks, nodes, backend, device, library versions, and links the profile could not measure."""

    LABEL: ClassVar[str] = "a profile's shape"
    world_size: int
    ranks_per_node: int
    nodes: int
    node_names: tuple[str, ...] | None = None
    backend: str | None = None
    device: str | None = None
    device_name: str | None = None
    torch_version: str | None = None
    nccl_version: str | None = None
    unmeasured_links: dict[str, str] | None = None  # link class -> why not measured; None: before it was kept
    nccl_algo_env: str | None = None  # NCCL_ALGO as the ranks saw it; written (null: unset) on NCCL only

    def _write_null(self, name: str) -> bool:
        return name == "nccl_algo_env" and self.backend == "nccl"

    @classmethod
    def from_json(cls, doc: Any, origin: str) -> ProfileShape:
        d = ck.as_object(doc, origin, "shape")
        n = ck.require_int(d.get("world_size"), "shape.world_size", origin)
        k = ck.require_int(d.get("ranks_per_node"), "shape.ranks_per_node", origin)
        m = ck.require_int(d.get("nodes"), "shape.nodes", origin)
        if n != k * m:
            raise ProfileError(
                f"{origin}: shape says world_size {n} but nodes {m} x ranks_per_node {k} = {k * m}"
            )
        algo = d.get("nccl_algo_env")  # optional: profiles before it lack it (NCCL's own choice assumed)
        if algo is not None and not isinstance(algo, str):
            raise fail(origin, "shape.nccl_algo_env", f"must be NCCL_ALGO's text or null, got {algo!r}")
        names = d.get("node_names")
        text = {
            key: ck.optional_text(d.get(key), f"shape.{key}", origin)
            for key in ("backend", "device", "device_name", "torch_version", "nccl_version")
        }
        values = dict(
            world_size=n,
            ranks_per_node=k,
            nodes=m,
            **text,
            nccl_algo_env=algo,
            node_names=None if names is None else ck.texts(names, "shape.node_names", origin),
            unmeasured_links=_links(d.get("unmeasured_links"), origin),
        )
        ck.known_keys(d, cls, origin, "shape")
        return cls(**values)


def _links(marks: Any, origin: str) -> dict[str, str] | None:
    """shape.unmeasured_links: optional (profiles before it lack it: every link measured)."""
    if marks is None:
        return None
    if not isinstance(marks, dict) or any(
        cls not in LINK_CLASSES or not isinstance(why, str) or not why.strip() or len(why) > 500
        for cls, why in marks.items()
    ):
        raise fail(
            origin,
            "shape.unmeasured_links",
            f"must map link classes ({', '.join(LINK_CLASSES)}) to why each was not measured (a sentence of at "
            f"most 500 characters), got {ascii(marks)[:200]}",
        )
    return dict(marks)


@dataclass(frozen=True, kw_only=True)
class ProfileWorkload(ck.Section):
    """What was trained: enough to train it again, and its gradient buckets (bytes, in launch order)."""

    LABEL: ClassVar[str] = "a profile's workload"
    model: str | None = None
    model_args: dict[str, Any] | None = None
    batch_per_rank: int | None = None  # None (or 0) in profiles from before it was recorded
    precision: str | None = None
    optimizer: str | None = None
    param_bytes: int | None = None
    bucket_cap_mb: float | None = None
    ddp_first_bucket_mb: float | None = None
    ddp_buckets_bytes: tuple[int, ...]
    gossip_buckets_bytes: tuple[int, ...]

    @classmethod
    def from_json(cls, doc: Any, origin: str) -> ProfileWorkload:
        d = ck.as_object(doc, origin, "workload")
        sizes = {
            key: ck.bucket_sizes(d.get(key), f"workload.{key}", origin)
            for key in ("ddp_buckets_bytes", "gossip_buckets_bytes")
        }
        args = d.get("model_args")
        if args is not None and not isinstance(args, dict):
            raise fail(origin, "workload.model_args", "must be an object of model arguments")
        batch = d.get("batch_per_rank")
        if batch:  # absent (older profiles) is allowed; validation asks for it
            ck.require_int(batch, "workload.batch_per_rank", origin)
        cap = d.get("bucket_cap_mb")
        if cap and (not ck.is_number(cap) or not 0 < cap < float("inf")):
            raise fail(origin, "workload.bucket_cap_mb", f"must be a positive number of MB, got {cap!r}")
        text = {
            key: ck.optional_text(d.get(key), f"workload.{key}", origin)
            for key in ("model", "precision", "optimizer")
        }
        values = dict(
            **text,
            **sizes,
            model_args=args,
            batch_per_rank=batch,
            bucket_cap_mb=cap,
            param_bytes=ck.optional_int(d.get("param_bytes"), "workload.param_bytes", origin),
            ddp_first_bucket_mb=ck.optional_number(
                d.get("ddp_first_bucket_mb"), "workload.ddp_first_bucket_mb", origin
            ),
        )
        ck.known_keys(d, cls, origin, "workload")
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class ProfileCompute(ck.Section):
    """Per rank and measured iteration: the phases, the bucket ready times, and what the wrapped runs timed."""

    LABEL: ClassVar[str] = "a profile's compute"
    warmup: int | None = None
    iterations: int | None = None
    forward_s: PerRank
    backward_s: PerRank
    optimizer_s: PerRank
    ddp_bucket_ready_s: ReadyTimes
    gossip_bucket_ready_s: ReadyTimes
    ddp_forward_s: PerRank | None = None  # the phases under DDP with its exchanges skipped (all or none)
    ddp_backward_s: PerRank | None = None
    ddp_optimizer_s: PerRank | None = None
    gossip_step_s: PerRank | None = None  # Decent-DP's per-bucket work; None: not measured
    # what the DDP run held (profiler/compute_memory.py); None: not measured, or a profile from before it
    peak_memory_bytes: tuple[int, ...] | None = None  # per rank
    peak_memory_source: str | None = None
    device_memory_bytes: tuple[int, ...] | None = None  # per rank: what its device holds
    ddp_bucket_view: bool | None = None

    @classmethod
    def from_json(
        cls, doc: Any, origin: str, world_size: int | None = None, buckets: tuple[int, int] | None = None
    ) -> ProfileCompute:
        """Checked against the shape's world size and the workload's (DDP, gossip) bucket counts when given."""
        d = ck.as_object(doc, origin, "compute")
        phases = {"forward_s": _phase(d.get("forward_s"), "forward_s", world_size, origin)}
        ranks = len(phases["forward_s"])  # the shape's world size when given, which it then matches
        phases.update(
            {
                key: _phase(d.get(key), key, world_size or ranks, origin)
                for key in ("backward_s", "optimizer_s")
            }
        )
        for r, (fwd, bwd) in enumerate(zip(phases["forward_s"], phases["backward_s"], strict=True)):
            if len(fwd) != len(bwd):
                raise fail(
                    origin,
                    f"compute.forward_s[{r}]",
                    f"has {len(fwd)} iterations but backward_s has {len(bwd)}",
                )
            if not sum(fwd) + sum(bwd) > 0:
                raise ProfileError(
                    f"{origin}: compute.forward_s[{r}]: rank {r}'s forward and backward took 0 s in "
                    "every iteration; a training step takes time (re-profile)"
                )
        optional = {
            key: None if d.get(key) is None else ck.rows_per_rank(d[key], f"compute.{key}", origin, ranks)
            for key in ("gossip_step_s", *DDP_WRAPPED_KEYS)
        }
        present = [key for key in DDP_WRAPPED_KEYS if optional[key] is not None]  # null is not measured
        if present and len(present) < len(DDP_WRAPPED_KEYS):
            missing = ", ".join(f"compute.{k}" for k in DDP_WRAPPED_KEYS if k not in present)
            raise fail(
                origin, f"compute.{present[0]}", f"comes without {missing} (absent or null; re-profile)"
            )
        iterations = [len(t) for t in phases["backward_s"]]
        counts = buckets or (None, None)
        ready = {
            key: _ready(d.get(key), key, iterations, n, origin)
            for key, n in zip(("ddp_bucket_ready_s", "gossip_bucket_ready_s"), counts, strict=True)
        }
        counts = {
            key: ck.optional_int(d.get(key), f"compute.{key}", origin) for key in ("warmup", "iterations")
        }
        memory = _memory(d, ranks, origin)
        ck.known_keys(d, cls, origin, "compute")
        return cls(**phases, **ready, **optional, **counts, **memory)


def _memory(d: dict, ranks: int, origin: str) -> dict:
    """The DDP run's memory fields, each optional (profiles before them lack them): byte counts one per
    rank, integers >= 1 (their bound against the device: rtmodel_documents.profile_bounds), a text, a boolean."""
    out: dict[str, Any] = {}
    for key in ("peak_memory_bytes", "device_memory_bytes"):
        rows = d.get(key)
        if rows is not None and (not isinstance(rows, list) or len(rows) != ranks):
            raise fail(
                origin,
                f"compute.{key}",
                f"must hold one byte count per rank ({ranks}), got {ck.brief_value(rows)}",
            )
        out[key] = None
        if rows is not None:
            out[key] = tuple(ck.require_int(v, f"compute.{key}[{r}]", origin) for r, v in enumerate(rows))
    source = d.get("peak_memory_source")
    out["peak_memory_source"] = ck.optional_text(source, "compute.peak_memory_source", origin)
    view = d.get("ddp_bucket_view")
    if view is not None and not isinstance(view, bool):
        raise fail(
            origin, "compute.ddp_bucket_view", f"must be true, false or null, got {ck.brief_value(view)}"
        )
    out["ddp_bucket_view"] = view
    return out


def _phase(per_rank: Any, key: str, world_size: int | None, origin: str) -> PerRank:
    if not isinstance(per_rank, list) or not per_rank:
        raise fail(origin, f"compute.{key}", "is missing (one list of times per rank expected)")
    if world_size is not None and len(per_rank) != world_size:
        raise fail(origin, f"compute.{key}", f"has {len(per_rank)} ranks but world_size is {world_size}")
    return tuple(ck.times(t, f"compute.{key}[{r}]", origin) for r, t in enumerate(per_rank))


def _ready(per_rank: Any, key: str, iterations: list[int], n_buckets: int | None, origin: str) -> ReadyTimes:
    """Per rank, per measured iteration, each bucket's ready time (s from the start of backward)."""
    if not isinstance(per_rank, list) or len(per_rank) != len(iterations):
        raise fail(origin, f"compute.{key}", f"must hold one list per rank ({len(iterations)})")
    out = []
    for r, per_iter in enumerate(per_rank):
        if not isinstance(per_iter, list) or len(per_iter) != iterations[r]:
            raise fail(
                origin, f"compute.{key}[{r}]", f"must hold one entry per measured iteration ({iterations[r]})"
            )
        rows = []
        for i, ready in enumerate(per_iter):
            rows.append(ck.times(ready, f"compute.{key}[{r}][{i}]", origin))
            if n_buckets is not None and len(ready) != n_buckets:
                raise fail(
                    origin,
                    f"compute.{key}[{r}][{i}]",
                    f"has {len(ready)} buckets but the workload lists {n_buckets}",
                )
        out.append(tuple(rows))
    return tuple(out)


SECTIONS = {
    "shape": ProfileShape,
    "workload": ProfileWorkload,
    "compute": ProfileCompute,
    "communication": ProfileCommunication,
}
HEADER_KEYS = frozenset({SCHEMA_KEY, *LEGACY[KIND]})


@dataclass(frozen=True, kw_only=True)
class ProfileDocument:
    """A whole profile, or a checkpoint of one (complete False: the sections in sections_done are final)."""

    created_utc: str | None = None
    complete: bool = False
    sections_done: tuple[str, ...] = ()
    shape: ProfileShape | None = None
    workload: ProfileWorkload | None = None
    compute: ProfileCompute | None = None
    communication: ProfileCommunication | None = None

    def to_json(self) -> dict:
        """The document as the profiler writes it: the header, then every field (sections once present)."""
        out: dict[str, Any] = {
            **document_header(KIND, SCHEMA_VERSION),
            "created_utc": self.created_utc,
            "complete": self.complete,
            "sections_done": list(self.sections_done),
        }
        for name in SECTIONS:
            section = getattr(self, name)
            if section is not None:
                out[name] = section.to_json()
        return out

    def done(self, section: str) -> ProfileDocument:
        """This document with `section` listed as finished (once)."""
        if section in self.sections_done:
            return self
        return replace(self, sections_done=(*self.sections_done, section))

    @classmethod
    def from_json(cls, doc: Any, origin: str = "profile", need_complete: bool = False) -> ProfileDocument:
        """The checked document; ProfileError (one line naming the key) when it is not a usable profile.

        need_complete: refuse a checkpoint (complete false) with what to run to finish it; a complete
        document must hold every section. A checkpoint holds the sections written so far."""
        try:
            check_header(doc, KIND, SCHEMA_VERSION, "rtmodel profile")
        except HeaderError as exc:
            raise ProfileError(f"{origin} {exc}") from None
        complete = doc.get("complete", False)
        if not isinstance(complete, bool):
            raise fail(origin, "complete", f"must be true or false, got {complete!r}")
        done = ck.texts(doc.get("sections_done") or [], "sections_done", origin)
        if need_complete and not complete:
            missing = [s for s in CHECKPOINT_SECTIONS if s not in done]
            raise ProfileError(
                f"{origin} is an incomplete profile (sections missing: {', '.join(missing) or 'none listed'}; "
                f"done: {', '.join(done) or 'none'}); finish it with `rtmodel profile --resume {shlex.quote(origin)}` "
                "and the options of the run that started it"
            )
        for name in SECTIONS:
            present = doc.get(name) is not None
            if (complete and name in REQUIRED_SECTIONS or present) and not isinstance(doc.get(name), dict):
                raise ProfileError(
                    f"{origin}: section {name!r} is missing (the profile is unusable; re-profile)"
                )
        created = ck.optional_text(doc.get("created_utc"), "created_utc", origin)
        sections = _sections(doc, origin)
        for key in doc:
            if key not in HEADER_KEYS and key not in {f.name for f in fields(cls)}:
                raise fail(
                    origin,
                    key,
                    "is not a field of a profile (was the key renamed, or the profile "
                    "written by a newer rtmodel?)",
                )
        return cls(created_utc=created, complete=complete, sections_done=done, **sections)


def _sections(doc: dict, origin: str) -> dict:
    """The present sections, each checked against those it depends on (compute and communication
    against the shape, compute against the workload's bucket counts)."""
    shape = ProfileShape.from_json(doc["shape"], origin) if doc.get("shape") is not None else None
    workload = ProfileWorkload.from_json(doc["workload"], origin) if doc.get("workload") is not None else None
    out: dict[str, Any] = {"shape": shape, "workload": workload}
    if doc.get("compute") is not None:
        buckets = (len(workload.ddp_buckets_bytes), len(workload.gossip_buckets_bytes)) if workload else None
        out["compute"] = ProfileCompute.from_json(doc["compute"], origin, shape and shape.world_size, buckets)
    if doc.get("communication") is not None:
        out["communication"] = ProfileCommunication.from_json(doc["communication"], origin, shape)
    return out


def new_document(created_utc: str | None = None) -> ProfileDocument:
    """A profile before any section: every writer (the profiler, synthetic profiles) starts here."""
    return ProfileDocument(created_utc=created_utc or utc_now())

"""The profile's communication section as frozen dataclasses, both ways (rtmodel_documents.profile_document
holds the document and its other sections): every pattern the profiler ran, per message size the
all-reduce's time over all groups and each group's own; and the training's own buckets timed one after
another and all in flight (InFlightResult).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, ClassVar

from rtmodel_documents import profile_checks as ck
from rtmodel_documents.profile_checks import ProfileError, Times, fail
from rtmodel_documents.profile_patterns import PATTERN_NAMES
from runtime_model.core.scenario import GroupShape


@dataclass(frozen=True, kw_only=True)
class PatternResult(ck.Section):
    """One message size of one pattern: per repetition the max over every rank of every group, and per
    group the max over its own ranks."""

    LABEL: ClassVar[str] = "a pattern's result"
    bytes: int
    samples_s: Times
    group_samples_s: tuple[Times, ...] | None = None  # None: profiles from before it was kept
    median_s: float | None = None
    algbw_Bps: float | None = None
    busbw_Bps: float | None = None

    @classmethod
    def from_json(cls, doc: Any, origin: str, path: str, size: int, world: int | None) -> PatternResult:
        d = ck.as_object(doc, origin, path)
        nbytes = ck.require_int(d.get("bytes"), f"{path}.bytes", origin, maximum=ck.MAX_BYTES)
        samples = ck.times(d.get("samples_s"), f"{path}.samples_s", origin, positive=True)
        per_group = d.get("group_samples_s")  # optional: profiles before it lack it
        if per_group is not None:
            if not isinstance(per_group, list) or not per_group:
                raise fail(origin, f"{path}.group_samples_s", "must be a non-empty list")
            if world is not None and len(per_group) > world // size:
                raise fail(
                    origin,
                    f"{path}.group_samples_s",
                    f"names {len(per_group)} groups of {size} ranks; the "
                    f"profile's {world} ranks hold at most {world // size}",
                )
            per_group = tuple(
                ck.times(t, f"{path}.group_samples_s[{g}]", origin, positive=True)
                for g, t in enumerate(per_group)
            )
        stats = {
            key: ck.optional_number(d.get(key), f"{path}.{key}", origin)
            for key in ("median_s", "algbw_Bps", "busbw_Bps")
        }
        ck.known_keys(d, cls, origin, path)
        return cls(bytes=nbytes, samples_s=samples, group_samples_s=per_group, **stats)

    @property
    def own_group_s(self) -> Times:
        """What one rank waits for: its own group's times while the other groups run, every group's
        pooled (profiles before group_samples_s recorded only the max over all groups, an upper bound)."""
        if self.group_samples_s is None:
            return self.samples_s
        return tuple(t for times in self.group_samples_s for t in times)


@dataclass(frozen=True, kw_only=True)
class ProfilePattern(ck.Section):
    """All-reduce times of one pattern (rtmodel_documents.profile_patterns), every group at once, per size."""

    LABEL: ClassVar[str] = "a communication pattern"
    pattern: str
    group_size: int
    nodes_spanned: int
    nic_sharing: int
    concurrent_groups: int | None = None
    groups: tuple[tuple[int, ...], ...] | None = None
    results: tuple[PatternResult, ...]
    same_as: str | None = None  # the earlier pattern with the same groups, measured once

    @classmethod
    def from_json(cls, doc: Any, origin: str, where: str, shape: Any) -> ProfilePattern:
        d = ck.as_object(doc, origin, where)
        world, nodes, per_node = (
            (shape.world_size, shape.nodes, shape.ranks_per_node) if shape else (None,) * 3
        )
        name = d.get("pattern")
        if name not in PATTERN_NAMES:
            raise fail(origin, f"{where}.pattern", f"is {name!r}; known: {', '.join(PATTERN_NAMES)}")
        size = ck.require_int(d.get("group_size"), f"{where}.group_size", origin, minimum=2, maximum=world)
        spans = ck.require_int(d.get("nodes_spanned"), f"{where}.nodes_spanned", origin, maximum=nodes)
        q = ck.require_int(d.get("nic_sharing"), f"{where}.nic_sharing", origin, maximum=per_node)
        if spans > size:
            raise fail(origin, where, f"spans {spans} nodes with only {size} ranks")
        groups = ck.optional_int(d.get("concurrent_groups"), f"{where}.concurrent_groups", origin, minimum=1)
        if groups is not None and world is not None and groups * size > world:
            raise ProfileError(
                f"{origin}: {where}: {groups} groups of {size} ranks need {groups * size} ranks; "
                f"the profile has {world}"
            )
        results = d.get("results")
        if not isinstance(results, list) or not results:
            raise ProfileError(f"{ck.where(origin, where)}.results is missing or empty ({name})")
        values = dict(
            pattern=name,
            group_size=size,
            nodes_spanned=spans,
            nic_sharing=q,
            concurrent_groups=groups,
            groups=_group_lists(d.get("groups"), f"{where}.groups", origin, world),
            results=tuple(
                PatternResult.from_json(r, origin, f"{where}.results[{i}]", size, world)
                for i, r in enumerate(results)
            ),
            same_as=ck.optional_text(d.get("same_as"), f"{where}.same_as", origin),
        )
        ck.known_keys(d, cls, origin, where)
        return cls(**values)

    @property
    def group(self) -> GroupShape:
        """Where one of the pattern's groups sits, in the model's terms: what its all-reduce costs."""
        return GroupShape(self.group_size, self.nodes_spanned, self.nic_sharing)


def _group_lists(
    groups: Any, path: str, origin: str, world: int | None
) -> tuple[tuple[int, ...], ...] | None:
    if groups is None:
        return None
    top = (world - 1) if world else None
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        raise fail(origin, path, "must be a list of rank lists")
    return tuple(
        tuple(ck.require_int(r, f"{path}[{i}]", origin, 0, top) for r in g) for i, g in enumerate(groups)
    )


@dataclass(frozen=True, kw_only=True)
class InFlightResult(ck.Section):
    """One pattern's buckets all-reduced two ways, every group at once: one after another, each waited
    for (what the model charges: serial_allreduces_s) and all in flight (`async_op`, as DDP and
    Decent-DP issue them); per repetition the max over every rank. Why: gloo works two collectives at
    once, and where one transfer is bound by the host (a TCP stream through the CPU) rather than a
    link, two in flight move more bytes per second; the ratio says by how much (docs/profiling.md).

    two_groups_s: the same buckets in flight, alternately on the pattern's groups and on a second set of
    groups of the same ranks. Why: Decent-DP gives every round's group a process group of its own, and
    gloo gives each its own connections and worker threads, so the exchanges of consecutive rounds on
    different groups run at once (absent: profiles from before it was measured)."""

    LABEL: ClassVar[str] = "an in-flight result"
    pattern: str
    buckets_bytes: tuple[int, ...]
    one_at_a_time_s: Times
    in_flight_s: Times
    two_groups_s: Times | None = None

    @classmethod
    def from_json(cls, doc: Any, origin: str, where: str) -> InFlightResult:
        d = ck.as_object(doc, origin, where)
        name = d.get("pattern")
        if name not in PATTERN_NAMES:
            raise fail(origin, f"{where}.pattern", f"is {name!r}; known: {', '.join(PATTERN_NAMES)}")
        buckets = d.get("buckets_bytes")
        if not isinstance(buckets, list) or not buckets:
            raise fail(origin, f"{where}.buckets_bytes", "must be a non-empty list of bucket sizes")
        serial = ck.times(d.get("one_at_a_time_s"), f"{where}.one_at_a_time_s", origin, positive=True)
        together = _paired_times(d, "in_flight_s", ("one_at_a_time_s", serial), origin, where)
        two = None
        if d.get("two_groups_s") is not None:
            two = _paired_times(d, "two_groups_s", ("in_flight_s", together), origin, where)
        values = dict(
            pattern=name,
            buckets_bytes=tuple(
                ck.require_int(b, f"{where}.buckets_bytes[{i}]", origin, maximum=ck.MAX_BYTES)
                for i, b in enumerate(buckets)
            ),
            one_at_a_time_s=serial,
            in_flight_s=together,
            two_groups_s=two,
        )
        ck.known_keys(d, cls, origin, where)
        return cls(**values)

    @property
    def gain(self) -> float:
        """How many times the one-at-a-time rate the buckets moved in flight (medians of both)."""
        return _median_ratio(self.one_at_a_time_s, self.in_flight_s)

    @property
    def group_gain(self) -> float | None:
        """How many times one group's in-flight rate the buckets moved over two groups (medians of both);
        None where not measured."""
        if self.two_groups_s is None:
            return None
        return _median_ratio(self.in_flight_s, self.two_groups_s)

    @property
    def whose(self) -> str:
        return in_flight_owner(self.pattern)


def _paired_times(d: dict, key: str, other: tuple[str, tuple], origin: str, where: str) -> tuple:
    """The timings under `key`, checked, with as many repetitions as `other` (name, values): each
    repetition times both, so calibrate pairs them."""
    values = ck.times(d.get(key), f"{where}.{key}", origin, positive=True)
    name, paired = other
    if len(values) != len(paired):
        raise fail(
            origin,
            f"{where}.{key}",
            f"has {len(values)} repetitions, {name} {len(paired)}: each repetition times both",
        )
    return values


def _median_ratio(slower: tuple, faster: tuple) -> float:
    return statistics.median(slower) / statistics.median(faster)


def in_flight_owner(pattern: str) -> str:
    """Whose buckets the profiler times in flight on `pattern`: DDP's on all ranks, Decent-DP's on pairs."""
    return "DDP's" if pattern == "all" else "Decent-DP's"


@dataclass(frozen=True, kw_only=True)
class ProfileCommunication(ck.Section):
    """The message sizes, how often each was timed, and every pattern measured."""

    LABEL: ClassVar[str] = "a profile's communication"
    sizes_bytes: tuple[int, ...] | None = None
    reps: int | None = None
    warmup_reps: int | None = None
    patterns: tuple[ProfilePattern, ...]
    in_flight: tuple[InFlightResult, ...] | None = None  # None: profiles from before it was measured

    @classmethod
    def from_json(cls, doc: Any, origin: str, shape: Any = None) -> ProfileCommunication:
        """Every group must exist in the profiled shape (no rank beyond world_size, no node beyond its nodes,
        no more ranks sharing a NIC than a node holds) when the shape (a ProfileShape) is given."""
        d = ck.as_object(doc, origin, "communication")
        patterns = d.get("patterns")
        if not isinstance(patterns, list) or not patterns:
            raise ProfileError(
                f"{origin}: communication.patterns is missing or empty (nothing to fit; re-profile)"
            )
        sizes = d.get("sizes_bytes")
        if sizes is not None:
            if not isinstance(sizes, list):
                raise fail(origin, "communication.sizes_bytes", "must be a list of message sizes")
            sizes = tuple(
                ck.require_int(s, f"communication.sizes_bytes[{i}]", origin, maximum=ck.MAX_BYTES)
                for i, s in enumerate(sizes)
            )
        values = dict(
            sizes_bytes=sizes,
            reps=ck.optional_int(d.get("reps"), "communication.reps", origin),
            warmup_reps=ck.optional_int(d.get("warmup_reps"), "communication.warmup_reps", origin),
            patterns=tuple(
                ProfilePattern.from_json(p, origin, f"communication.patterns[{j}]", shape)
                for j, p in enumerate(patterns)
            ),
            in_flight=_in_flight(d.get("in_flight"), origin),
        )
        ck.known_keys(d, cls, origin, "communication")
        return cls(**values)


def _in_flight(entries: Any, origin: str) -> tuple[InFlightResult, ...] | None:
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise fail(origin, "communication.in_flight", "must be a list of in-flight results")
    return tuple(
        InFlightResult.from_json(e, origin, f"communication.in_flight[{i}]") for i, e in enumerate(entries)
    )

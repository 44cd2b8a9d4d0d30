"""The checks a profile's fields pass on the way in (rtmodel_documents.profile_document's from_json), each
failing with ONE line that names the field: "profile.json: compute.forward_s[0][4] is negative (...)".

Why one line naming the key: a profile comes from a long run on someone's cluster; when it is broken
the user needs to know which field and what to do, not a KeyError from deep inside a fit. The error
classes live here, below calibration, because the schema's own reader raises them.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from rtmodel_documents.profile_schema import DDP_WRAPPED_KEYS
from runtime_model.core.errors import UserError
from runtime_model.core.physical_bounds import MAX_BUFFER_BYTES, MAX_EXACT_COUNT, MAX_STEP_S


class CalibrationError(UserError):
    """A profile or calibration request that cannot work as given."""


class ProfileError(CalibrationError):
    """The profile document cannot be used (missing, corrupt, wrong tool or version, bad numbers)."""


# What a real profile can hold. A step or a collective that takes more than a day was not measured (and
# 1e300 s overflows the model into NaN verdicts); a message or bucket over 2^40 bytes (1 TiB) is more than
# any GPU's memory holds (the largest hold 288 GB); a count (ranks, iterations, repetitions, a batch)
# beyond 2^53 is no run's (a float64 holds every integer up to it, and 10^400 overflows one).
MAX_TIME_S = MAX_STEP_S
MAX_BYTES = MAX_BUFFER_BYTES
MAX_COUNT = MAX_EXACT_COUNT
# A number a profile records beside its samples (a median, a bandwidth, a bucket cap in MB): finite and
# at most 1e15 (a bandwidth in bytes/s of 1 PB/s is 100x any link; a cap of 1e15 MB is no cap).
MAX_NUMBER = 1e15
Times = tuple[float, ...]  # one list of measured times, as the profile's dataclasses hold it


def where(origin: str, path: str) -> str:
    return f"{origin}: {path}"


def fail(origin: str, path: str, why: str) -> ProfileError:
    return ProfileError(f"{where(origin, path)} {why}")


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def as_object(doc: Any, origin: str, path: str) -> dict:
    if not isinstance(doc, dict):
        raise fail(origin, path, "must be an object")
    return doc


def known_keys(doc: dict, cls, origin: str, path: str) -> None:
    """Every key of `doc` is a field of `cls` (its LABEL names it in words): a renamed or foreign key
    fails here, named. Checked after the values, so a bad value is named before a stray key."""
    names = {f.name for f in fields(cls)}
    for key in doc:
        if key not in names:
            raise fail(
                origin,
                f"{path}.{key}",
                f"is not a field of {cls.LABEL} (known: {', '.join(sorted(names))}); "
                "was the key renamed, or the profile written by a newer rtmodel?",
            )


def brief_value(value: Any, width: int = 60) -> str:
    """A value as a refusal of a measured document shows it: short, ASCII, a long integer by its digits
    (profiles here; traces too, trace_document). Not rtmodel_util.shown: this one shortens a value."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**16:
        return f"an integer of {len(str(abs(value)))} digits"
    text = ascii(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def require_int(value: Any, path: str, origin: str, minimum: int = 1, maximum: int | None = None) -> int:
    top = MAX_COUNT if maximum is None else min(maximum, MAX_COUNT)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_COUNT:
        raise fail(origin, path, f"must be an integer in [{minimum:,}, {top:,}], got {brief_value(value)}")
    if not is_number(value) or not math.isfinite(value) or int(value) != value or value < minimum:
        raise fail(origin, path, f"must be an integer >= {minimum}, got {brief_value(value)}")
    if value > top:
        raise fail(origin, path, f"must be at most {top:,}, got {brief_value(value)}")
    return int(value)


def optional_int(
    value: Any, path: str, origin: str, minimum: int = 0, maximum: int | None = None
) -> int | None:
    return None if value is None else require_int(value, path, origin, minimum, maximum)


def optional_number(value: Any, path: str, origin: str) -> float | int | None:
    """A number or null; a number finite and within MAX_NUMBER either way."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
        raise fail(origin, path, f"must be a finite number within {MAX_NUMBER:g}, got {brief_value(value)}")
    if not is_number(value) or not math.isfinite(value) or abs(value) > MAX_NUMBER:
        raise fail(
            origin, path, f"must be a finite number within {MAX_NUMBER:g} or null, got {brief_value(value)}"
        )
    return value


def optional_text(value: Any, path: str, origin: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise fail(origin, path, f"must be a string or null, got {ascii(value)[:80]}")
    return value


def texts(value: Any, path: str, origin: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(origin, path, f"must be a list of strings, got {ascii(value)[:80]}")
    return tuple(value)


def check_time(value: Any, path: str, origin: str, positive: bool) -> None:
    if not is_number(value):
        raise fail(origin, path, f"is not a number ({brief_value(value)}); times must be numbers in seconds")
    if isinstance(value, int) and abs(value) > MAX_TIME_S:  # before a float of it could overflow
        why = (
            "negative; times must be >= 0 s"
            if value < 0
            else "more than a day; not a measured time (re-profile)"
        )
        raise fail(origin, path, f"is {brief_value(value)} s, {why}")
    if math.isnan(value):
        raise fail(origin, path, "is NaN; times must be finite numbers of seconds")
    if math.isinf(value):
        raise fail(origin, path, "is infinite; times must be finite numbers of seconds")
    if value < 0:
        raise fail(origin, path, f"is negative ({value}); times must be >= 0 s")
    if value > MAX_TIME_S:
        raise fail(origin, path, f"is {value:g} s, more than a day; not a measured time (re-profile)")
    if positive and value == 0:
        raise fail(origin, path, "is 0; a measured collective takes > 0 s")


def times(values: Any, path: str, origin: str, positive: bool = False) -> tuple[float, ...]:
    """A non-empty list of valid times, as a tuple (the numbers as written)."""
    if not isinstance(values, list) or not values:
        raise fail(origin, path, "must be a non-empty list of times")
    for i, v in enumerate(values):
        check_time(v, f"{path}[{i}]", origin, positive)
    return tuple(values)


def rows_per_rank(rows: Any, path: str, origin: str, world_size: int | None) -> tuple[tuple[float, ...], ...]:
    """One non-empty list of times per rank (an optional phase: callers pass only a present value)."""
    if not isinstance(rows, list) or not rows or (world_size is not None and len(rows) != world_size):
        raise fail(origin, path, f"must hold one list per rank ({world_size})")
    return tuple(times(t, f"{path}[{r}]", origin) for r, t in enumerate(rows))


def bucket_sizes(sizes: Any, path: str, origin: str) -> tuple[int, ...]:
    if not isinstance(sizes, list) or not sizes:
        raise fail(origin, path, "must be a non-empty list of bucket sizes")
    return tuple(require_int(s, f"{path}[{i}]", origin, maximum=MAX_BYTES) for i, s in enumerate(sizes))


# ----------------------------------------------------------------------------- to_json of the sections

OPTIONAL_KEYS = frozenset({
    "device_name", "unmeasured_links", "nccl_algo_env", "precision", "optimizer", "ddp_first_bucket_mb",
    *DDP_WRAPPED_KEYS, "gossip_step_s", "reps", "warmup_reps", "groups", "same_as", "group_samples_s", "in_flight",
    "two_groups_s", "peak_memory_bytes", "peak_memory_source", "device_memory_bytes", "ddp_bucket_view",
})  # fmt: skip


def frozen(value: Any) -> Any:
    """Nested lists as nested tuples (what the dataclasses hold): for writers building them from lists."""
    return tuple(frozen(v) for v in value) if isinstance(value, list | tuple) else value


def plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_json()
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Section:
    """to_json for every section of the profile (rtmodel_documents.profile_document): its fields in order,
    OPTIONAL_KEYS left out when None (unless _write_null says the writer writes it null)."""

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name in OPTIONAL_KEYS and not self._write_null(f.name):
                continue
            out[f.name] = plain(value)
        return out

    def _write_null(self, name: str) -> bool:
        return False

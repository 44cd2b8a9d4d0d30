"""The profile document (schema v1, see notes): building, atomic checkpoints, resume decisions.

Why checkpoints: a profile of a big cluster takes a while and jobs get preempted. After each section
(and each communication pattern) rank 0 rewrites the whole file atomically (rtmodel_util.files) with complete=false and
the sections done so far; `--resume` keeps what an earlier run finished when it was taken on the same
shape and workload, and says clearly when it has to start over.
"""

from __future__ import annotations

from pathlib import Path

from rtmodel_util.json_document import DocumentError, parse_document
from rtmodel_util.profile_schema import (
    SCHEMA_VERSION,
    SHAPE_KEYS,
    TOOL,
    UNMEASURED_LINKS,
    WORKLOAD_KEYS,
    new_document,
)


def _differences(old: dict, new: dict, keys: tuple[str, ...], label: str) -> list[str]:
    out = []
    for k in keys:
        a, b = old.get(k), new.get(k)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, tuple(sorted(set(a) | set(b))), f"{label}.{k}")
        else:
            out.append(f"{label}.{k} {a!r} there, {b!r} now")
    return out


def check_resumable(path: str | Path, flag: str = "--resume") -> None:
    """ProfilingError (one line) when `path` exists and is not an rtmodel profile: resuming would
    overwrite it, and a typo naming README.md must not destroy README.md. A missing file is fine."""
    from profiler.errors import ProfilingError

    path = Path(path)
    if not path.exists():
        return
    why = None
    try:
        old = parse_document(path.read_text(encoding="utf-8"))
    except DocumentError as exc:
        why = f"it {exc}"
    except (OSError, UnicodeDecodeError) as exc:
        why = f"it is not readable JSON ({getattr(exc, 'strerror', None) or exc})"
    else:
        if not isinstance(old, dict) or old.get("tool") != TOOL:
            why = "it is not an rtmodel profile"
        elif old.get("schema_version") != SCHEMA_VERSION:
            why = f"it is a profile of schema {old.get('schema_version')!r}, not {SCHEMA_VERSION}"
    if why:
        raise ProfilingError(
            f"{flag} {path}: {why}, so there is nothing to resume and it was left untouched; "
            "name the profile an earlier run wrote, or start a new one with --out NEW_FILE"
        )


def resume_plan(path: str | Path, shape: dict, workload: dict, sizes: list[int]) -> tuple[dict | None, str]:
    """(document to continue or None, message for the user).

    The returned document keeps only what can be reused: finished compute, and communication
    patterns measured at the same message sizes."""
    path = Path(path)
    if not path.exists():
        return None, f"resume: no profile at {path} yet; starting a new one"
    check_resumable(path)
    old = parse_document(path.read_text(encoding="utf-8"))
    old_shape = old.get("shape") or {}
    # which links were real: a profile from before it was recorded says nothing, so nothing to compare
    marks = (UNMEASURED_LINKS,) if isinstance(old_shape, dict) and UNMEASURED_LINKS in old_shape else ()
    diffs = _differences(old_shape, shape, SHAPE_KEYS + marks, "shape")
    diffs += _differences(old.get("workload") or {}, workload, WORKLOAD_KEYS, "workload")
    if diffs:
        return None, f"resume: {path} was taken on a different setup ({'; '.join(diffs[:3])}); starting over"
    doc = new_document()
    doc["created_utc"] = old.get("created_utc", doc["created_utc"])
    kept = []
    if "compute" in old.get("sections_done", []) and isinstance(old.get("compute"), dict):
        doc["compute"] = old["compute"]
        kept.append("compute")
    comm = old.get("communication") or {}
    if comm.get("sizes_bytes") == sizes and comm.get("patterns"):
        doc["communication"] = {**comm, "patterns": list(comm["patterns"])}
        kept.append("communication patterns " + ", ".join(p["pattern"] for p in comm["patterns"]))
    if not kept:
        return doc, f"resume: {path} matches this setup but holds no finished measurements; measuring everything"
    return doc, f"resume: {path} matches this setup; keeping {'; '.join(kept)}"

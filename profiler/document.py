"""The profile document (rtmodel_documents.profile_document) on the profiler's side: resume decisions.

Why checkpoints: a profile of a big cluster takes a while and jobs get preempted. After each section
(and each communication pattern) rank 0 rewrites the whole file atomically (rtmodel_util.files) with complete=false and
the sections done so far; `--resume` keeps what an earlier run finished when it was taken on the same
shape and workload, and says clearly when it has to start over.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rtmodel_documents.profile_checks import ProfileError
from rtmodel_documents.profile_document import ProfileDocument, ProfileShape, ProfileWorkload, new_document
from rtmodel_documents.profile_schema import KIND, SCHEMA_VERSION, SHAPE_KEYS, UNMEASURED_LINKS, WORKLOAD_KEYS
from rtmodel_util.json_document import DocumentError, parse_document
from runtime_model.core.document_header import HeaderError, check_header


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
    """ProfilingError (one line) when `path` exists and is not an rtmodel profile this rtmodel reads
    (either header): resuming would overwrite it, and a typo naming README.md must not destroy README.md.
    A missing file is fine."""
    from profiler.errors import ProfilingError

    path = Path(path)
    if not path.exists():
        return
    why = None
    try:
        old = parse_document(path.read_text(encoding="utf-8"))
        check_header(old, KIND, SCHEMA_VERSION, "rtmodel profile")
    except (DocumentError, HeaderError) as exc:
        why = f"it {exc}"
    except (OSError, UnicodeDecodeError) as exc:
        why = f"it is not readable JSON ({getattr(exc, 'strerror', None) or exc})"
    if why:
        raise ProfilingError(
            f"{flag} {path}: {why}, so there is nothing to resume and it was left untouched; "
            "name the profile an earlier run wrote, or start a new one with --out NEW_FILE"
        )


def resume_plan(
    path: str | Path, shape: ProfileShape, workload: ProfileWorkload, sizes: list[int]
) -> tuple[ProfileDocument | None, str]:
    """(document to continue or None, message for the user).

    The returned document keeps only what can be reused: finished compute, and communication
    patterns measured at the same message sizes. An earlier profile that does not read as one
    (ProfileDocument.from_json) is started over, saying why."""
    path = Path(path)
    if not path.exists():
        return None, f"resume: no profile at {path} yet; starting a new one"
    check_resumable(path)
    try:
        old = ProfileDocument.from_json(parse_document(path.read_text(encoding="utf-8")), str(path))
    except ProfileError as exc:
        return None, f"resume: {exc}; starting over"
    old_shape = old.shape.to_json() if old.shape else {}
    # which links were real: a profile from before it was recorded says nothing, so nothing to compare
    marks = (UNMEASURED_LINKS,) if UNMEASURED_LINKS in old_shape else ()
    diffs = _differences(old_shape, shape.to_json(), SHAPE_KEYS + marks, "shape")
    old_workload = old.workload.to_json() if old.workload else {}
    diffs += _differences(old_workload, workload.to_json(), WORKLOAD_KEYS, "workload")
    if diffs:
        return None, f"resume: {path} was taken on a different setup ({'; '.join(diffs[:3])}); starting over"
    doc = new_document(old.created_utc)
    kept = []
    if "compute" in old.sections_done and old.compute is not None:
        doc = replace(doc, compute=old.compute)
        kept.append("compute")
    comm = old.communication
    if comm is not None and comm.sizes_bytes == tuple(sizes) and comm.patterns:
        doc = replace(doc, communication=comm)
        kept.append("communication patterns " + ", ".join(p.pattern for p in comm.patterns))
    if not kept:
        return doc, f"resume: {path} matches this setup but holds no finished measurements; measuring everything"
    return doc, f"resume: {path} matches this setup; keeping {'; '.join(kept)}"

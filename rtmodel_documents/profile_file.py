"""A profile file (rtmodel-profile/1, or the older tool/schema_version header) read whole and checked
before anything is fitted: the file, the document's fields (ProfileDocument.from_json), then the bounds
across them (rtmodel_documents.profile_bounds).

Why one reader: a profile comes from a long run on someone's cluster; when it is broken the user needs
ONE line that says what is wrong and what to do (rerun, --resume, other file), not a KeyError from deep
inside a fit. Calibration and validation read profiles only through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rtmodel_documents.profile_bounds import check_physics
from rtmodel_documents.profile_checks import ProfileError
from rtmodel_documents.profile_document import ProfileDocument


def read_profile(path: str | Path) -> ProfileDocument:
    """Read and check a whole profile file; ProfileError with one clear line when it is unusable."""
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
    return checked_profile(doc, str(p))


def checked_profile(doc: Any, origin: str = "profile") -> ProfileDocument:
    """A parsed profile document, checked as a whole profile (ProfileError, one line, when unusable)."""
    typed = ProfileDocument.from_json(doc, origin, need_complete=True)
    check_physics(typed, origin)
    return typed

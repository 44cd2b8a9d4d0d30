"""The one header of every JSON document rtmodel writes: `{"schema": "rtmodel-<kind>/<version>"}`.

Why one: the profile, the calibration, the advice, the presets and the validation record each named
their kind and version their own way (`tool` + `schema_version`, `format` + `version`, `kind` +
`version`, `schema`). Every writer now writes `schema` through `document_header`, and every reader asks
`check_header`, which also accepts the older forms (`LEGACY`): files written before keep loading. A
document newer than this rtmodel reads is refused in one line that says so.

Here, at the model's ground floor, because the advice report writes a header too and everything above
may import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PREFIX = "rtmodel-"
SCHEMA_KEY = "schema"
# kind -> (the key that named the document, the key that held its version) before `schema`
LEGACY = {
    "profile": ("tool", "schema_version"),
    "calibration": ("format", "version"),
    "validation": ("kind", "version"),
}
_TAG = re.compile(r"rtmodel-([a-z][a-z0-9-]*)/([0-9]{1,6})")


class HeaderError(ValueError):
    """Why a document is not the kind or version asked for: one line without the document's name,
    to follow it ("profile.json " + "is not an rtmodel profile (...)")."""


def schema_tag(kind: str, version: int) -> str:
    """ "rtmodel-profile/1"."""
    return f"{PREFIX}{kind}/{version}"


def document_header(kind: str, version: int) -> dict[str, str]:
    """The header a writer puts first in its document."""
    return {SCHEMA_KEY: schema_tag(kind, version)}


@dataclass(frozen=True)
class Header:
    """What a document says it is: kind None when it names no rtmodel kind; version as written."""

    kind: str | None
    version: Any
    said: str  # how the document says its kind, for messages: "schema='rtmodel-profile/1'", "tool='x'"
    version_said: str  # how it says its version: "schema 'rtmodel-profile/2'", "schema_version 2"


def header_of(doc: Any) -> Header:
    """The header of a parsed document, in either form; never raises."""
    if not isinstance(doc, dict):
        return Header(None, None, "not a JSON object", "no version")
    if SCHEMA_KEY in doc:
        tag = doc[SCHEMA_KEY]
        said = f"{SCHEMA_KEY}={tag!r}"
        match = _TAG.fullmatch(tag) if isinstance(tag, str) else None
        if match is None:
            return Header(None, None, said, f"{SCHEMA_KEY} {tag!r}")
        return Header(match[1], int(match[2]), said, f"{SCHEMA_KEY} {tag!r}")
    for kind, (name_key, version_key) in LEGACY.items():
        if doc.get(name_key) == PREFIX + kind:
            version = doc.get(version_key)
            return Header(kind, version, f"{name_key}={doc[name_key]!r}", f"{version_key} {version!r}")
    return Header(None, None, f"{SCHEMA_KEY}=None", "no version")


def check_header(doc: Any, kind: str, newest: int, what: str) -> int:
    """The version of a document that must be of `kind` (either header form), at most `newest`.

    HeaderError (one line, to follow the document's name) when it is not a JSON object, names another
    kind or none, has no readable version, or is newer than this rtmodel reads. `what` names the kind
    in words ("rtmodel profile")."""
    if not isinstance(doc, dict):
        raise HeaderError(f"is not an {what} (a JSON object was expected)")
    header = header_of(doc)
    expected = schema_tag(kind, newest)
    if header.kind != kind:
        said = header.said
        name_key = LEGACY.get(kind, (SCHEMA_KEY,))[0]
        if header.kind is None and SCHEMA_KEY not in doc and name_key in doc:
            said = f"{name_key}={doc[name_key]!r}"
        raise HeaderError(f"is not an {what} ({said}, expected {expected!r})")
    version = header.version
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise HeaderError(
            f"has {header.version_said}; this rtmodel reads {expected} (that is not a version of it)"
        )
    if version > newest:
        raise HeaderError(
            f"has {header.version_said}, newer than this rtmodel reads ({expected}); update rtmodel to read it"
        )
    return version

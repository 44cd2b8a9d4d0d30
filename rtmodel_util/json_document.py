"""The one JSON reader of every document rtmodel loads (profiles, calibrations, scenarios, results).

Why one: each document is data that may come from anywhere (a colleague, another machine, a truncated
copy), and the standard reader fails on some of it with a traceback, not a sentence: nesting deep enough
to exhaust the recursion limit, integers too long to convert, NaN/Infinity (JSON has neither), strings
holding a lone surrogate (they cannot be printed). Here each becomes one line through the caller's own
error type, which names the file. Standard library only: launchers and ranks call it without torch.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # rtmodel's documents nest 5 levels deep; far beyond that is not one of them
MAX_STRING_CHARS = 10_000  # names, versions, reasons: a longer string would be printed into tables whole
MAX_INT_DIGITS = 1000  # far below Python's 4,300-digit conversion limit; physics checks bound the rest


class DocumentError(ValueError):
    """Why a text is not a readable JSON document (one line, without the file's name)."""


TOO_DEEP = f"is nested too deeply to be an rtmodel document (at most {MAX_DEPTH} levels)"


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise DocumentError(f"holds an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _constant(name: str) -> float:
    raise DocumentError(f"holds {name}, which JSON does not allow (a number was expected)")


def parse_document(text: str, nan_ok: bool = False) -> Any:
    """`text` parsed as JSON; DocumentError (one line) for anything that is not a readable document.
    nan_ok: NaN and Infinity are read as floats, for a reader whose field checks name where they are."""
    try:
        doc = json.loads(text, parse_int=_int, parse_constant=float if nan_ok else _constant)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise DocumentError(TOO_DEEP) from None
    _check_tree(doc)
    return doc


def _check_tree(doc: Any) -> None:
    """Depth and printable strings, walked without recursion."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise DocumentError(TOO_DEEP)
        if isinstance(node, dict):
            for key, value in node.items():
                _check_text(key)
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            _check_text(node)


def _check_text(text: str) -> None:
    if len(text) > MAX_STRING_CHARS:
        raise DocumentError(f"holds a string of {len(text):,} characters (at most {MAX_STRING_CHARS:,})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise DocumentError(
            f"holds a string that is not valid Unicode (a lone surrogate): {ascii(text[:60])}"
        ) from None

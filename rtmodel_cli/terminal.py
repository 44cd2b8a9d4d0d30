"""Make any terminal (or pipe) print rtmodel's output: a width tables can fit and an encoding that
cannot fail.

Why: rich takes its width from $COLUMNS when set, so COLUMNS=0 printed nothing and COLUMNS=5 wrapped a
table over 500 lines; and a stream that cannot encode the output's characters (PYTHONIOENCODING=ascii,
a latin-1 locale) ended in a UnicodeEncodeError traceback after the work was done.
"""

from __future__ import annotations

import os
import sys

MIN_COLUMNS = 40  # below this a table's columns wrap every word; rich's own fallback is 80


def usable_columns(value: str | None) -> str | None:
    """$COLUMNS as rich should see it: None (unset: the terminal's width, else 80) when it is not a
    positive whole number, at least MIN_COLUMNS otherwise."""
    if value is None:
        return None
    try:
        columns = int(value.strip())
    except ValueError:
        return None
    if columns <= 0:
        return None
    return str(max(columns, MIN_COLUMNS))


def prepare_terminal() -> None:
    """Fix $COLUMNS (usable_columns) and let stdout/stderr replace what their encoding cannot write."""
    columns = usable_columns(os.environ.get("COLUMNS"))
    if columns is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = columns
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")

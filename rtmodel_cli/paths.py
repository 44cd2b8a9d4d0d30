"""The one rule for a file a command writes: `profile --out`, `calibrate --out`, `validate --results`, `plot --out`.

Why one rule, checked before any work: each command used to decide on its own. `profile` created missing
directories (and, given a directory, left a temp file in it), the others refused; `validate` found out
only after a whole training run that it could not write its results. Now every command checks its
output path first, with the same words, and creates nothing:

- the path must not be an existing directory (nor be spelled as one, with a trailing slash);
- its parent directory must exist and be writable (an existing file must be writable too).

Standard library only (plus rtmodel's error type): the profiler and validation launchers call it too.
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime_model.errors import UserError


class OutputPathError(UserError):
    """An output path that cannot be written; the message names the flag and the path (exit 2)."""


def check_output_path(path: str | os.PathLike, flag: str) -> Path:
    """`path` as a Path when a command may write it; OutputPathError (one line naming `flag`) otherwise.

    Nothing is created or written: the caller writes later (atomically), after its work is done.
    """
    text = os.fspath(path)
    p = Path(text)
    if not text.strip():
        raise OutputPathError(f"{flag} needs a file path, got an empty one")
    if p.is_dir() or text.endswith(("/", os.sep)):
        raise OutputPathError(f"{flag} {text} is a directory; give a file path, e.g. {p / 'NAME'}")
    parent = p.parent  # Path("x.json").parent is Path("."): the working directory
    if not parent.exists():
        raise OutputPathError(f"{flag} {text}: directory {parent} does not exist (create it first)")
    if not parent.is_dir():
        raise OutputPathError(f"{flag} {text}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{flag} {text}: directory {parent} is not writable")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputPathError(f"{flag} {text}: the file exists and is not writable")
    return p

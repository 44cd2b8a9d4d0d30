"""Make any terminal (or pipe) print rtmodel's output: a width tables can fit, an encoding that
cannot fail, and no control character it did not mean.

Why: rich takes its width from $COLUMNS when set, so COLUMNS=0 printed nothing and COLUMNS=5 wrapped a
table over 500 lines; a stream that cannot encode the output's characters (PYTHONIOENCODING=ascii,
a latin-1 locale) ended in a UnicodeEncodeError traceback after the work was done; and a string read
from a file (a GPU name, a network's) carried its escape sequences to the terminal. The shell escapes
those where it renders text (failing.say_error, shown_console); `ShownStream` is the net under it, for
a line printed where no one thought of it.
"""

from __future__ import annotations

import os
import sys

from rtmodel_util.shown import shown_output

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


# rich colours a stream that is no terminal when told to (its own switches): keep its colours there too
FORCE_COLOUR_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE")


class ShownStream:
    """A text stream (sys.stdout, sys.stderr) that writes control characters escaped (rtmodel_util.shown:
    `shown_output`), keeping CR LF line ends and, where colours are on, rich's colour sequences (SGR).
    Everything else (encoding, isatty, fileno, buffer, flush, reconfigure) is the stream's own.

    Not caught: a process that writes to the file descriptor itself (a rank, a subprocess), and click's
    `echo` on a stream whose encoding is ASCII (click then writes to its `buffer`); the shell escapes
    what it prints in any case."""

    def __init__(self, stream):
        self.shown_stream = stream
        tty = getattr(stream, "isatty", None)
        try:
            on_tty = bool(tty()) if tty is not None else False
        except (OSError, ValueError):  # a closed or detached stream
            on_tty = False
        self.colours = on_tty or any(os.environ.get(name) for name in FORCE_COLOUR_ENV)

    def write(self, text):
        if isinstance(text, str):
            self.shown_stream.write(shown_output(text, self.colours))
            return len(text)
        return self.shown_stream.write(text)  # not text: the stream answers (click probes with b"")

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        try:
            stream = self.__dict__["shown_stream"]
        except KeyError:  # not yet set (a copy being made): no attribute of the stream's either
            raise AttributeError(name) from None
        return getattr(stream, name)


def shown_streams() -> None:
    """Wrap sys.stdout and sys.stderr in ShownStream, once (a second command in one process keeps it)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ShownStream):
            setattr(sys, name, ShownStream(stream))


def prepare_terminal() -> None:
    """Fix $COLUMNS (usable_columns), let stdout/stderr replace what their encoding cannot write, and
    escape the control characters written to them (ShownStream)."""
    columns = usable_columns(os.environ.get("COLUMNS"))
    if columns is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = columns
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    shown_streams()

"""How a string that came from a file is shown on a terminal: its control characters escaped as `repr`
writes them (ESC as `\\x1b`, BEL as `\\x07`, a right-to-left override as `\\u202e`), all else unchanged.

Why: traces, profiles, scenario and results files, nccl-tests logs and preset files are written by
others and kept in team repositories, and their strings (a GPU name, a network's, a file's) reach the
terminal in tables, notes and error lines. Printed raw, an escape sequence in one sets the window title,
clears the screen or writes the clipboard, and a bidi override makes a line read otherwise than it is;
escaped, the string is still there to read, and to fix in its file. The shell applies `shown` where text
is rendered (the error line, its rich Console, its notes) and, as a net under those, wraps stdout and
stderr in `shown_output` (rtmodel_cli/terminal.py), so a reader added later cannot forget it.
"""

from __future__ import annotations

import re
import sys

# What a terminal acts on or a reader cannot see: C0 controls but newline and tab, DEL and C1
# (U+0080-U+009F: U+009B is a one-byte CSI to many terminals); the bidi marks, embeddings, overrides
# and isolates (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069) and the line and paragraph
# separators (U+2028-U+2029); the invisible ones that make two names look alike (zero-width space,
# word joiner and invisible operators, the deprecated format characters, the BOM, the interlinear
# annotations, the tag characters); and lone surrogates, which no terminal encoding can write. Zero-width
# joiners (U+200C-U+200D) stay: Persian, the Indic scripts and emoji need them.
CONTROL_CHARACTERS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f"
)
_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
# What rtmodel's own output may hold beside text (shown_output): a CR LF line end (CSV's) and, where
# colours are on, rich's colour and style sequences (SGR: ESC [ numbers m), which move no cursor.
_OUTPUT = re.compile(f"(\r\n)|(\x1b\\[[0-9;:]*m)|[{CONTROL_CHARACTERS}]")


def _escaped(character: str) -> str:
    return repr(character)[1:-1]


def shown(text: str) -> str:
    """`text` with every control character (CONTROL_CHARACTERS) escaped as repr writes it: "A100\\x1b]0;x\\x07"
    for a GPU name carrying ESC ] 0 ; x BEL. Newlines, tabs and every printable character (é, µ, ≈)
    are kept; a shown string shows as itself."""
    text = str(text)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda m: _escaped(m.group()), text)


def shown_output(text: str, colours: bool = False) -> str:
    """`shown` for a chunk of rtmodel's own output on its way to stdout or stderr: CR LF line ends kept,
    and rich's colour sequences kept where `colours` (a terminal, or rich told to colour anyway)."""
    if _OUTPUT.search(text) is None:
        return text

    def one(match: re.Match) -> str:
        if match.group(1) or (match.group(2) and colours):
            return match.group()
        return "".join(_escaped(c) if _CONTROL.match(c) else c for c in match.group())

    return _OUTPUT.sub(one, text)


def say(line: str, flush: bool = False) -> None:
    """A note or warning on stderr, `shown` (stdout stays the answer: --format json keeps one document)."""
    print(shown(line), file=sys.stderr, flush=flush)

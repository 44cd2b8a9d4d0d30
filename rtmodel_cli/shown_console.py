"""The shell's one rich Console: every string it renders goes through `rtmodel_util.shown` first.

Why here and not at each print: the tables, notes and titles print strings read from files (a GPU name
from a trace, a network's from a scenario file, a topology from a results file), and a reader added
later would not know to escape them. rich calls `render_str` for every str it prints (a table's cells
and title too) before it parses markup, so escaping there keeps the widths rich measures right; `render`
escapes what reaches it already built (a `Text` made from a file's string), so nothing passes raw.
rich's own Control segments (none in rtmodel's output) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from rtmodel_util.shown import shown


class ShownConsole(Console):
    """A rich Console whose rendered text has its control characters escaped (module doc)."""

    def render_str(self, text: str, **kwargs) -> Text:
        return super().render_str(shown(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control:
                yield segment
            else:
                text = shown(segment.text)
                yield segment if text is segment.text else Segment(text, segment.style)


def terminal_console(**kwargs) -> Console:
    """The shell's Console: rich's own width (the terminal's, $COLUMNS, or 80 when piped), which the
    tables fit. No automatic highlighting: every style printed is ours (and its regexes cost a hundredth
    of advise). `kwargs` go to rich's Console."""
    return ShownConsole(**{"highlight": False, **kwargs})

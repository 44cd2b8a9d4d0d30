"""Terminal tables that fit the terminal: the columns kept by priority, none cut mid-word, and one dim
line naming the columns left out. Used by every table rtmodel prints (advise, topologies, validate).

Why here and not beside the column definitions: the width of a terminal is the shell's business; the
model's columns (`runtime_model.advice.columns`) only say which matter most (their priority).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rtmodel_util.shown import shown as escaped_controls

Cell = str | Text


@dataclass(frozen=True)
class FitColumn:
    """One candidate column of a terminal table: its header, its cells (plain text) and how it may shrink."""

    header: str
    cells: tuple[str, ...]
    priority: int = 0  # 0 = always shown; higher = dropped first
    wrap: bool = True  # cells may wrap at spaces (headers always may); numbers should not


def _longest_word(text: str, text_len: Callable[[str], int]) -> int:
    return max((text_len(w) for w in text.split()), default=0)


def fit_columns(
    columns: list[FitColumn], width: int, text_len: Callable[[str], int] = len, comfortable_wrap: int = 20
) -> tuple[list[int], list[int], list[int]]:
    """Which columns fit `width` terminal cells, and how wide each is: (kept indices in their order, their
    widths, dropped indices).

    Nothing is cut mid-word: a column is never narrower than its longest word (its longest cell when it
    does not wrap). A column's comfortable width is its whole header and, when it wraps, its cells up to
    `comfortable_wrap`. Priority-0 columns are always kept; the others are added by priority while every
    kept column fits at its comfortable width. The spare width then widens the kept columns in priority
    order, first to comfortable, then to their natural (unwrapped) width. Layout of rich's default table:
    one border per column plus one, and a space either side of every cell.
    """

    def overhead(count: int) -> int:
        return 3 * count + 1

    lo, easy, hi = [], [], []
    for c in columns:
        cells = [text_len(x) for x in c.cells]
        words = [_longest_word(x, text_len) for x in c.cells] if c.wrap else cells
        lo.append(max([_longest_word(c.header, text_len), *words, 1]))
        hi.append(max([text_len(c.header), *cells, 1]))
        body = min(max(cells, default=0), comfortable_wrap) if c.wrap else max(cells, default=0)
        easy.append(max(lo[-1], text_len(c.header), body))
    order = sorted(range(len(columns)), key=lambda i: (columns[i].priority, i))
    kept = [i for i in order if columns[i].priority == 0]
    for i in order:
        if i not in kept and sum(easy[j] for j in kept) + easy[i] + overhead(len(kept) + 1) <= width:
            kept.append(i)
    kept.sort(key=order.index)
    spare = width - overhead(len(kept)) - sum(lo[i] for i in kept)
    widths = {i: lo[i] for i in kept}
    for target in (easy, hi):
        for i in kept:
            grow = max(0, min(spare, target[i] - widths[i]))
            widths[i] += grow
            spare -= grow
    shown = sorted(kept)
    return shown, [widths[i] for i in shown], [i for i in range(len(columns)) if i not in widths]


def plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def shown_cell(cell: Cell) -> Cell:
    """A cell with its control characters escaped (rtmodel_util.shown) before its width is measured: a
    cell may be a name read from a file."""
    if not isinstance(cell, Text):
        return escaped_controls(cell)
    text = escaped_controls(cell.plain)
    return cell if text == cell.plain else Text(text, style=cell.style)


def fitted_table(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    priorities: Sequence[int],
    wrap: Sequence[bool],
    right: Sequence[bool],
    row_styles: Sequence[str | None] | None = None,
) -> tuple[Table, list[str]]:
    """A rich table with the columns that fit `console.width` (fit_columns); returns it and the headers
    of the columns left out. Cells are plain text (a str is never read as markup), and so is the title;
    their control characters are escaped (shown_cell)."""
    rows = [[shown_cell(c) for c in r] for r in rows]
    cands = [
        FitColumn(h, tuple(plain(r[i]) for r in rows), priorities[i], wrap[i]) for i, h in enumerate(headers)
    ]
    shown, widths, dropped = fit_columns(cands, console.width, cell_len)
    t = Table(title=escape(escaped_controls(title)), title_justify="left")
    for i, w in zip(shown, widths, strict=True):
        # no_wrap stays off (it would also cut the header with "..."): the width holds every unwrappable cell
        t.add_column(headers[i], justify="right" if right[i] else "left", width=w)
    for k, r in enumerate(rows):
        style = row_styles[k] if row_styles else None
        t.add_row(*(r[i] if isinstance(r[i], Text) else Text(r[i]) for i in shown), style=style)
    return t, [headers[i] for i in dropped]


def shown_text(headers: Sequence[str], rows: Sequence[Sequence[Cell]], dropped: Sequence[str]) -> str:
    """The words of the columns that were shown (headers and cells): what legend lines look for."""
    kept = [i for i, h in enumerate(headers) if h not in dropped]
    return " ".join([*(headers[i] for i in kept), *(plain(r[i]) for r in rows for i in kept)])


def print_dropped(console: Console, dropped: Sequence[str], fmt: str) -> None:
    """One dim line naming the columns left out, and the --format that has them all."""
    if dropped:
        console.print(
            f"not shown at this width: {', '.join(dropped)} (widen the terminal, or use {fmt} for every column)",
            style="dim",
            markup=False,
            highlight=False,
        )

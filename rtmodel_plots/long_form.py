"""The numbers a figure draws, one row per drawn value (long form): what `rtmodel plot --data` writes.

Why every figure fills its table itself, from the very arrays it hands to matplotlib, and carries it
(`plotted(fig)`): a figure can be checked and redrawn from its CSV without re-deriving anything, the CSV
can never drift from the picture, and no figure function grows a parameter for it. Why the csv module
and text rather than pandas: the CSV is a plain file any tool reads, and the cells are written so that
they read back bit for bit (floats as repr, NaN as an empty cell).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

import numpy as np

from rtmodel_plots.errors import PlotError

# The sweeps' columns (speedup, what-if, variance): one row per point and topology; "allreduce" rows give
# All-Reduce's own time at that x (speedup 1, the dashed line).
SWEEP_COLUMNS = ("x_name", "x", "topology", "iteration_ms", "speedup")
ALLREDUCE = "allreduce"
_ATTRIBUTE = "rtmodel_plotted"  # where a Figure carries its table


class PlotTable:
    """Rows of named values in a figure's column order; `csv_text` writes them."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns: tuple[str, ...] = tuple(columns)
        self.rows: list[tuple] = []

    def add(self, **values) -> None:
        """One row; every column named, nothing else."""
        if set(values) != set(self.columns):
            raise ValueError(f"a row needs exactly the columns {self.columns}, got {sorted(values)}")
        self.rows.append(tuple(values[c] for c in self.columns))

    def add_points(self, **values) -> None:
        """One row per point: sequences (numpy arrays, Series, lists) give a value per row, scalars
        (str, numbers, None) repeat. Sequences must have one length."""
        series = {k: list(v) for k, v in values.items() if not _is_scalar(v)}
        lengths = {len(v) for v in series.values()}
        if len(lengths) > 1:
            raise ValueError(f"points of unequal lengths: { {k: len(v) for k, v in series.items()} }")
        for i in range(lengths.pop() if lengths else 1):
            self.add(**{k: series[k][i] if k in series else v for k, v in values.items()})

    def column(self, name: str, /, **where) -> list:
        """The values of column `name` in the rows whose other columns equal `where` (checks, notebooks)."""
        at = self.columns.index(name)
        keys = [(self.columns.index(k), v) for k, v in where.items()]
        return [row[at] for row in self.rows if all(row[i] == v for i, v in keys)]

    def csv_text(self) -> str:
        """The table as CSV text: a header, then the rows (floats as repr, NaN and None as empty cells)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows([_cell(v) for v in row] for row in self.rows)
        return buf.getvalue()


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, str | bytes | int | float | bool | np.generic)


def _cell(value) -> str:
    """A value as the CSV holds it: numpy scalars as Python's (np.float64's repr is not a number)."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        v = float(value)
        return "" if math.isnan(v) else repr(v)
    return str(value)


def draw_speedup_line(ax, table: PlotTable, part, x_col: str, x_name: str, topo: str, style, **panel):
    """One topology's speedup line on `ax` (style: (color, marker, linestyle); one-peer-exp, drawn under
    base-2 at n = 2^p, a larger open marker), recorded in `table` from the very values drawn (`panel`:
    the table's other columns). Returns the line."""
    color, marker, ls = style
    hollow = topo == "one-peer-exp"
    (line,) = ax.plot(
        part[x_col],
        part["speedup"],
        color=color,
        marker=marker,
        ls=ls,
        ms=7 if hollow else 4.5,
        mfc="none" if hollow else color,
        lw=1.6,
        label=topo,
    )
    table.add_points(
        **panel,
        x_name=x_name,
        x=part[x_col],
        topology=topo,
        iteration_ms=part["topology_ms"],
        speedup=part["speedup"],
    )
    return line


def attach(fig, table: PlotTable):
    """`fig`, carrying `table` (the numbers it draws) for `plotted`."""
    setattr(fig, _ATTRIBUTE, table)
    return fig


def plotted(fig) -> PlotTable:
    """The numbers a figure of rtmodel_plots draws, in long form (its module's COLUMNS)."""
    table = getattr(fig, _ATTRIBUTE, None)
    if table is None:
        raise PlotError("this figure carries no numbers: it was not drawn by rtmodel_plots")
    return table

"""Figures of the runtime model: speedup curves, the three-factor breakdown, what-ifs, variance, the paper
check, parity.

Why a package of its own: `runtime_model` stays numpy/scipy only (the advisor never loads pandas or
matplotlib); the figures and their pandas data layer live here, one concern per
module. Two layers: `sweeps` turns presets into tidy DataFrames; the figure modules (speedup,
factors, whatif, variance, paper, parity_plot, crossover_plot) draw such frames or the numbers the caller
passes (the paper's rows, parity points: read by rtmodel_literature and validation, never here); `style`
holds the looks and `save`; `plotted(fig)` gives the numbers a figure draws (long_form; `rtmodel plot --data`).

`import rtmodel_plots as plots` gives every public name below; importing it never loads matplotlib.
No module is named like a function it exports (`plots.sweep`, `plots.parity` are the functions).
"""

from rtmodel_plots.crossover_plot import crossover_curve
from rtmodel_plots.errors import PlotError
from rtmodel_plots.factors import factor_breakdown_bars
from rtmodel_plots.long_form import PlotTable, plotted
from rtmodel_plots.paper import paper_comparison
from rtmodel_plots.parity_plot import parity
from rtmodel_plots.speedup import speedup_vs_gpus
from rtmodel_plots.style import (
    FACTOR_COLORS,
    FACTOR_LABELS,
    FALLBACK_COLORS,
    FIGURE_FORMATS,
    TOPOLOGY_STYLE,
    save,
    topology_style,
)
from rtmodel_plots.sweeps import DEFAULT_WHAT_IFS, WhatIf, best_per_gpus, pays_from, preset_scenario, sweep
from rtmodel_plots.variance import variance_panels, variance_sweeps
from rtmodel_plots.whatif import what_if

__all__ = [
    "DEFAULT_WHAT_IFS",
    "FACTOR_COLORS",
    "FACTOR_LABELS",
    "FALLBACK_COLORS",
    "FIGURE_FORMATS",
    "TOPOLOGY_STYLE",
    "PlotError",
    "PlotTable",
    "WhatIf",
    "best_per_gpus",
    "crossover_curve",
    "factor_breakdown_bars",
    "paper_comparison",
    "parity",
    "pays_from",
    "plotted",
    "preset_scenario",
    "save",
    "speedup_vs_gpus",
    "sweep",
    "topology_style",
    "variance_panels",
    "variance_sweeps",
    "what_if",
]

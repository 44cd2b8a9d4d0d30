"""The model next to published numbers: the paper's per-iteration times, other libraries' published
runs, DiLoCo-family utilizations, and the speedup errors the advisor's confidence is built from.

Why a package of its own: these comparisons validate no run of ours (that is `rtmodel_validation/`, which
trains and measures); they are torch-free checks of the presets and the model against the literature,
with their cited data in `data/`. They import the model (`runtime_model`) only.
"""

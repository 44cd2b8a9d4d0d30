"""What the advisor and the plots predict from: every source a user brings (presets, `--presets` files,
`--scenario`, a profile or its calibration, an nccl-tests log, traces, a measured step, their own numbers),
resolved once into one typed set of inputs, below the shell.

Why a package of its own: `rtmodel advise`, every `rtmodel plot`, validate's prediction and notebooks
must draw the same answer from the same measurements; the shell only parses options and renders.
"""

from runtime_model.core.lazy_exports import lazy_exports

_EXPORTS, __getattr__, __all__ = lazy_exports(
    __name__,
    {
        "answer": ("Question", "advise", "advise_from"),
        "inputs": ("AdviceInputs",),
        "sources": ("resolve_inputs",),
    },
)

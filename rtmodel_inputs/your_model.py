"""`--params N` / `--param-mb MB`: advise or plot for your own model, known by its size and your --compute-ms.

Why here: the options only add a model the preset library lacks (runtime_model.presets.own_model makes and checks
it, named OWN_MODEL); from then on the commands run it as they run any preset model.
"""

from __future__ import annotations

from runtime_model.presets.own_model import OWN_MODEL, add_yours, describe

KEYS = ("params", "param_mb")  # option (and scenario-file key) names


def given(opts: dict) -> dict:
    """The options of KEYS that were given (not None)."""
    return {k: opts[k] for k in KEYS if opts.get(k) is not None}


def add(library, yours: dict, model, compute_ms: float | None, message_dtype: str | None):
    """(library, model): with your model added and named when `yours` (given KEYS) holds a size,
    else both unchanged. A preset `model`, a missing compute_ms or a bad size is a named error."""
    if not yours:
        return library, model
    from runtime_model.presets.to_model import MESSAGE_DTYPE_BYTES

    element_bytes = MESSAGE_DTYPE_BYTES[message_dtype or "fp32"]
    if isinstance(model, list):  # plot speedup's --models, shown as typed
        model = " ".join(model) or None
    library = add_yours(library, yours.get("params"), yours.get("param_mb"), element_bytes, model, compute_ms)
    return library, OWN_MODEL


def provenance(library, choice, compute_cv_given: bool) -> tuple[str, dict] | None:
    """(the compute provenance line, the JSON inputs' "your_model") for a params-only model, else None."""
    from runtime_model.presets.to_model import MESSAGE_DTYPE_BYTES

    m = library.model(choice.model)
    if not m.params_only:
        return None
    element_bytes = MESSAGE_DTYPE_BYTES[choice.message_dtype]
    line = describe(
        m, element_bytes, choice.gpu, choice.optimizer_ms is not None, choice.compute_cv, compute_cv_given
    )
    return line, {"name": m.name, "params": m.params, "message_bytes": m.params * element_bytes}

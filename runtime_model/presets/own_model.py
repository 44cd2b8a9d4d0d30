"""Your own model known only by its parameter count: a model preset the existing code can answer for.

Why a preset and not a path of its own: the buckets (bucketing.preset_bucket_layout), the optimizer's
memory traffic and Decent-DP's mixing are all computed from a model preset's parameters, so a preset
made from the count gets them from the same code. What a count cannot say (FLOPs, kernel counts) the
user's measured forward + backward time (compute_ms) replaces, so a params-only model requires it.
Such a model comes from `--params`/`--param-mb` (named OWN_MODEL) or from a models.toml entry that
gives only PARAMS_ONLY_KEYS.
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import MappingProxyType

from runtime_model.core.constraints import MAX_PARAMS, PARAMS_RANGE, POSITIVE
from runtime_model.core.defaults import MIB
from runtime_model.core.errors import InvalidCombination, InvalidValue, UserError
from runtime_model.presets.preset_types import MODES, PER_MODE_COUNTS, ModelPreset, PresetLibrary

OWN_MODEL = "your-model"  # the name --params / --param-mb give the user's model
# Data parallelism keeps a whole replica on every GPU: 10^11 parameters' fp32 gradients alone are 400 GB,
# more than any GPU holds (H200: 141 GB). Above it the count is a typo (an extra zero), and the model would
# also cut over 15,000 buckets.
PARAMS = PARAMS_RANGE
PARAMS_WHY = "(data parallelism keeps a whole replica on every GPU: 1e11 fp32 gradients alone are 400 GB)"
# Keys of a models.toml entry that make it params-only (any other ModelPreset key asks for all of them).
PARAMS_ONLY_KEYS = ("params", "description", "source", "optimizer", "compute_cv")
# A dense network's matmuls: 2 FLOPs per parameter per sample forward, 4 backward, so the forward is a
# third of the measured forward + backward (the split sets DDP's overlap window: the backward).
FORWARD_FLOPS_PER_PARAM, TRAIN_FLOPS_PER_PARAM = 2.0, 6.0
# Buckets of a params-only model are cut from equal pieces no larger than the smallest bucket cap (so
# the buckets close at the caps); at most this many buckets, beyond which the model would take minutes.
MAX_BUCKETS = 1 << 17


class NeedsComputeMs(UserError):
    """A params-only model without the user's measured compute time (its FLOPs are unknown)."""

    def __init__(self, model: str):
        self.model = model
        super().__init__(self.message_for(lambda name: name))

    def message_for(self, show_name) -> str:
        return (
            f"{show_name('model')} '{self.model}' gives only its parameter count: give "
            f"{show_name('compute_ms')} too (your measured forward + backward time per iteration in ms)"
        )


def params_only_preset(name: str, params: int, like: ModelPreset, **given) -> ModelPreset:
    """A model of `params` parameters; optimizer and compute CV as `like` (the default model) unless
    `given` (PARAMS_ONLY_KEYS) says. One parameter list of `params`: the tensors are unknown."""
    zero = MappingProxyType(dict.fromkeys(MODES, 0.0))
    return ModelPreset(
        name=name,
        description=given.get("description", f"your model, {params:,} parameters"),
        params=params,
        train_flops_per_unit=TRAIN_FLOPS_PER_PARAM * params,
        forward_flops_per_unit=FORWARD_FLOPS_PER_PARAM * params,
        unit="sample",
        default_global_batch=1.0,  # unused: the measured compute_ms is at the user's own batch
        embedding_params=0,
        compute_cv=given.get("compute_cv", like.compute_cv),
        **dict.fromkeys(
            PER_MODE_COUNTS, zero
        ),  # its ops and bytes are unknown: the measured time covers them
        backward_numels=(params,),
        optimizer=given.get("optimizer", like.optimizer),
        source=given.get("source", "your parameter count"),
        counts_source="none: known only by its parameter count; compute from your measured compute_ms",
        compute_cv_source=(
            "your entry's"
            if "compute_cv" in given
            else f"{like.name}'s, the default model's, assumed for yours"
        ),
        params_only=True,
    )


def with_model(library: PresetLibrary, model: ModelPreset) -> PresetLibrary:
    """`library` with `model` added (or replacing the entry of its name)."""
    return replace(library, models=MappingProxyType({**library.models, model.name: model}))


def _shown(number: float) -> str:
    """A number as typed: 100000000.0 -> "100000000", 0.5 -> "0.5"."""
    return f"{number:.0f}" if float(number).is_integer() else f"{number:g}"


def params_of(params: float | None, param_mb: float | None, element_bytes: int) -> int:
    """The parameter count from --params, or from --param-mb (the message in MiB) at `element_bytes`
    per communicated element; checked, InvalidValue naming the input."""
    if params is not None:
        if not PARAMS.contains(params):
            raise InvalidValue("params", f"{PARAMS.describe()} {PARAMS_WHY}", params)
        return int(params)
    POSITIVE.check("param_mb", param_mb)
    exact = param_mb * MIB / element_bytes  # may be inf (1e308 MiB): compared before it is rounded
    if exact > MAX_PARAMS:
        largest = MAX_PARAMS * element_bytes / MIB
        raise InvalidValue("param_mb", f"at most {largest:g} MiB, 1e11 parameters {PARAMS_WHY}", param_mb)
    return max(1, round(exact))


def add_yours(
    library: PresetLibrary,
    params: float | None,
    param_mb: float | None,
    element_bytes: int,
    model: str | None = None,
    compute_ms: float | None = None,
) -> PresetLibrary:
    """`library` with the user's model (OWN_MODEL) of --params or --param-mb: checked against each other,
    against a preset --model and for the measured compute_ms it needs. Named inputs, for flags."""
    if params is not None and param_mb is not None:
        raise InvalidCombination(
            "{params} and {param_mb} both size your model: give one",
            params=_shown(params),
            param_mb=_shown(param_mb),
        )
    key, value = ("params", _shown(params)) if params is not None else ("param_mb", _shown(param_mb))
    if model is not None:
        raise InvalidCombination(
            f"{{model}} names a preset and {{{key}}} describes your own model: give one",
            model=model,
            **{key: value},
        )
    count = params_of(params, param_mb, element_bytes)
    if compute_ms is None:
        raise InvalidCombination(
            f"{{{key}}} needs your measured forward + backward time per iteration too (--compute-ms MS): "
            "a model's size says nothing about its compute",
            **{key: value},
        )
    like = library.model(library.defaults.model)
    return with_model(library, params_only_preset(OWN_MODEL, count, like))


def piece_numels(params: int, element_bytes: int, cap_mb: float, first_mb: float) -> list[int]:
    """A params-only model's parameters as equal pieces of the smallest cap (32-element aligned, as
    Decent-DP aligns), the remainder last: bucketing then closes DDP's and Decent-DP's buckets at the
    caps. Refuses a cap that would cut more than MAX_BUCKETS buckets."""
    limit_bytes = int(min(cap_mb, first_mb) * MIB)
    piece = max(32, math.ceil(limit_bytes / element_bytes / 32) * 32)
    if params * element_bytes / max(cap_mb * MIB, piece * element_bytes) > MAX_BUCKETS:
        smallest = params * element_bytes / MAX_BUCKETS / MIB
        raise InvalidValue(
            "bucket_cap_mb",
            f">= {smallest:.3g} MiB for a model of {params:,} parameters (at most {MAX_BUCKETS} buckets)",
            cap_mb,
        )
    whole, rest = divmod(params, piece)
    return [piece] * whole + ([rest] if rest else [])


def describe(
    model: ModelPreset, element_bytes: int, gpu: str, optimizer_given: bool, compute_cv: float, cv_given: bool
) -> str:
    """Where a params-only model's numbers come from, for the advice's provenance."""
    who = "your model" if model.name == OWN_MODEL else f"your model {model.name}"
    optimizer = (
        "optimizer from --optimizer-ms"
        if optimizer_given
        else f"optimizer: {model.optimizer}'s memory traffic at the {gpu}'s memory bandwidth (--optimizer-ms sets yours)"
    )
    cv = "--compute-cv" if cv_given else f"{model.compute_cv_source}; --compute-cv sets yours"
    return (
        f"{who}: {model.params:,} parameters ({model.params * element_bytes / MIB:.4g} MiB message), "
        f"compute from --compute-ms; {optimizer}; compute CV {compute_cv:g} ({cv})"
    )

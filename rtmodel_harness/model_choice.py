"""Model names and --model-arg values, checked without importing torch.

Why separate from workloads.py: the launcher checks `--model` / `--model-arg` before it starts any
rank, so a typo costs one clear line instead of N processes importing torch and failing together.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable

from rtmodel_harness.errors import WorkloadError

JITTER_KINDS = ("none", "normal", "lognormal")

# Defaults of the built-in models; a --model-arg must name one of these keys.
BUILTIN_DEFAULTS: dict[str, dict] = {
    "synthetic": {
        "param_mb": 8.0,  # total fp32 parameters, MiB (2**20 bytes), split evenly over `layers`
        "layers": 8,
        "forward_ms": 10.0,  # nominal forward sleep per iteration, split evenly over layers
        "backward_ms": 20.0,  # nominal backward sleep per iteration, split evenly over layers
        "jitter": "normal",  # per-iteration compute multiplier: none | normal | lognormal
        "jitter_cv": 0.1,  # its coefficient of variation (sd / mean; mean is 1)
        "optimizer": "adam",  # adam: real torch Adam on the CPU/GPU | sleep: a GPU stand-in that sleeps optimizer_ms
        "optimizer_ms": 5.0,  # with optimizer=sleep: the whole step's time, shared by buckets in proportion to size
        "seed": 0,
        "slow_ranks": [],  # ranks whose forward/backward are persistently slower: "0", "0,2", "0-3" or a list
        "slowdown": 1.0,  # their compute multiplier (>= 1): a straggler GPU, every iteration
    },
    "mlp": {"d_in": 512, "hidden": 1024, "depth": 4, "classes": 10, "seed": 0},
    "transformer-tiny": {
        "vocab": 2048,
        "d_model": 128,
        "heads": 4,
        "layers": 2,
        "ff": 512,
        "seq_len": 64,
        "seed": 0,
    },
}
# The preset models (rtmodel_harness.reference_workloads): full width by default; width_div > 1 makes a
# small copy (every width divided, depth and heads kept) for tests and CPU runs.
REFERENCE_MODELS = ("transformer-base", "transformer-big", "gpt2-small", "resnet50", "transformer-xl-base")
for _name in REFERENCE_MODELS:
    BUILTIN_DEFAULTS[_name] = {"width_div": 1, "seed": 0}
BUILTIN_MODELS = tuple(BUILTIN_DEFAULTS)
# What --batch-per-rank counts per model (reference_models.UNITS), its smallest value (one whole sample:
# a 32-token sentence, a 192-token Transformer-XL segment) and its default.
BATCH_UNITS = {"transformer-base": "token", "transformer-big": "token", "gpt2-small": "token",
               "resnet50": "image", "transformer-xl-base": "token"}
MIN_BATCH = {"transformer-base": 32, "transformer-big": 32, "transformer-xl-base": 192}
DEFAULT_BATCH = {"transformer-base": 1024, "transformer-big": 1024, "gpt2-small": 1024,
                 "transformer-xl-base": 192}
# 2^20 units per rank: 200x the largest per-GPU batches published (NVIDIA's Transformer-big recipe 5,120
# tokens per GPU; Llama 3 405B's 16M tokens over 16k GPUs is 1,024); beyond it the allocator, not rtmodel,
# would answer (with a raw error and a 2 PB request).
MAX_BATCH_PER_RANK = 1 << 20
DEFAULT_BATCH_PER_RANK = 8  # samples: synthetic, mlp, transformer-tiny, resnet50 (images), your own model
_WIDTH_DIVS = (1, 2, 4, 8, 16, 32, 64)  # every width stays divisible by the head count
_SAMPLE = {"transformer-base": "32-token sentence", "transformer-big": "32-token sentence",
           "transformer-xl-base": "192-token segment"}

_POSITIVE_INT = {"layers", "d_in", "hidden", "depth", "classes", "vocab", "d_model", "heads", "ff", "seq_len",
                 "width_div"}
_NONNEG_FLOAT = {"forward_ms", "backward_ms", "jitter_cv", "optimizer_ms"}
OPTIMIZERS = ("adam", "sleep")


def parse_model_args(items: Iterable[str] | None) -> dict:
    """['layers=4', 'param_mb=2.5', 'jitter=none'] -> {'layers': 4, 'param_mb': 2.5, 'jitter': 'none'}.

    Values are read as JSON when they parse (numbers, true/false/null, lists), else kept as strings."""
    out: dict = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise WorkloadError(f"--model-arg expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def resolve_model_args(name: str, model_args: dict | None) -> dict:
    """Built-in defaults overlaid with model_args, checked; custom models get model_args unchanged."""
    model_args = dict(model_args or {})
    if name not in BUILTIN_DEFAULTS:
        return model_args
    defaults = BUILTIN_DEFAULTS[name]
    unknown = sorted(set(model_args) - set(defaults))
    if unknown:
        raise WorkloadError(
            f"model {name!r} has no argument {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(sorted(defaults))})"
        )
    args = {**defaults, **model_args}
    for key, value in args.items():
        if key == "jitter":
            if value not in JITTER_KINDS:
                raise WorkloadError(f"jitter must be one of {', '.join(JITTER_KINDS)}, got {value!r}")
        elif key == "optimizer":
            if value not in OPTIMIZERS:
                raise WorkloadError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {value!r}")
        elif key == "seed" or key in _POSITIVE_INT:
            if isinstance(value, bool) or not isinstance(value, int) or (key != "seed" and value < 1):
                raise WorkloadError(f"model argument {key} must be an integer{'' if key == 'seed' else ' >= 1'}, "
                                    f"got {value!r}")
        elif key == "param_mb":
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise WorkloadError(f"model argument param_mb must be a number > 0, got {value!r}")
            args[key] = float(value)
        elif key == "slow_ranks":
            args[key] = parse_rank_list(value)
        elif key == "slowdown":
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 1:
                raise WorkloadError(f"model argument slowdown must be a number >= 1, got {value!r}")
            args[key] = float(value)
        elif key in _NONNEG_FLOAT:
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise WorkloadError(f"model argument {key} must be a number >= 0, got {value!r}")
            args[key] = float(value)
    if name in REFERENCE_MODELS and args["width_div"] not in _WIDTH_DIVS:
        raise WorkloadError(f"{name}: width_div must be a power of 2 up to 64 (1 = full width), got {args['width_div']}")
    if name == "transformer-tiny" and args["d_model"] % args["heads"]:
        raise WorkloadError(f"transformer-tiny: d_model {args['d_model']} is not divisible by heads {args['heads']}")
    return args


def default_batch(name: str) -> int:
    """--batch-per-rank when not given: in the model's units (BATCH_UNITS)."""
    return DEFAULT_BATCH.get(name, DEFAULT_BATCH_PER_RANK)


def check_batch(name: str, batch, flag: str = "--batch-per-rank") -> int:
    """An integer from 1 to MAX_BATCH_PER_RANK that holds at least one whole sample of the model;
    WorkloadError (one line) else."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH_PER_RANK:
        raise WorkloadError(f"{flag} must be an integer from 1 to {MAX_BATCH_PER_RANK:,}, got {batch!r}")
    least = MIN_BATCH.get(name, 1)
    if batch < least:
        raise WorkloadError(
            f"{flag} {batch} is too small for {name}: it counts {BATCH_UNITS[name]}s per rank, at least {least} "
            f"(one whole {_SAMPLE[name]})"
        )
    return batch


def parse_rank_list(value) -> list[int]:
    """slow_ranks as given (3, "0,2", "0-3", "0-1,6", [0, 2] or "" for none) -> sorted distinct ranks."""
    bad = WorkloadError(f"model argument slow_ranks: expected ranks such as 0,2 or 0-3, got {value!r}")
    items = value if isinstance(value, list | tuple) else [value]
    ranks: set[int] = set()
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise bad
        for part in str(item).replace(" ", "").split(","):
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()) or (sep and int(hi) < int(lo)):
                raise bad
            ranks.update(range(int(lo), int(hi if sep else lo) + 1))
    return sorted(ranks)


def load_factory(spec: str) -> Callable:
    """'package.module:factory' -> the factory callable. The current directory is importable, last:
    rtmodel's ranks run with a safe path (PYTHONSAFEPATH), so a folder of the user's named `profiler` or
    `calibration` cannot shadow rtmodel's own packages, and the user's model is still found."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise WorkloadError(
            f"unknown model {spec!r} (choose {', '.join(BUILTIN_MODELS)} or package.module:factory)"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is in the user's model: say so in one line
        raise WorkloadError(f"--model {spec}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise WorkloadError(f"--model {spec}: module {module_name!r} has no callable {attr!r}")
    return factory


def check_model_choice(name: str, model_args: dict | None) -> dict:
    """Validate a --model choice early; returns the resolved model args."""
    if name in BUILTIN_DEFAULTS:
        return resolve_model_args(name, model_args)
    load_factory(name)
    return dict(model_args or {})

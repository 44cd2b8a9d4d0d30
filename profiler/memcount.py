"""`python -m profiler.memcount`: a preset model's activation memory per batch unit, for models.toml.

Why: a replica's memory is its states (parameters, gradients, optimizer states: from the parameter
count) plus the activations one iteration keeps, which grow with the batch; this measures the second,
fixed + per unit x batch, as profiler.activation_memory defines it (MemTracker on FakeTensors, the peak
of Activation + Temp over the second iteration's forward and backward, CUDA's kernels and 512-byte
storages). Three batches per model spanning per-GPU batches, fitted by least squares; the worst
residual is printed. `--checkpointing` adds the figures with every repeated block checkpointed.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from profiler.activation_memory import ActivationFit, fit_for_workload
from profiler.cli_parser import OneLineParser
from profiler.opcount import _check_out, write_output
from profiler.toml_text import toml_value
from rtmodel_harness import reference_models
from rtmodel_harness.model_choice import REFERENCE_MODELS
from runtime_model.core.errors import UserError

# Batches measured per model, in its units (tokens; images for resnet50): whole samples (32-token
# sentences, 1024-token sequences, 192-token segments), from one small per-GPU batch to 16 times it.
MEASURE_BATCHES = {
    "transformer-base": (1024, 4096, 16384),
    "transformer-big": (1024, 4096, 16384),
    "gpt2-small": (1024, 4096, 16384),
    "transformer-xl-base": (768, 3072, 12288),
    "resnet50": (8, 32, 128),
}
MODES = {"amp": True, "full": False}  # runtime_model.presets.preset_types.MODES: autocast or not
KEYS = ("activation_bytes_per_unit", "activation_fixed_bytes")
CHECKPOINTED_KEYS = ("checkpointed_activation_bytes_per_unit", "checkpointed_activation_fixed_bytes")


def measure(name: str, modes: tuple[str, ...], checkpointing: bool) -> dict[tuple[str, bool], ActivationFit]:
    """(mode, checkpointed) -> the fit, for every mode, without and (with checkpointing) with it."""
    fits = {}
    for ckpt in (False, True) if checkpointing else (False,):
        for mode in modes:
            start = time.perf_counter()
            fits[mode, ckpt] = fit_for_workload(
                name, MEASURE_BATCHES[name], amp=MODES[mode], checkpointing=ckpt
            )
            print(
                f"{name} {mode}{' checkpointed' if ckpt else ''}: {time.perf_counter() - start:.1f} s",
                file=sys.stderr,
            )
    return fits


def source(name: str, checkpointing: bool) -> str:
    batches = ", ".join(f"{b:,}" for b in MEASURE_BATCHES[name])
    return (
        f"python -m profiler.memcount --model {name}{' --checkpointing' if checkpointing else ''} (torch {torch.__version__.split('+')[0]}, "
        f"MemTracker on FakeTensors, CUDA kernels and 512-byte storages, AMP as bf16 autocast; "
        f"least squares over {batches} {reference_models.UNITS[name]}s)"
    )


def _fit_line(label: str, fit: ActivationFit) -> str:
    measured = ", ".join(f"{m.activation_bytes:,}" for m in fit.measures)
    worst = fit.worst_residual_bytes / max(m.activation_bytes for m in fit.measures)
    return (
        f"# {label}: measured {measured} B; fixed {fit.fixed_bytes:,.0f} B + {fit.per_unit_bytes:,.1f} B "
        f"per unit; worst residual {fit.worst_residual_bytes:,.0f} B ({100 * worst:.3f} % of the largest)"
    )


def render(name: str, fits: dict[tuple[str, bool], ActivationFit]) -> str:
    modes = tuple(dict.fromkeys(mode for mode, _ in fits))
    first = next(iter(fits.values())).measures[0]
    argv = "" if len(modes) == 2 else (" --amp" if modes == ("amp",) else " --no-amp")
    ckpt = any(c for _, c in fits)
    header = [
        f"# measured by: python -m profiler.memcount --model {name}{argv}{' --checkpointing' if ckpt else ''} "
        f"(torch {torch.__version__})",
        "# activation bytes: peak of MemTracker's Activation + Temp over the 2nd iteration's forward + backward "
        "(profiler/activation_memory.py)",
        f"# batches {', '.join(map(str, MEASURE_BATCHES[name]))} {reference_models.UNITS[name]}s; "
        f"parameters {first.params:,} ({first.parameter_bytes:,} B), gradients {first.gradient_bytes:,} B, "
        f"Adam states {first.optimizer_bytes:,} B",
    ]
    header += [_fit_line(f"{mode}{' checkpointed' if c else ''}", fit) for (mode, c), fit in fits.items()]
    if ckpt:
        blocks = next(fit for (_, c), fit in fits.items() if c).measures[0].checkpointed_blocks
        header.append(f"# checkpointed blocks ({len(blocks)}): {', '.join(blocks)}")
    body = []
    for checkpointed, keys in ((False, KEYS), (True, CHECKPOINTED_KEYS)):
        if (modes[0], checkpointed) not in fits:
            continue
        for key, field in zip(keys, ("per_unit_bytes", "fixed_bytes"), strict=True):
            values = {mode: getattr(fits[mode, checkpointed], field) for mode in modes}
            if len(modes) == 2:
                body.append(f"{key} = {{ {', '.join(f'{m} = {toml_value(v)}' for m, v in values.items())} }}")
            else:
                body += [f"{key}.{m} = {toml_value(v)}" for m, v in values.items()]
    body.append(f"activation_source = {toml_value(source(name, ckpt))}")
    return "\n".join([*header, f"[{name}]", *body]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m profiler.memcount", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=REFERENCE_MODELS, help="preset model to measure")
    parser.add_argument(
        "--amp",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only under bf16 autocast (--amp) or only in fp32 (--no-amp); default both",
    )
    parser.add_argument(
        "--checkpointing",
        action="store_true",
        help="also measure with every repeated block checkpointed (the checkpointed_* keys)",
    )
    parser.add_argument("--out", help="write the TOML fragment here instead of stdout")
    args = parser.parse_args(argv)
    try:
        out = _check_out(args.out)
    except ValueError as exc:
        parser.error(str(exc))
    modes = tuple(MODES) if args.amp is None else ("amp",) if args.amp else ("full",)
    try:
        text = render(args.model, measure(args.model, modes, args.checkpointing))
    except UserError as exc:  # one line, exit 2, as every rtmodel command
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_output(text, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

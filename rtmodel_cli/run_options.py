"""The measuring run's options (`rtmodel profile`, `rtmodel validate`; --quick for `emulate measure` too),
declared once: one type per flag, with its one default and one help text, used by the commands' signatures.

Why here and not in each command: the two commands used to declare the same flags with different
defaults (--timeout-s 300 in profile, 600 in validate; --warmup 3 and 5) and different help. A default
that depends on the command is None here and said in the help ("profile: ...; validate: ..."): the flag
means the same in both, only what "not given" falls back to (the host, or the profile) differs. The
numbers live beside their checks (runtime_model.core.constraints, rtmodel_util.launch_env,
profiler.options), where the profiler and validation read them too. Imports typer and those light modules
only (no torch, no numpy): `rtmodel --help` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from profiler.options import DEFAULTS as PROFILE_DEFAULTS
from rtmodel_cli.option_groups import field_options, takes_group
from rtmodel_util.launch_env import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S  # for the signatures

# (the default, profile --quick's); validate's is the first (runtime_model.core.constraints.RUN_*)
ITERATIONS, WARMUP, REPS = (PROFILE_DEFAULTS[k] for k in ("iterations", "warmup", "reps"))

RunModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model to train: transformer-base | transformer-big | gpt2-small | resnet50 | transformer-xl-base "
        "(the presets' models; --model-arg width_div=N for a small copy) | synthetic (a sleeping stand-in) | "
        "mlp | transformer-tiny | package.module:factory. Default: profile: transformer-base with fp16 on a "
        "GPU host, mlp on a CPU-only host; validate: the profiled model.",
    ),
]
ModelArgOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model-arg", metavar="KEY=VALUE", help="Model argument, repeatable (e.g. --model-arg param_mb=100)."
    ),
]
BatchPerRankOpt = Annotated[
    int | None,
    typer.Option(
        "--batch-per-rank",
        help="Per rank per iteration, in the model's units: tokens for the transformers and GPT-2 (whole "
        "32-token sentences / 192-token segments; default 1024 / 192), images for resnet50, samples "
        "otherwise (default 8).",
    ),
]
RunPrecisionOpt = Annotated[
    str | None,
    typer.Option(
        "--precision",
        help="fp32 | tf32 | fp16 (autocast + GradScaler, GPU only) | bf16 (autocast). Default: profile: "
        "fp32, or fp16 with the default model on a GPU; validate: the profile's.",
    ),
]
RunOptimizerOpt = Annotated[
    str | None,
    typer.Option(
        "--optimizer",
        help="adam (torch.optim.Adam) | accum-adam (Decent-DP's AccumAdam, accum_iter 4). Default: "
        "profile: adam; validate: the profile's.",
    ),
]
NprocPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--nproc-per-node",
        help="Ranks to launch on this machine (default: profile: one per GPU, at least 2; validate: the "
        "profile's world size); ignored under torchrun.",
    ),
]
RanksPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--ranks-per-node",
        help="Ranks per (pretend) node: one machine can then form pair-inter / two-nodes patterns "
        "(default: LOCAL_WORLD_SIZE under torchrun; else profile: one node, validate: the profile's).",
    ),
]
IterationsOpt = Annotated[
    int | None,
    typer.Option(
        "--iterations",
        help=f"Timed iterations (default {ITERATIONS[0]}; profile --quick {ITERATIONS[1]}).",
    ),
]
WarmupOpt = Annotated[
    int | None,
    typer.Option(
        "--warmup",
        help=f"Untimed iterations first (default {WARMUP[0]}; profile --quick {WARMUP[1]}). validate: "
        "at least 2, raised to one gossip period + 2 so every group's communicator is set up untimed.",
    ),
]
# Its default, DEFAULT_TIMEOUT_S (re-exported here for the commands' signatures), is the larger of the two the
# commands had: validate's 600 s, not profile's 300 s (rtmodel_util.launch_env says why).
TimeoutSOpt = Annotated[
    float,
    typer.Option(
        "--timeout-s",
        help="Give up on a missing rank (rendezvous, each collective) after this long, in seconds, at most "
        "7 days; validate's local launch also gives up on the whole job after it.",
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend", help="auto | nccl | gloo (auto: nccl when every rank has a GPU of its own, else gloo)."
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress lines.")]
# profile's own


@dataclass(frozen=True)
class RunFlags:
    """The flags every measuring run takes (profile and validate), as one group declared once: each
    command takes them as one parameter (`takes_run_flags`)."""

    model: RunModelOpt = None
    model_arg: ModelArgOpt = None
    precision: RunPrecisionOpt = None
    optimizer: RunOptimizerOpt = None
    nproc_per_node: NprocPerNodeOpt = None
    ranks_per_node: RanksPerNodeOpt = None
    iterations: IterationsOpt = None
    warmup: WarmupOpt = None
    timeout_s: TimeoutSOpt = DEFAULT_TIMEOUT_S
    backend: BackendOpt = "auto"
    quiet: QuietOpt = False

    def run_kwargs(self) -> dict:
        """What ProfileOptions and ValidateOptions take alike from these flags (iterations and warmup
        apart: not given means each run's own default)."""
        from rtmodel_harness.model_choice import parse_model_args

        return {
            "model": self.model,
            "model_args": parse_model_args(self.model_arg),
            "precision": self.precision,
            "optimizer": self.optimizer,
            "nproc_per_node": self.nproc_per_node,
            "ranks_per_node": self.ranks_per_node,
            "timeout_s": self.timeout_s,
            "backend": self.backend,
            "progress": not self.quiet,
        }


def takes_run_flags(command):
    """Decorator for a command with a keyword-only parameter `run: RunFlags`: typer sees the flags in
    its place, the body gets them as one RunFlags."""
    return takes_group("run", RunFlags, field_options(RunFlags))(command)


ProfileOutOpt = Annotated[
    str | None,
    typer.Option(
        "--out", help="Profile JSON to write (checkpointed after each section); its directory must exist."
    ),
]
TraceOutOpt = Annotated[  # as typed: Path("") would be "." (the working directory), not an empty path
    str | None,
    typer.Option(
        "--trace-out",
        metavar="DIR",
        help="Also trace a few DDP iterations with torch.profiler into DIR, one file per rank, as your own "
        "loop would be traced (`rtmodel advise --trace DIR` reads them; docs/trace.md).",
    ),
]
QuickOpt = Annotated[  # profile's and emulate measure's: one meaning, a coarser run of seconds
    bool,
    typer.Option(
        "--quick",
        help="A run of seconds: profile: few iterations, sizes and repetitions; emulate measure: the default "
        "shaping only, not all three.",
    ),
]
ResumeOpt = Annotated[
    Path | None,
    typer.Option(
        "--resume",
        metavar="FILE",
        help="Finish the profile FILE an earlier run started: keep the sections it finished on the same "
        "setup, measure the rest into FILE. Alone it needs FILE to exist; with --out FILE too, a missing "
        "FILE is started (for requeued jobs).",
    ),
]
RepsOpt = Annotated[
    int | None, typer.Option("--reps", help=f"Repetitions per message size ({REPS[0]}; quick {REPS[1]}).")
]

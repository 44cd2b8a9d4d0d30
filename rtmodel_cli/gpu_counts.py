"""The GPU-count flags, one meaning each in every command: `--gpus N` is one count n, `--gpus-range A:B`
a doubling sweep A, 2A, 4A, ... up to B, `--gpus-list A,B,C` those counts.

Why three names: `--gpus` used to mean a count in advise, a range or a list in the sweep plots and either
in `plot factors`, so a line copied from one command meant something else in the next (issue "The
house": one name, one meaning). The old spellings are refused in one line that names the new flag
(`--gpus 8:1024` -> use --gpus-range 8:1024). Imports typer only: numpy's check of n
(runtime_model.core.scenario.check_gpus) is imported when a sweep is parsed, not for `rtmodel --help`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from rtmodel_cli.option_groups import field_options, takes_group
from runtime_model.core.defaults import DEFAULT_GPUS
from runtime_model.core.errors import InvalidValue, UserError

SWEEPS = "plot speedup, factors and what-if sweep n"  # the commands that take --gpus-range, --gpus-list
DEFAULT_RANGE = "8:1024"  # the sweep plots' n when none is given: the paper's scale and beyond


class BadGpus(UserError):
    """A --gpus, --gpus-range or --gpus-list value of the wrong kind (each flag takes one kind)."""


def gpu_count(value: str | int) -> int:
    """--gpus's parser: one count; a range or a list is refused naming the flag that takes it."""
    text = str(value).strip()
    if ":" in text:
        raise typer.BadParameter(f"takes one count n; a range of n is --gpus-range {text} ({SWEEPS})")
    if "," in text:
        raise typer.BadParameter(f"takes one count n; several n are --gpus-list {text} ({SWEEPS})")
    try:
        return int(text)
    except ValueError:
        raise typer.BadParameter(f"'{text}' is not a GPU count (an integer, e.g. 64)") from None


GpusOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus",
        metavar="N",
        parser=gpu_count,
        help=f"Number of GPUs n, one count. Not given: {DEFAULT_GPUS} (advise, topologies, plot factors, "
        f"variance, crossover), the sweep plots' --gpus-range {DEFAULT_RANGE}; calibrate: none (given: how "
        "the fit extrapolates to n). Several n: --gpus-range or --gpus-list.",
    ),
]
GpusRangeOpt = Annotated[
    str | None,
    typer.Option(
        "--gpus-range",
        metavar="A:B",
        help=f"GPU counts doubling from A up to B ({DEFAULT_RANGE} = 8,16,...,1024; the sweeps' default "
        f"{DEFAULT_RANGE}).",
    ),
]
GpusListOpt = Annotated[
    str | None,
    typer.Option("--gpus-list", metavar="A,B,...", help="GPU counts as a comma list (e.g. 8,12,16)."),
]


def _checked(counts: list[int], flag: str) -> list[int]:
    """The counts, each in the model's range (1 to runtime_model.core.defaults.MAX_GPUS), sorted, once."""
    from runtime_model.core.scenario import check_gpus  # lazily: numpy is not imported for `rtmodel --help`

    for n in counts:
        try:
            check_gpus("gpus", n)
        except InvalidValue as exc:
            raise BadGpus(exc.message_for(lambda _: flag)) from None
    return sorted(set(counts))


def parse_range(text: str) -> list[int]:
    """'8:1024' -> [8, 16, ..., 1024]: doubling from A up to B (B itself only if a power-of-2 multiple)."""
    parts = text.strip().split(":")
    if len(parts) != 2:
        one = "--gpus-list" if "," in text else "--gpus"
        raise BadGpus(f"--gpus-range '{text}' takes A:B (e.g. 8:1024); for {text}: use {one} {text}")
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError:
        raise BadGpus(f"--gpus-range '{text}': A and B must be integers (e.g. 8:1024)") from None
    if a < 1 or b < a:
        raise BadGpus(f"--gpus-range '{text}' needs 1 <= A <= B")
    return _checked([a << i for i in range((b // a).bit_length()) if a << i <= b], "--gpus-range")


def parse_list(text: str) -> list[int]:
    """'8,12,16' -> [8, 12, 16]; a range inside is refused naming --gpus-range."""
    if ":" in text:
        raise BadGpus(f"--gpus-list '{text}' takes counts A,B,...; a range A:B: use --gpus-range")
    counts = []
    for item in (s.strip() for s in text.split(",")):
        try:
            counts.append(int(item))
        except ValueError:
            raise BadGpus(f"--gpus-list '{text}': '{item}' is not a GPU count (e.g. 8,16,32)") from None
    return _checked(counts, "--gpus-list")


@dataclass(frozen=True)
class GpuSweep:
    """A sweep plot's n: one --gpus N, a --gpus-range A:B or a --gpus-list A,B,... (at most one given),
    declared once for every plot that sweeps n (`takes_gpu_sweep`)."""

    gpus: GpusOpt = None
    gpus_range: GpusRangeOpt = None
    gpus_list: GpusListOpt = None

    def counts(self, default: str = DEFAULT_RANGE) -> list[int]:
        """The n swept, sorted: the one flag given, else `default` (a range A:B)."""
        flags = {"--gpus": self.gpus, "--gpus-range": self.gpus_range, "--gpus-list": self.gpus_list}
        given = [flag for flag, value in flags.items() if value is not None]
        if len(given) > 1:
            raise BadGpus(f"give one of {' and '.join(given)}, not both")
        if self.gpus is not None:
            return _checked([self.gpus], "--gpus")
        if self.gpus_list is not None:
            return parse_list(self.gpus_list)
        return parse_range(self.gpus_range if self.gpus_range is not None else default)


def takes_gpu_sweep(command):
    """Decorator for a command with a keyword-only parameter `sweep: GpuSweep`: typer sees --gpus,
    --gpus-range and --gpus-list in its place, the body gets them as one GpuSweep."""
    return takes_group("sweep", GpuSweep, field_options(GpuSweep))(command)

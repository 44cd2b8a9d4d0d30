"""The local-SGD options, declared once for every command that takes them (advise, plot speedup,
validate; scenario-file keys too), with one meaning in each: the local-SGD configuration you would run.

H is the inner steps between outer all-reduces and 0 is no local SGD, everywhere; a value not given is
LocalSgd's default (H = 30, the configuration whose loss is measured:
runtime_model/prediction/local_sgd_convergence.py). What differs is only what a command does when no
--local-sgd-* option is given at all (`local_sgd_asked`'s `by_default`): advise shows its H = 30 row,
plot speedup draws no local-SGD line and validate trains none; the help text says so once.

Why one configuration and not a grid: each option changes the training algorithm (cadence, fragments,
overlap, compression); the user states the one they would run.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated

import typer

from rtmodel_cli.option_groups import field_options, takes_group
from rtmodel_inputs.local_sgd import KEYS, local_sgd_asked, local_sgd_configs  # what the options ask for
from runtime_model.prediction.local_sgd import DEFAULT_INNER_STEPS, INNER_STEPS, REPLICAS, WIRE_BITS

LocalSgdHOpt = Annotated[
    int | None,
    typer.Option(
        help=f"Local SGD (DiLoCo): inner steps H between outer all-reduces, {INNER_STEPS.describe()}, or 0 "
        f"for no local SGD (not given: {DEFAULT_INNER_STEPS}). With no --local-sgd-* option at all, advise "
        f"shows its H={DEFAULT_INNER_STEPS} row; plot speedup and validate run none.",
        show_default=False,
    ),
]
LocalSgdOverlapOpt = Annotated[
    int | None,
    typer.Option(
        help="Local SGD: inner steps an outer all-reduce may run behind (Streaming DiLoCo; default 0)."
    ),
]
LocalSgdFragmentsOpt = Annotated[
    int | None,
    typer.Option(
        help="Local SGD: parameter fragments synchronised at staggered steps (Streaming DiLoCo; default 1)."
    ),
]
LocalSgdBitsOpt = Annotated[
    int | None,
    typer.Option(
        help=f"Local SGD: bits per pseudo-gradient element on the wire ({', '.join(map(str, WIRE_BITS))}; "
        "default: the gradient's own dtype; validate runs 32 or 16)."
    ),
]
LocalSgdReplicaOpt = Annotated[
    str | None,
    typer.Option(
        help=f"Local SGD: what one replica is ({' | '.join(REPLICAS)}): a node with DDP inside it (default), "
        "or each GPU alone."
    ),
]


@dataclass(frozen=True)
class LocalSgdFlags:
    """The five local-SGD options as given (None: not given): one group, declared once here, that advise,
    plot speedup and validate take as one parameter (`takes_local_sgd`)."""

    local_sgd_h: LocalSgdHOpt = None
    local_sgd_overlap: LocalSgdOverlapOpt = None
    local_sgd_fragments: LocalSgdFragmentsOpt = None
    local_sgd_bits: LocalSgdBitsOpt = None
    local_sgd_replica: LocalSgdReplicaOpt = None

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def takes_local_sgd(command):
    """Decorator for a command with a keyword-only parameter `local_sgd_flags: LocalSgdFlags`: typer
    sees the five options in its place, the body gets them as one LocalSgdFlags."""
    return takes_group("local_sgd_flags", LocalSgdFlags, field_options(LocalSgdFlags))(command)


__all__ = ["KEYS", "LocalSgdFlags", "local_sgd_asked", "local_sgd_configs", "takes_local_sgd"]

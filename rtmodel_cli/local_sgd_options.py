"""advise's local-SGD options (scenario-file keys too): the third family's row, or none with --local-sgd-h 0.

Why one row and not a grid: each option changes the training algorithm (cadence, fragments, overlap,
compression); the user states the one they would run, and the defaults are the configuration whose loss
is measured (H = 30, runtime_model/prediction/local_sgd_convergence.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from runtime_model.prediction.local_sgd import DEFAULT_INNER_STEPS, REPLICAS, WIRE_BITS, LocalSgd

LocalSgdHOpt = Annotated[
    int | None,
    typer.Option(
        help=f"Local SGD (DiLoCo): inner steps H between outer all-reduces (default {DEFAULT_INNER_STEPS}; "
        "0 = no local-SGD row).",
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
        "default: the gradient's own dtype)."
    ),
]
LocalSgdReplicaOpt = Annotated[
    str | None,
    typer.Option(
        help=f"Local SGD: what one replica is ({' | '.join(REPLICAS)}): a node with DDP inside it (default), "
        "or each GPU alone."
    ),
]
KEYS = ("local_sgd_h", "local_sgd_overlap", "local_sgd_fragments", "local_sgd_bits", "local_sgd_replica")


def local_sgd_configs(opts: dict) -> list[LocalSgd]:
    """The local-SGD rows the merged options ask for: none with local_sgd_h = 0; else one, checked by
    LocalSgd itself (its errors name these options)."""
    h = opts.get("local_sgd_h")
    if h == 0:
        given = [k for k in KEYS[1:] if opts.get(k) is not None]
        if given:
            from runtime_model.core.errors import InvalidCombination

            raise InvalidCombination(
                "{local_sgd_h} turns the local-SGD row off, so {" + given[0] + "} has nothing to set",
                local_sgd_h=0,
                **{given[0]: opts[given[0]]},
            )
        return []
    return [
        LocalSgd(
            inner_steps=DEFAULT_INNER_STEPS if h is None else h,
            overlap_steps=opts.get("local_sgd_overlap") or 0,
            fragments=1 if opts.get("local_sgd_fragments") is None else opts["local_sgd_fragments"],
            bits=opts.get("local_sgd_bits"),
            replica="node" if opts.get("local_sgd_replica") is None else opts["local_sgd_replica"],
        )
    ]

"""NCCL's own algorithm choice (NCCL_ALGO unset): invert only the sizes at which NCCL ran its ring.

Why: choosing per call, NCCL runs a group that spans nodes as a tree for small messages and as a ring
for large ones (the model's choice too: the cheaper of the two, runtime_model.prediction.collectives). The two
differ by a few to 20% in time, too little for the regime detection to split the line, and a line that
mixes them, inverted as ring, gives an inter-node latency off by half (a 4 x 4 profile gave 8 us for
80 us). So each inter-node line is refitted on the sizes at which the model, with the links calibrated
so far (the line's own bandwidth, the combined inter-node latency), picks the ring, and inverted again;
until the sizes kept stop changing (the crossover moves with the latency, so a few rounds). A line with
fewer than two such sizes is dropped, said in a note.
"""

from __future__ import annotations

import numpy as np

from calibration.fitting import fit_affine
from calibration.inversion import MeasuredLine, invert_line
from calibration.links import combine_estimates
from calibration.units import fmt_bytes
from runtime_model.core.errors import UserError
from runtime_model.core.scenario import Link, Network
from runtime_model.prediction.collectives import modelled_parts_s

MAX_ROUNDS = 6


def ring_regime_lines(lines: list[MeasuredLine], intra: Link, notes: list[str]) -> list[MeasuredLine]:
    """`lines` (inter-node, with their samples) restricted to the sizes where NCCL ran its ring; what
    was restricted or dropped is appended to `notes`."""
    current = list(lines)
    kept: list[tuple[float, ...]] = [_sizes(line) for line in lines]
    for _ in range(MAX_ROUNDS):
        estimates = [invert_line(line, "ring", intra) for line in current]
        try:
            latency_s = max(combine_estimates(estimates, "inter").link.latency_s, 0.0)
        except UserError:  # no line resolved a bandwidth: nothing to place a crossover with
            break
        new_kept = [
            _ring_sizes(line, intra, Link(latency_s, est.bandwidth_Bps))
            for line, est in zip(lines, estimates, strict=True)
        ]
        if new_kept == kept:
            break
        kept = new_kept
        current = [_restricted(line, sizes) or line for line, sizes in zip(lines, kept, strict=True)]
    out = []
    for line, sizes in zip(lines, kept, strict=True):
        if sizes == _sizes(line):
            out.append(line)
        elif (restricted := _restricted(line, sizes)) is None:
            notes.append(
                f"{line.label}: NCCL's own choice ran its tree at (nearly) every size measured on this group, as the "
                "model picks with the calibrated links: not used for the inter-node link (measure larger messages, "
                "or profile with NCCL_ALGO=Ring)"
            )
        else:
            out.append(restricted)
            notes.append(
                f"{line.label}: NCCL's own choice runs its tree below {fmt_bytes(sizes[0])} on this group (the model, "
                f"with the calibrated links): the inter-node link is taken from the {len(sizes)} sizes >= "
                f"{fmt_bytes(sizes[0])}, where it ran its ring"
            )
    return out


def _sizes(line: MeasuredLine) -> tuple[float, ...]:
    return tuple(float(s) for s in np.unique(line.nbytes))


def _ring_sizes(line: MeasuredLine, intra: Link, inter: Link) -> tuple[float, ...]:
    """The line's sizes at which the model's NCCL picks the ring over the tree on this group."""
    ring, tree = (Network(intra, inter, name="provisional", nccl_algo=a) for a in ("ring", "tree"))
    return tuple(
        s
        for s in _sizes(line)
        if sum(modelled_parts_s(line.group, s, ring)) <= sum(modelled_parts_s(line.group, s, tree))
    )


def _restricted(line: MeasuredLine, sizes: tuple[float, ...]) -> MeasuredLine | None:
    """The line refitted on its samples at `sizes` (None with fewer than two sizes)."""
    if len(sizes) < 2:
        return None
    keep = np.isin(line.nbytes, sizes)
    nbytes, times = line.nbytes[keep], line.times_s[keep]
    fit = fit_affine(nbytes, times)
    return MeasuredLine(
        line.group,
        f"{line.label} (ring sizes >= {fmt_bytes(sizes[0])})",
        fit.fixed_s,
        fit.fixed_sd_s,
        0.0 if "per_byte_s" in fit.unresolved else fit.per_byte_s,
        fit.per_byte_rel_sd,
        nbytes,
        times,
    )

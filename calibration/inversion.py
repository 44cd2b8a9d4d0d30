"""Measured all-reduce lines -> link-class estimates, by inverting the cost the profiled backend ran.

Why the model's own functions and not a formula here: calibration once inverted every profile as gloo's
flat ring (fixed = 2(p-1) alpha) while the model extrapolated NCCL profiles with NCCL's ring, where only
the steps that cross nodes pay the network's latency; a 256-GPU prediction then got the wrong latency.
Here the model's cost (runtime_model.prediction.collectives.modelled_parts_s, for the algorithm the profile ran) is
evaluated at unit parameters, which gives for one group shape how many steps pay each link class's
latency and the bandwidth part per byte at 1 B/s of the bottleneck link; a measured line
t(S) = fixed + S * per_byte is then solved for the link class:

    fixed    = n_intra * alpha_intra + n_inter * alpha_inter
    per_byte = c / B            (B: the bottleneck link's bandwidth, c: per_byte at B = 1 B/s)

- flat ring (gloo): inside a node n_intra = 2(p-1); across nodes n_inter = 2(p-1), n_intra = 0;
- NCCL ring across m nodes: n_inter = 2(m-1), n_intra = 2(p-m);
- NCCL tree across m nodes: n_inter = 2 ceil(log2 m), n_intra = 2(ppn-1);
- inside one node NCCL is costed as the flat ring over the intra-node link, as the model does.

A group spanning nodes with several ranks per node (NCCL) has both latencies in its fixed cost. It is
solved for alpha_inter given alpha_intra from the intra-node patterns (their combined link):
alpha_inter = (fixed - n_intra alpha_intra) / n_inter, with alpha_intra's uncertainty carried into
alpha_inter's (sd = hypot(sd_fixed, n_intra sd_intra) / n_inter). The bandwidth is the bottleneck
link's, as the flat ring's inversion always took it: the NIC's (shared by q flows) across nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from calibration.links import LinkEstimate
from runtime_model.core.scenario import GroupShape, Link, Network
from runtime_model.prediction.collectives import modelled_parts_s

_NEVER_BOTTLENECK_BPS = 1e30  # a probe link this fast never limits the bandwidth part


@dataclass(frozen=True)
class MeasuredLine:
    """One group shape's fitted all-reduce line (the large-message regime), before inversion."""

    group: GroupShape
    label: str
    fixed_s: float
    fixed_sd_s: float
    per_byte_s: float  # 0 when the fit resolved no per-byte cost (the estimate's bandwidth is then inf)
    per_byte_rel_sd: float
    nbytes: np.ndarray | None = field(default=None, repr=False, compare=False)  # the samples fitted
    times_s: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def link_class(self) -> str:
        """The link class this line estimates: "intra" inside one node, else "inter"."""
        return "intra" if self.group.nodes == 1 else "inter"


def line_algorithm(profiled_algo: str | None) -> str | None:
    """The algorithm a measured large-message line ran: the profile's, with NCCL's own choice ("auto")
    taken as ring, the one the model (and NCCL's tuner) picks for large messages beyond 2 nodes: its
    bandwidth term 2(p-1)/p S / B is below the tree's 2S / B there. On 2 nodes the tree sends S and may
    be the cheaper one (runtime_model.prediction.collectives); nccl_auto.ring_regime_lines then keeps only the sizes
    at which the model picks the ring, so a line is never inverted under the wrong algorithm."""
    return "ring" if profiled_algo == "auto" else profiled_algo


def latency_steps(group: GroupShape, algo: str | None) -> tuple[float, float]:
    """(n_intra, n_inter): how many of the model's latency terms each link class's alpha pays in one
    all-reduce on `group` with `algo` (None: flat ring; "ring"/"tree": NCCL's), from the model itself."""

    def latency_part(intra_s: float, inter_s: float) -> float:
        probe = Network(Link(intra_s, 1.0), Link(inter_s, 1.0), name="probe", nccl_algo=algo)
        return modelled_parts_s(group, 1.0, probe)[0]

    return latency_part(1.0, 0.0), latency_part(0.0, 1.0)


def per_byte_at_unit_bandwidth(group: GroupShape, algo: str | None, link_class: str) -> float:
    """Seconds per byte of the model's bandwidth part when the `link_class` link carries 1 B/s and is
    the bottleneck (the other link never limits): measured per_byte = this / bandwidth."""
    unit, fast = Link(0.0, 1.0), Link(0.0, _NEVER_BOTTLENECK_BPS)
    intra, inter = (unit, fast) if link_class == "intra" else (fast, unit)
    probe = Network(intra, inter, name="probe", nccl_algo=algo)
    return modelled_parts_s(group, 1.0, probe)[1]


def invert_line(line: MeasuredLine, algo: str | None, intra: Link | None = None) -> LinkEstimate:
    """The link-class estimate `line` gives under `algo` (see line_algorithm). `intra` is the
    calibrated intra-node link, needed only when the line's fixed cost holds intra-node steps too (an
    NCCL group spanning nodes with several ranks per node): ValueError without it then."""
    group = line.group
    n_intra, n_inter = latency_steps(group, algo)
    if line.link_class == "intra":
        steps, known_s, known_sd_s = n_intra, 0.0, 0.0
    elif n_intra == 0:
        steps, known_s, known_sd_s = n_inter, 0.0, 0.0
    elif intra is None:
        raise ValueError(
            f"{line.label}: its fixed cost holds {n_intra:g} intra-node steps; pass the intra link"
        )
    else:
        steps, known_s, known_sd_s = n_inter, n_intra * intra.latency_s, n_intra * intra.latency_sd_s
    unit = per_byte_at_unit_bandwidth(group, algo, line.link_class)
    return LinkEstimate(
        label=line.label,
        latency_s=(line.fixed_s - known_s) / steps,
        latency_sd_s=math.hypot(line.fixed_sd_s, known_sd_s) / steps,
        bandwidth_Bps=unit / line.per_byte_s if line.per_byte_s > 0 else math.inf,
        bandwidth_rel_sd=line.per_byte_rel_sd,
        nic_sharing=group.nic_sharing if group.nodes > 1 else 1,
    )

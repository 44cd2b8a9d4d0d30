"""Link classes (alpha, beta) from per-pattern estimates: combined, their disagreement reported.

Every measured pattern gives one estimate of the link class it bottlenecks on (calibration.inversion
inverts its line with the cost formula the profiled backend ran). Estimates are combined by
inverse-variance weighting; how much they disagree is itself reported, because it says how far the
alpha-beta model is from this cluster (a measured pattern the model cannot reproduce from one alpha and
one beta is a warning about extrapolating to shapes that were not measured).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime_model.core.errors import UserError
from runtime_model.core.scenario import Link

FLOW_CAP_MIN_REL = 0.05  # below this a lone flow's shortfall is not told from the fit's systematic error
# concurrent groups whose flows are each held at a per-flow cap moved 6-12 % below it on the emulated
# cluster (host pauses and start skew a capped flow cannot catch up: rtmodel_emulation/MEASUREMENTS.md "Per-flow cap")
CAPPED_SHARING_SHORTFALL = 0.12


@dataclass(frozen=True)
class LinkEstimate:
    """One pattern's view of a link class."""

    label: str  # e.g. "pair-inter p2-s2-q2"
    latency_s: float
    latency_sd_s: float
    bandwidth_Bps: float  # inf when the fit found no per-byte cost
    bandwidth_rel_sd: float
    nic_sharing: int = 1  # flows on the busiest NIC: 1 = one flow alone (what a per-flow cap limits)


@dataclass(frozen=True)
class CombinedLink:
    link: Link
    estimates: tuple[LinkEstimate, ...]
    latency_chi2_dof: float  # 0 with a single estimate
    bandwidth_chi2_dof: float
    latency_spread: float  # (max - min) / combined, 0 with one estimate
    bandwidth_spread: float
    warnings: tuple[str, ...]


def combine_estimates(
    estimates: list[LinkEstimate],
    link_class: str,
    disagreement_sigma: float = 3.0,
    disagreement_rel: float = 0.10,
) -> CombinedLink:
    """Inverse-variance weighted latency (linear) and bandwidth (log scale); the uncertainty is inflated
    by the Birge ratio sqrt(chi2/dof) when the estimates disagree more than their errors allow."""
    if not estimates:
        raise UserError(f"no estimates for the {link_class} link")
    warnings: list[str] = []
    usable_bw = [e for e in estimates if np.isfinite(e.bandwidth_Bps)]
    for e in estimates:
        if not np.isfinite(e.bandwidth_Bps):
            warnings.append(f"{e.label}: no per-byte cost resolved; not used for the {link_class} bandwidth")
    if not usable_bw:
        raise UserError("no pattern resolved a per-byte cost (measure larger messages)")

    lat = np.array([e.latency_s for e in estimates])
    lat_sd = np.array([max(e.latency_sd_s, 1e-3 * abs(e.latency_s), 1e-9) for e in estimates])
    lat_mean, lat_sd_comb, lat_chi = _weighted(lat, lat_sd)

    log_bw = np.log([e.bandwidth_Bps for e in usable_bw])
    log_sd = np.array([max(e.bandwidth_rel_sd, 1e-3) for e in usable_bw])
    log_mean, log_sd_comb, bw_chi = _weighted(log_bw, log_sd)
    bandwidth = float(np.exp(log_mean))

    lat_spread = float((lat.max() - lat.min()) / lat_mean) if lat_mean > 0 and lat.size > 1 else 0.0
    bw_values = np.exp(log_bw)
    bw_spread = float((bw_values.max() - bw_values.min()) / bandwidth) if bw_values.size > 1 else 0.0
    if bw_values.size > 1 and bw_chi > disagreement_sigma**2 and bw_spread > disagreement_rel:
        listing = ", ".join(f"{e.label} {e.bandwidth_Bps / 1e9:.3g} GB/s" for e in usable_bw)
        warnings.append(
            f"{link_class} bandwidth estimates disagree by {bw_spread:.0%} ({listing}; chi2/dof={bw_chi:.1f}): "
            "the alpha-beta ring model does not describe all measured patterns; uncertainty inflated"
        )
    if lat.size > 1 and lat_chi > disagreement_sigma**2 and lat_spread > disagreement_rel:
        listing = ", ".join(f"{e.label} {e.latency_s * 1e6:.3g} us" for e in estimates)
        warnings.append(
            f"{link_class} latency estimates disagree by {lat_spread:.0%} ({listing}; chi2/dof={lat_chi:.1f}): "
            "per-step latency depends on the group; uncertainty inflated"
        )
    labels = " + ".join(f"{e.label}" for e in estimates)
    link = Link(
        latency_s=max(float(lat_mean), 0.0),
        bandwidth_Bps=bandwidth,
        source=f"measured: {labels}" + (" (weighted)" if len(estimates) > 1 else ""),
        latency_sd_s=float(lat_sd_comb),
        bandwidth_rel_sd=float(log_sd_comb),  # sd of log(bandwidth) = relative sd to first order
    )
    return CombinedLink(link, tuple(estimates), lat_chi, bw_chi, lat_spread, bw_spread, tuple(warnings))


def _weighted(x: np.ndarray, sd: np.ndarray) -> tuple[float, float, float]:
    """Weighted mean, its sd (Birge-inflated when chi2/dof > 1), and chi2/dof (0 for one value)."""
    w = 1.0 / sd**2
    mean = float(np.sum(w * x) / np.sum(w))
    sd_mean = float(np.sqrt(1.0 / np.sum(w)))
    if x.size < 2:
        return mean, sd_mean, 0.0
    chi2_dof = float(np.sum(w * (x - mean) ** 2) / (x.size - 1))
    return mean, sd_mean * max(1.0, np.sqrt(chi2_dof)), chi2_dof


def split_flow_cap(
    estimates: list[LinkEstimate], link_class: str
) -> tuple[CombinedLink, CombinedLink] | None:
    """(NIC capacity, per-flow cap) when the estimates hold both flows alone (q = 1) and flows sharing a
    NIC (q > 1) and the lone flow is slower than the NIC then proves to be: one flow cannot fill the
    link (a single TCP stream, link-aggregation hashing), so q flows get min(B / q, cap), not B / q.
    None when either kind is missing or a lone flow fills the NIC (one bandwidth explains both)."""
    shared = [e for e in estimates if e.nic_sharing > 1 and np.isfinite(e.bandwidth_Bps)]
    alone = [e for e in estimates if e.nic_sharing == 1 and np.isfinite(e.bandwidth_Bps)]
    if not shared or not alone:
        return None
    nic = combine_estimates(shared, f"{link_class} (NIC capacity, flows sharing)")
    cap = combine_estimates(alone, f"{link_class} (one flow alone)")
    # a cap is claimed only when the lone flow is slower beyond both estimates' noise (3 sigma of the
    # log ratio) and by more than FLOW_CAP_MIN_REL: a difference inside the noise is one bandwidth
    noise = 3 * float(np.hypot(nic.link.bandwidth_rel_sd, cap.link.bandwidth_rel_sd))
    if np.log(nic.link.bandwidth_Bps / cap.link.bandwidth_Bps) <= max(noise, FLOW_CAP_MIN_REL):
        return None
    return nic, cap


def capacity_is_a_lower_bound(nic: CombinedLink, cap: CombinedLink) -> bool:
    """True when the flows that shared a NIC each moved at the per-flow cap (within what capped flows
    sharing a NIC were measured to lose, CAPPED_SHARING_SHORTFALL, or the estimates' noise): their sum then
    shows the NIC only as at least q x cap (rtmodel_emulation/MEASUREMENTS.md, "Per-flow cap": a 1000 Mbit NIC
    under a 300 Mbit cap calibrated at 531 with 2 flows)."""
    noise = 3 * float(np.hypot(nic.link.bandwidth_rel_sd, cap.link.bandwidth_rel_sd))
    per_flow = min(e.bandwidth_Bps / e.nic_sharing for e in nic.estimates)
    return per_flow >= cap.link.bandwidth_Bps * (1 - max(noise, CAPPED_SHARING_SHORTFALL))

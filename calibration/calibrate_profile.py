"""Profile document -> runtime-model parameters (Network, Compute) with fit reports and provenance.

Steps: validate; fit each measured group shape's all-reduce line (patterns that form the same shape
are pooled, so one measurement is never counted twice); keep the measured lines as group_costs (the
model uses them for exactly those shapes); invert every line with the cost formula the profiled
backend ran (calibration.inversion: gloo's flat ring, NCCL's ring or tree) into link-class estimates
and combine them, the intra-node link first (an NCCL group spanning nodes pays both latencies); fall
back to a caller's preset network for a link class the profile cannot measure (single-node profile: no
inter-node link), saying so; fit compute and bucket timing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from calibration.compute_fit import ComputeFit, fit_compute
from calibration.fitting import AffineFit, RegimeFit, fit_regimes
from calibration.in_flight import group_concurrency, in_flight_reports
from calibration.inversion import MeasuredLine, invert_line, line_algorithm
from calibration.links import (
    CombinedLink,
    LinkEstimate,
    capacity_is_a_lower_bound,
    combine_estimates,
    split_flow_cap,
)
from calibration.nccl_auto import ring_regime_lines
from calibration.profile_view import Profile
from calibration.units import fmt_bytes, fmt_per_byte
from calibration.unmeasured import kept_as_measured, link_line_key, links_of, unused_pattern_note
from rtmodel_documents.calibration_document import Calibration, FitReport
from rtmodel_documents.profile_checks import CalibrationError
from runtime_model.core.scenario import AffineCost, ClusterShape, GroupShape, Link, Network

GLOO_WORKER_THREADS = 2  # torch's ProcessGroupGloo.Options default (threads=2)


def calibrate(
    profile: Profile,
    fallback_network: Network | None = None,
    distribution: str = "empirical",
    origin: str | None = None,
    as_measured: bool = False,
) -> Calibration:
    """Fit the runtime model's parameters to a checked, typed profile (calibration.profile_view builds it:
    load_profile from a file, profile_from_document from a parsed document).

    fallback_network supplies any link class the profile cannot measure (the inter-node link of a
    single-node profile, the intra-node link of a one-rank-per-node profile, a link whose patterns
    resolved no per-byte cost); without it such a profile raises CalibrationError (`rtmodel calibrate`
    and `rtmodel advise` always pass one: the presets named, else the preset library's defaults).
    distribution chooses which C distribution the returned Compute carries ("empirical" or "normal");
    origin names the profile in messages (default: the Profile's origin, its file when it was loaded
    from one). A link the profile marks unmeasured (ranks sharing a GPU, pretend nodes) is filled like
    one it has no pattern for, and its patterns are not used; as_measured keeps it as measured instead,
    for a run on the profiled machine itself (`rtmodel validate`), whose ranks have that very link.
    """
    origin = origin or profile.origin
    measured: ClusterShape = profile.shape
    lines = _PatternLines(unmeasured={} if as_measured else dict(profile.unmeasured_links))
    for key, (group, names, nbytes, times) in _pooled_patterns(profile).items():
        lines.add(key, group, f"{'+'.join(names)} {key}", nbytes, times)
    fits, notes, provenance = lines.fits, lines.notes, lines.provenance

    algo = line_algorithm(profile.nccl_algo)
    links: dict[str, Link] = {}
    for cls in ("intra", "inter"):  # intra first: an NCCL line across nodes is solved given its latency
        cls_lines = lines.lines[cls]
        if cls == "inter" and profile.nccl_algo == "auto":
            cls_lines = ring_regime_lines(cls_lines, links["intra"], notes)
        estimates = [invert_line(line, algo, links.get("intra")) for line in cls_lines]
        links[cls] = _link_for_class(
            cls, estimates, fallback_network, measured, fits, notes, provenance, lines.unmeasured.get(cls)
        )
    if as_measured:
        notes.extend(kept_as_measured(profile.unmeasured_links))
    notes.extend(_algorithm_notes(profile, algo, provenance))

    flight_fits, flight_notes = in_flight_reports(profile.in_flight)
    fits.extend(flight_fits)
    notes.extend(flight_notes)

    cf = fit_compute(profile, distribution)
    fits.append(cf.report)
    notes.extend(cf.notes)
    provenance.update(_compute_provenance(cf, distribution))
    network = _measured_network(profile, links, lines.group_costs, provenance)
    network = _with_group_concurrency(network, profile, provenance)
    info = {
        "origin": origin,
        "created_utc": profile.created_utc,
        "backend": profile.backend,
        "device": profile.device,
        "torch_version": profile.torch_version,
        "nccl_version": profile.nccl_version,
        "model": str(profile.workload.model),
    }
    return Calibration(
        network, cf.compute, cf.buckets, measured, fits, provenance, notes, info, cf.gossip, cf.ddp_work
    )


@dataclass
class _PatternLines:
    """What the all-reduce patterns' lines give: their fit reports, notes and provenance, the measured
    group costs, and the lines per link class (calibration.inversion turns them into link estimates)."""

    fits: list[FitReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    group_costs: dict[str, AffineCost] = field(default_factory=dict)
    lines: dict[str, list[MeasuredLine]] = field(default_factory=lambda: {"intra": [], "inter": []})
    # link class -> why its patterns measure no real link
    unmeasured: dict[str, str] = field(default_factory=dict)

    def add(self, key: str, group: GroupShape, label: str, nbytes: np.ndarray, times: np.ndarray) -> None:
        """Fit one group shape's pooled samples (skipped, said in a note, with fewer than 2 sizes or on a
        link the profile marks unmeasured)."""
        skipped = unused_pattern_note(label, group, self.unmeasured)
        if skipped:
            self.notes.append(skipped)
            return
        n_sizes = np.unique(nbytes).size
        if n_sizes < 2:
            self.notes.append(
                f"{label}: only {n_sizes} message size measured; no affine fit possible, pattern skipped"
            )
            return
        rf = fit_regimes(nbytes, times)
        line = rf.large
        large = nbytes >= (rf.breakpoint_bytes or 0)  # the samples of the line the model uses
        self.fits.extend(_pattern_reports(label, rf))
        regime = f" (large-message regime >= {fmt_bytes(rf.breakpoint_bytes)})" if rf.small else ""
        where = (
            f"{label}, {line.n_sizes} sizes {fmt_bytes(line.min_bytes)}..{fmt_bytes(line.max_bytes)}{regime}"
        )
        if "per_byte_s" in line.unresolved:
            self.notes.append(
                f"{label}: per-byte cost not resolved ({where}); not used as a measured group cost, the model "
                "derives this shape from the link classes"
            )
        else:
            self.group_costs[key] = AffineCost(
                fixed_s=line.fixed_s,
                per_byte_s=line.per_byte_s,
                source=f"measured: {where}",
                fixed_sd_s=line.fixed_sd_s,
                per_byte_rel_sd=line.per_byte_rel_sd,
            )
            self.provenance[f"group_costs.{key}"] = f"measured ({where})"
        if rf.small is not None:
            s = rf.small
            self.notes.append(
                f"{label}: two regimes, breakpoint {fmt_bytes(rf.breakpoint_bytes)}: small messages "
                f"fixed {s.fixed_s * 1e6:.3g} us + {fmt_per_byte(s.per_byte_s)} (reported only); the model uses the "
                f"large-message regime fixed {line.fixed_s * 1e6:.3g} us + {fmt_per_byte(line.per_byte_s)} because "
                "gradient buckets are MBs (AffineCost holds one line)"
            )
        measured = MeasuredLine(
            group,
            label,
            line.fixed_s,
            line.fixed_sd_s,
            0.0 if "per_byte_s" in line.unresolved else line.per_byte_s,  # -> not used for bandwidth
            line.per_byte_rel_sd,
            *((nbytes, times) if rf.small is None else (nbytes[large], times[large])),
        )
        self.lines[measured.link_class].append(measured)


def _algorithm_notes(profile: Profile, line_algo: str | None, provenance: dict[str, str]) -> list[str]:
    """On NCCL, which cost formula the lines were inverted with and which algorithm costs unmeasured shapes
    (nothing off NCCL: the flat ring, inverted and extrapolated as always)."""
    if profile.nccl_algo is None:
        return []
    env = profile.nccl_algo_env
    why = f"NCCL_ALGO={env!r} when profiled" if env else "NCCL_ALGO unset when profiled: NCCL's own choice"
    provenance["nccl_algo"] = f"{profile.nccl_algo} ({why})"
    large = " (NCCL's choice for large messages)" if profile.nccl_algo == "auto" else ""
    return [
        f"all-reduce lines inverted with NCCL's {line_algo}{large}: across nodes only the inter-node steps pay "
        "the network latency; groups spanning nodes with several ranks per node are solved for it given the "
        f"calibrated intra-node latency. Unmeasured shapes are costed with nccl_algo={profile.nccl_algo} ({why})"
    ]


def _compute_provenance(cf: ComputeFit, distribution: str) -> dict[str, str]:
    """Where the Compute's means, distribution, variation and bucket ready times came from."""
    provenance = {}
    src = cf.compute.source.removeprefix("measured: ")
    for name in ("forward_s", "backward_s", "optimizer_s"):
        provenance[f"compute.{name}"] = f"measured (mean of {src})"
    part = "" if cf.compute.variation.is_iid else ", within ranks"
    provenance["compute.distribution"] = (
        f"measured ({distribution}, {len(cf.empirical.samples_s)} samples{part})"
    )
    provenance["compute.variation"] = next(n for n in cf.notes if n.startswith("compute variation:"))
    for layout in ("ddp", "gossip"):
        provenance[f"compute.{layout}_buckets"] = (
            f"sizes from workload ({len(getattr(cf.buckets, layout))} buckets); "
            "ready fractions measured (mean ready time / mean backward time)"
        )
    return provenance


def _network_name(profile: Profile, provenance: dict[str, str]) -> str:
    """What the header calls the network: "measured 2x2 gloo" only where both links were measured; a link
    taken from a preset is named as one (a two-rank profile measures one link class, or none)."""
    where = f"{profile.shape.nodes}x{profile.shape.gpus_per_node} {profile.backend or ''}".rstrip()
    source = {cls: provenance.get(f"{cls}.bandwidth_Bps", "measured") for cls in ("intra", "inter")}
    presets = {cls: s.removeprefix("preset ") for cls, s in source.items() if s.startswith("preset ")}
    if not presets:
        return f"measured {where}"
    if len(presets) == 2:
        return f"presets {presets['intra']} + {presets['inter']} (neither link measured)"
    (cls, name), other = next(iter(presets.items())), ("inter" if "intra" in presets else "intra")
    return f"{other} measured {where}, {cls} preset {name}"


def _measured_network(
    profile: Profile, links: dict[str, Link], group_costs: dict[str, AffineCost], provenance: dict[str, str]
) -> Network:
    """The Network of the calibrated links and measured group costs, with the backend's concurrency."""
    network = Network(
        intra=links["intra"],
        inter=links["inter"],
        name=_network_name(profile, provenance),
        group_costs=group_costs,
        concurrent_collectives=GLOO_WORKER_THREADS if profile.backend == "gloo" else 1,
        # shapes the profile did not measure: NCCL's ring/tree as NCCL_ALGO left it, the flat ring gloo runs
        nccl_algo=profile.nccl_algo,
    )
    if network.concurrent_collectives > 1:
        provenance["concurrent_collectives"] = (
            f"{network.concurrent_collectives}: gloo's ProcessGroupGloo runs collectives on 2 worker threads"
        )
    return network


def _with_group_concurrency(network: Network, profile: Profile, provenance: dict[str, str]) -> Network:
    """The network with the gain of two groups over one where the profile timed it over links it
    measured: the gain is the host's or the link's (gloo through the CPU), not a preset's."""
    measured = group_concurrency(profile.in_flight)
    if measured is None:
        return network
    gain, pattern, source = measured
    crossed = {c for p in profile.communication.patterns if p.pattern == pattern for c in links_of(p.group)}
    presets = sorted(
        c for c in crossed if not provenance.get(f"{c}.bandwidth_Bps", "").startswith("measured")
    )
    if presets or not crossed:
        provenance["group_concurrency"] = f"1 (not used: {source}, over a link taken from a preset)"
        return network
    provenance["group_concurrency"] = source
    return replace(network, group_concurrency=gain)


def _pooled_patterns(profile: Profile) -> dict[str, tuple[GroupShape, list[str], np.ndarray, np.ndarray]]:
    """Samples per exact group shape; patterns forming the same shape (node = all on one node) pool.

    A profiler may measure such a shape once and list the same results under each pattern name: exact
    duplicates are counted once, or the fit would claim more samples (and precision) than it has.
    """
    pooled: dict[str, list] = defaultdict(lambda: [None, [], [], [], set()])
    for pat, res in ((p, r) for p in profile.communication.patterns for r in p.results):
        entry = pooled[pat.group.key]
        entry[0] = pat.group
        if pat.pattern not in entry[1]:
            entry[1].append(pat.pattern)
        samples_s = res.own_group_s  # a rank waits for its own group, not for the slowest of all groups
        fingerprint = (res.bytes, samples_s)
        if fingerprint in entry[4]:
            continue
        entry[4].add(fingerprint)
        entry[2].extend([res.bytes] * len(samples_s))
        entry[3].extend(samples_s)
    return {
        k: (g, names, np.asarray(b, float), np.asarray(t, float)) for k, (g, names, b, t, _) in pooled.items()
    }


def _pattern_reports(label: str, rf: RegimeFit) -> list[FitReport]:
    reports = [_affine_report(label, "pattern", rf.large)]
    if rf.small is not None:
        reports[0].warnings.append(
            f"two regimes: this line covers >= {fmt_bytes(rf.breakpoint_bytes)}; one line over all sizes "
            f"misfit by up to {rf.single.worst_rel_residual:.0%}"
        )
        reports.append(_affine_report(f"{label} small messages", "pattern-small", rf.small))
    return reports


def _affine_report(name: str, kind: str, f: AffineFit) -> FitReport:
    warnings = []
    if f.worst_rel_residual > 0.10:
        warnings.append(f"affine line misfits by {f.worst_rel_residual:.0%} at {fmt_bytes(f.worst_at_bytes)}")
    if "fixed_s" in f.unresolved:
        warnings.append("fixed cost consistent with 0 (latency not resolved: measure smaller messages)")
    if "per_byte_s" in f.unresolved:
        warnings.append("per-byte cost consistent with 0 (bandwidth not resolved: measure larger messages)")
    if f.noise_rel > 0.20:
        warnings.append(f"noisy samples (robust scatter {f.noise_rel:.0%} per sample)")
    if f.n_sizes < 4:
        warnings.append(f"only {f.n_sizes} message sizes")
    return FitReport(
        name=name,
        kind=kind,
        params={"fixed_s": (f.fixed_s, f.fixed_sd_s), "per_byte_s": (f.per_byte_s, f.per_byte_sd_s)},
        r2=f.r2 if np.isfinite(f.r2) else None,
        worst_rel_residual=f.worst_rel_residual,
        n_points=f.n_sizes,
        n_samples=f.n_samples,
        size_range_bytes=(f.min_bytes, f.max_bytes),
        warnings=warnings,
    )


def _link_for_class(
    cls: str,
    ests: list[LinkEstimate],
    fallback: Network | None,
    measured: ClusterShape,
    fits: list[FitReport],
    notes: list[str],
    provenance: dict[str, str],
    why_unmeasured: str | None = None,
) -> Link:
    """Combined measured link, or the fallback preset's (said in provenance), or a clear error."""
    comb: CombinedLink | None = None
    if why_unmeasured or not ests:
        why_missing = why_unmeasured or (
            f"the profile is single-node ({measured.gpus_per_node} ranks on 1 node): no inter-node pattern"
            if cls == "inter"
            else f"the profile has 1 rank per node ({measured.nodes} nodes): no intra-node pattern"
        )
    else:
        try:
            comb = combine_estimates(ests, cls)
        except ValueError as exc:
            why_missing = str(exc)
    if comb is None:
        if fallback is None:
            flag, what = (
                ("--network", "inter-node network") if cls == "inter" else ("--intra", "intra-node link")
            )
            raise CalibrationError(
                f"cannot calibrate the {cls}-node link: {why_missing}; pass {flag} NAME (a preset {what}) for it"
            )
        link: Link = getattr(fallback, cls)
        # A preset link names itself ("preset pcie4"); otherwise name the network it came from.
        source = link.source if link.source.startswith("preset ") else f"preset {fallback.name}"
        for param in ("latency_s", "bandwidth_Bps"):
            provenance[f"{cls}.{param}"] = source
        if why_unmeasured:  # the one line a user reads: the profile's own link was not a real one
            provenance[link_line_key(cls)] = f"not measured ({why_unmeasured}); using {source}"
        notes.append(
            f"{cls}-node link NOT measured ({why_missing}): taken from {source} "
            f"({link.latency_s * 1e6:.3g} us, {link.bandwidth_Bps / 1e9:.3g} GB/s)"
        )
        return Link(link.latency_s, link.bandwidth_Bps, source, link.latency_sd_s, link.bandwidth_rel_sd)
    detail = " + ".join(e.label for e in ests)
    for param in ("latency_s", "bandwidth_Bps"):
        provenance[f"{cls}.{param}"] = f"measured ({detail}" + (", weighted)" if len(ests) > 1 else ")")
    lk = comb.link
    split = split_flow_cap(ests, cls)
    if split is not None:
        lk = _with_flow_cap(lk, *split, provenance, notes, cls)
    fits.append(
        FitReport(
            name=f"link {cls}",
            kind="link",
            params={
                "latency_s": (lk.latency_s, lk.latency_sd_s),
                "bandwidth_Bps": (lk.bandwidth_Bps, lk.bandwidth_Bps * lk.bandwidth_rel_sd),
                **(
                    {"flow_cap_Bps": (lk.flow_cap_Bps, lk.flow_cap_Bps * split[1].link.bandwidth_rel_sd)}
                    if split is not None
                    else {}
                ),
            },
            n_points=len(ests),
            warnings=[] if split is not None else list(comb.warnings),
        )
    )
    if len(ests) > 1:
        listing = "; ".join(
            f"{e.label}: {e.latency_s * 1e6:.3g} us +- {e.latency_sd_s * 1e6:.2g}, "
            f"{e.bandwidth_Bps / 1e9:.4g} GB/s +- {e.bandwidth_rel_sd:.1%}"
            for e in ests
        )
        notes.append(
            f"{cls} link estimates ({listing}): bandwidth spread {comb.bandwidth_spread:.1%} "
            f"(chi2/dof {comb.bandwidth_chi2_dof:.2g}), latency spread {comb.latency_spread:.1%} "
            f"(chi2/dof {comb.latency_chi2_dof:.2g}) - how well one alpha-beta ring model fits all patterns"
        )
    return lk


def _with_flow_cap(
    combined: Link,
    nic: CombinedLink,
    cap: CombinedLink,
    provenance: dict[str, str],
    notes: list[str],
    cls: str,
) -> Link:
    """The link with the NIC's capacity from the patterns whose flows share a NIC and the per-flow cap
    from those with one flow alone; the latency stays the one fitted over every pattern."""
    provenance[f"{cls}.bandwidth_Bps"] = (
        f"measured NIC capacity ({' + '.join(e.label for e in nic.estimates)})"
    )
    provenance[f"{cls}.flow_cap_Bps"] = (
        f"measured one flow alone ({' + '.join(e.label for e in cap.estimates)})"
    )
    notes.append(
        f"{cls} link: one flow alone reaches {cap.link.bandwidth_Bps / 1e9:.4g} GB/s but flows sharing a NIC "
        f"together get {nic.link.bandwidth_Bps / 1e9:.4g} GB/s: a per-flow cap (one TCP stream, link "
        "aggregation) below the NIC's capacity; q flows are charged min(capacity / q, cap) each"
    )
    if capacity_is_a_lower_bound(nic, cap):
        q = max(e.nic_sharing for e in nic.estimates)
        provenance[f"{cls}.bandwidth_Bps"] += f", a lower bound: its {q} flows each moved at the cap"
        notes.append(
            f"{cls} link: the {q} flows sharing a NIC each moved at the per-flow cap, so the NIC's capacity is "
            f"at least {nic.link.bandwidth_Bps / 1e9:.4g} GB/s, not measured: shapes with more flows per NIC "
            "may run faster than predicted (the emulator measured +73 % on one); profile with more ranks per "
            "node to measure it"
        )
    return Link(
        combined.latency_s,
        nic.link.bandwidth_Bps,
        combined.source,
        combined.latency_sd_s,
        nic.link.bandwidth_rel_sd,
        flow_cap_Bps=cap.link.bandwidth_Bps,
    )

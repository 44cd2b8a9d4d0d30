"""Compute-side parameters: t_F, t_B, t_O, the distribution of C = t_F + t_B, and bucket ready times.

Why both distributions: the model needs E[max of g draws] of C. The empirical distribution of all
samples (ranks x iterations) carries the real tail; a Normal fit is smoother for extrapolating to many
more workers than were measured. The spread between ranks (a persistently slow GPU) and across
iterations (jitter) are reported apart; when the ranks differ persistently (or nodes vary together)
calibration.variation_fit measures that structure, the Compute carries it as its Variation, and the
distribution is then the within-rank (i.i.d.) part.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from calibration.profile_view import Profile
from calibration.variation_fit import fit_variation
from rtmodel_documents.calibration_document import DdpWork, FitReport
from rtmodel_documents.profile_checks import CalibrationError, ProfileError
from rtmodel_documents.profile_document import ProfileCompute, ReadyTimes
from runtime_model.core.distributions import EmpiricalCompute, NormalCompute
from runtime_model.core.scenario import Bucket, BucketLayout, Compute

DISTRIBUTIONS = ("empirical", "normal")


@dataclass(frozen=True)
class ComputeFit:
    compute: Compute
    buckets: BucketLayout  # measured ready times of the profiled bucket layout
    empirical: EmpiricalCompute
    normal: NormalCompute
    between_rank_sd_s: float
    within_rank_sd_s: float
    report: FitReport
    notes: tuple[str, ...]
    gossip: Compute | None = None  # Decent-DP's, where its per-bucket work was measured wrapped
    ddp_work: DdpWork | None = None  # DDP's own host work, where measured under DDP


def fit_compute(profile: Profile, distribution: str = "empirical") -> ComputeFit:
    """Means, the C distribution (empirical or normal, as chosen), its variation structure (per-rank
    factors, node term: see calibration.variation_fit) and bucket ready fractions."""
    if distribution not in DISTRIBUTIONS:
        raise CalibrationError(
            f"unknown compute distribution {distribution!r}; choose one of {DISTRIBUTIONS}"
        )
    comp, workload = profile.compute, profile.workload
    opt = _pooled(comp.optimizer_s)
    fwd_rows, bwd_rows, c_rows = _rank_rows(comp)
    fwd, bwd, c = np.concatenate(fwd_rows), np.concatenate(bwd_rows), np.concatenate(c_rows)

    vf = fit_variation(c_rows, profile.shape.gpus_per_node)
    iid = vf.iid_samples_s  # c itself unless a persistent or node component was measured
    empirical = EmpiricalCompute(tuple(iid.tolist()))
    normal = NormalCompute(float(iid.mean()), float(iid.std(ddof=1)) if iid.size > 1 else 0.0)
    between, within = _rank_spread(c_rows)

    t_b = float(bwd.mean())
    ddp, ddp_warn = _buckets(comp.ddp_bucket_ready_s, workload.ddp_buckets_bytes, t_b, "ddp")
    gossip, gossip_warn = _buckets(comp.gossip_bucket_ready_s, workload.gossip_buckets_bytes, t_b, "gossip")

    n_ranks, n_iter = len(c_rows), int(np.median([row.size for row in c_rows]))
    model = "?" if workload.model is None else workload.model
    chosen = empirical if distribution == "empirical" else normal
    compute = Compute(
        forward_s=float(fwd.mean()),
        backward_s=t_b,
        optimizer_s=float(opt.mean()),
        distribution=chosen,
        source=f"measured: {n_ranks} ranks x {n_iter} iterations ({model})",
        variation=vf.variation,
        step_spread=step_spread(opt),
    )
    within_ranks = "" if vf.variation.is_iid else " of the within-rank part"
    notes = [
        f"compute C = forward + backward: the model uses the {distribution} distribution{within_ranks} "
        f"({chosen.describe()}); alternative: "
        + (normal.describe() if distribution == "empirical" else empirical.describe()),
        f"compute spread: between ranks sd {between * 1e3:.3g} ms, across iterations (within a rank) "
        f"sd {within * 1e3:.3g} ms",
        vf.note,
        *([vf.modelled] if vf.modelled else []),
    ]
    warnings = ddp_warn + gossip_warn + list(vf.warnings)
    if c.size < 30:
        warnings.append(
            f"only {c.size} compute samples: the tail of C (E(max) over many workers) is uncertain"
        )
    n = c.size
    report = FitReport(
        name="compute",
        kind="compute",
        params={
            "forward_s": (compute.forward_s, float(fwd.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0),
            "backward_s": (compute.backward_s, float(bwd.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0),
            "optimizer_s": (
                compute.optimizer_s,
                float(opt.std(ddof=1) / np.sqrt(opt.size)) if opt.size > 1 else 0.0,
            ),
            "C_mean_s": (normal.mean_s, float(normal.sd_s / np.sqrt(n))),
            "C_sd_s": (normal.sd_s, float(normal.sd_s / np.sqrt(2 * max(n - 1, 1)))),
            "C_between_rank_sd_s": (between, 0.0),
            "C_within_rank_sd_s": (within, 0.0),
            "rank_cv": (vf.variation.rank_cv, 0.0),
            "node_cv": (vf.variation.node_cv, 0.0),
        },
        n_points=n,
        n_samples=n,
        warnings=warnings,
    )
    ddp_work, wrapped, wrapper_notes = _wrapped_parts(compute, comp)
    notes.extend(wrapper_notes)
    layout, parts = BucketLayout(ddp, gossip), (empirical, normal, between, within, report)
    return ComputeFit(compute, layout, *parts, tuple(notes), wrapped, ddp_work)


def _wrapped_parts(
    compute: Compute, comp: ProfileCompute
) -> tuple[DdpWork | None, Compute | None, list[str]]:
    """What the wrapped iterations measured: DDP's own work, Decent-DP's compute, and a note on each."""
    notes = []
    ddp_work = measured_ddp_work(comp)
    if ddp_work is not None:
        notes.append(
            f"DDP's own host work measured under DDP with its exchanges skipped: forward "
            f"+{ddp_work.forward_s * 1e3:.3g} ms, backward +{ddp_work.backward_s * 1e3:.3g} ms, step "
            f"+{ddp_work.optimizer_s * 1e3:.3g} ms per iteration; the All-Reduce rows use it"
        )
    wrapped = gossip_compute(compute, comp)
    if wrapped is not None:
        notes.append(
            f"Decent-DP's per-bucket work after its exchanges measured in wrapped iterations: "
            f"{wrapped.optimizer_s * 1e3:.3g} ms per iteration (the bare step {compute.optimizer_s * 1e3:.3g} ms); "
            "the gossip rows use it"
        )
    return ddp_work, wrapped, notes


def measured_ddp_work(comp: ProfileCompute) -> DdpWork | None:
    """DdpWork from the profile's DDP-wrapped iterations, phase by phase: the LEAST_DISTURBED quantile of
    the wrapped samples less the bare ones' (over ranks and iterations). Work a wrapper adds is in every
    iteration, the least disturbed included, while a spell of host contention is not (timeit's reasoning
    for its minimum): on the emulated cluster 3 of 10 wrapped iterations took 150-200 ms of backward on
    every rank at once, where bare and DDP-wrapped iterations otherwise differ by about 1 ms (and a
    4-rank run on one host without the emulator by nothing). None where not measured."""
    if comp.ddp_forward_s is None:  # the three are present together or not at all (ProfileCompute)
        return None
    ddp_wrapped = (comp.ddp_forward_s, comp.ddp_backward_s, comp.ddp_optimizer_s)
    bare = (comp.forward_s, comp.backward_s, comp.optimizer_s)
    for name, wrapped, plain in zip(("forward", "backward", "optimizer"), ddp_wrapped, bare, strict=True):
        _check_wrapped(name, wrapped, plain)
    extra = [max(0.0, _low(wrapped) - _low(plain)) for wrapped, plain in zip(ddp_wrapped, bare, strict=True)]
    return DdpWork(*extra)


# The most a phase may grow under DDP's wrapper: its hooks add bucket copies and launches to a phase, and
# the profiles measured 1-3.5x (benchmarks/results/quick-profile-2x2.json: backward 20-23 ms wrapped, 6-13
# ms bare); two orders of magnitude beyond is a damaged document (a day beside milliseconds printed
# 500,000x speedups), not a measurement.
MAX_WRAPPED_OVER_BARE = 100.0


def _check_wrapped(name: str, wrapped, plain) -> None:
    w, b = float(np.median(_pooled(wrapped))), float(np.median(_pooled(plain)))
    if b > 0 and w > MAX_WRAPPED_OVER_BARE * b:
        raise ProfileError(
            f"compute.ddp_{name}_s is {w / b:,.0f}x compute.{name}_s (medians {w * 1e3:.4g} and {b * 1e3:.4g} ms): "
            f"DDP's wrapper adds hook work to a phase but never makes it {MAX_WRAPPED_OVER_BARE:g}x slower; re-profile"
        )


LEAST_DISTURBED = 0.1  # the quantile of a phase's samples that stands for its undisturbed time


def _low(per_rank) -> float:
    return float(np.quantile(_pooled(per_rank), LEAST_DISTURBED))


def _pooled(per_rank) -> np.ndarray:
    """One phase's samples over every rank and iteration."""
    return np.concatenate([np.asarray(times, dtype=float) for times in per_rank])


def gossip_compute(compute: Compute, comp: ProfileCompute) -> Compute | None:
    """Decent-DP's compute: the bare forward and backward, and as its step part the per-bucket work its
    hooks did after their exchanges in the profile's wrapped iterations (mixing, the bucket's step, the
    next launch, with the exchanges' threads competing for the host); never less than the bare step
    (on a GPU the wrapped figure is host time, the bare one the device's). None where not measured."""
    if comp.gossip_step_s is None:
        return None
    samples = _pooled(comp.gossip_step_s)
    if samples.size == 0:
        return None
    return replace(
        compute, optimizer_s=max(compute.optimizer_s, float(samples.mean())), step_spread=step_spread(samples)
    )


def step_spread(samples: np.ndarray) -> EmpiricalCompute | None:
    """The step's measured spread per rank and iteration: on a loaded host the step varies as much as
    the compute, and where it follows an exchange a rank's late step delays its peers' next exchange
    (the recurrence draws its deviation each iteration). None below two samples."""
    return EmpiricalCompute(tuple(samples.tolist())) if samples.size > 1 else None


def _rank_rows(comp: ProfileCompute) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per rank: forward, backward and C = forward + backward samples (a rank's two counts must agree)."""
    fwd_rows = [np.asarray(times, dtype=float) for times in comp.forward_s]
    bwd_rows = [np.asarray(times, dtype=float) for times in comp.backward_s]
    c_rows = []
    for r, (f, b) in enumerate(zip(fwd_rows, bwd_rows, strict=True)):
        if f.size != b.size:
            raise CalibrationError(f"compute: rank {r} has {f.size} forward but {b.size} backward times")
        c_rows.append(f + b)
    return fwd_rows, bwd_rows, c_rows


def _rank_spread(c_rows: list[np.ndarray]) -> tuple[float, float]:
    """(sd of the ranks' mean C, root-mean-square of each rank's own sd across iterations)."""
    rank_means = np.array([row.mean() for row in c_rows])
    between = float(rank_means.std(ddof=1)) if rank_means.size > 1 else 0.0
    within_var = [row.var(ddof=1) for row in c_rows if row.size > 1]
    within = float(np.sqrt(np.mean(within_var))) if within_var else 0.0
    return between, within


def _buckets(
    ready_s: ReadyTimes, sizes: tuple[int, ...], mean_backward_s: float, layout: str
) -> tuple[tuple[Bucket, ...], list]:
    """ready fraction of bucket b = mean over ranks and iterations of r_b / mean backward time."""
    per_bucket = np.concatenate([np.asarray(rank, dtype=float).reshape(-1, len(sizes)) for rank in ready_s])
    frac = per_bucket.mean(axis=0) / mean_backward_s if mean_backward_s > 0 else np.ones(len(sizes))
    warnings = []
    if np.any(frac > 1.05):
        warnings.append(
            f"{layout} buckets: ready times exceed the mean backward time by up to "
            f"{frac.max() - 1:.0%} (hook timing?); clipped to 1"
        )
    if np.any(np.diff(frac) < -0.02):
        warnings.append(f"{layout} buckets: ready times are not in bucket order; made non-decreasing")
    frac = np.maximum.accumulate(np.clip(frac, 0.0, 1.0))
    return tuple(Bucket(int(s), float(f)) for s, f in zip(sizes, frac, strict=True)), warnings

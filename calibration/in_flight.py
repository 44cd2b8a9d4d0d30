"""The profile's in-flight timings as calibration reports: how many times the one-at-a-time rate the
training's own buckets moved when all were in flight at once, and how many times that rate they moved
over two groups of the same ranks (rtmodel_documents.profile_communication's InFlightResult).

The second is used (group_concurrency -> Network.group_concurrency): Decent-DP's consecutive rounds run
on process groups of their own, and on one H200 host gloo moved Decent-DP's buckets 1.3-1.8x faster
over two groups than over one (benchmarks/results/gloo-gossip-pipeline), which is how its runs beat
the one-group charge. The first is reported only: the model charges a group's buckets one after
another, each at the rate the profile's patterns timed one at a time (collectives.serial_allreduces_s;
with gloo only the latency of the second one hides); on the H200 hosts one group in flight moved
0.97-1.09x that rate (docs/gpu.md).
"""

from __future__ import annotations

import statistics

from rtmodel_documents.calibration_document import FitReport

KIND = "in-flight"


def in_flight_reports(results) -> tuple[list[FitReport], list[str]]:
    """(one report per measured pattern: the gain with the standard error of the per-repetition ratios,
    one note each saying what the model charges instead)."""
    reports, notes = [], []
    for r in results:
        gain = r.gain
        ratios = [a / b for a, b in zip(r.one_at_a_time_s, r.in_flight_s, strict=True)]
        se = _se(ratios)
        buckets = r.buckets_bytes
        reports.append(
            FitReport(
                name=f"in flight {r.pattern}",
                kind=KIND,
                params={"gain": (gain, se)},
                n_points=len(buckets),
                n_samples=len(ratios),
                size_range_bytes=(min(buckets), max(buckets)),
            )
        )
        two = ""
        if r.two_groups_s is not None:
            group_ratios = [a / b for a, b in zip(r.in_flight_s, r.two_groups_s, strict=True)]
            reports.append(
                FitReport(
                    name=f"two groups {r.pattern}",
                    kind=KIND,
                    params={"gain": (r.group_gain, _se(group_ratios))},
                    n_points=len(buckets),
                    n_samples=len(group_ratios),
                    size_range_bytes=(min(buckets), max(buckets)),
                )
            )
            two = f"; over two groups {r.group_gain:.2f}x that (the model takes it for Decent-DP's rounds)"
        notes.append(
            f"in flight: {r.whose} {len(buckets)} bucket{'s' if len(buckets) != 1 else ''} on {r.pattern}, all "
            f"at once, moved {gain:.2f}x (± {se:.2f}) the rate of one at a time; the model charges one at a "
            f"time{two} (docs/profiling.md)"
        )
    return reports, notes


def _se(ratios: list[float]) -> float:
    return statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else 0.0


def group_concurrency(results) -> tuple[float, str, str] | None:
    """(gain, pattern, provenance) of Decent-DP's buckets in flight over two groups against one (at least
    1: a second group never makes the first slower in the model), or None where the profile did not
    time it."""
    gossip = [r for r in results if r.group_gain is not None]
    if not gossip:
        return None
    r = gossip[0]
    gain = max(1.0, r.group_gain)
    return (
        gain,
        r.pattern,
        (
            f"{gain:.2f}: measured ({r.whose} {len(r.buckets_bytes)} buckets on {r.pattern}, in flight over two "
            f"groups vs one, median of {len(r.two_groups_s)}; {r.group_gain:.2f} measured)"
        ),
    )

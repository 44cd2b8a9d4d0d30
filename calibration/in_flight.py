"""The profile's in-flight timings as calibration reports: how many times the one-at-a-time rate the
training's own buckets moved when all were in flight at once (rtmodel_util.profile_communication's
InFlightResult).

Why reported and not yet used: the model charges a group's buckets one after another, each at the rate
the profile's patterns timed one operation at a time (collectives.serial_allreduces_s; with gloo only the
latency of the second one hides). Gloo works two collectives at once, and where one transfer is bound by
the host rather than a link, two move more: on two H200 hosts Decent-DP's iterations ran 1.2-2.1x
faster than predicted with that charge (docs/gpu.md). This measures the gain where it happens, so the
next GPU run says whether it explains those runs before the model changes (docs/profiling.md).
"""

from __future__ import annotations

import statistics

from calibration.results import FitReport

KIND = "in-flight"


def in_flight_reports(results) -> tuple[list[FitReport], list[str]]:
    """(one report per measured pattern: the gain with the standard error of the per-repetition ratios,
    one note each saying what the model charges instead)."""
    reports, notes = [], []
    for r in results:
        gain = r.gain
        ratios = [a / b for a, b in zip(r.one_at_a_time_s, r.in_flight_s, strict=True)]
        se = statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else 0.0
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
        notes.append(
            f"in flight: {r.whose} {len(buckets)} bucket{'s' if len(buckets) != 1 else ''} on {r.pattern}, all "
            f"at once, moved {gain:.2f}x (± {se:.2f}) the rate of one at a time; the model charges one at a "
            "time (docs/profiling.md)"
        )
    return reports, notes

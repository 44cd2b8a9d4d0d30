"""A source class's interval, held out: what its checks err by when each source is left out in turn.

Why held out: the worst error of the same checks an interval is applied to promises nothing about the
next cluster (round 4's ±40 % covered its own 18 rows and 4-5 of 9 held-back Ethernet ones). Leaving
each source out in turn (leave-one-source-out) asks the question a new cluster asks: would the interval
stated from the other sources have held this one? Its answer, the coverage, is reported beside the
interval, and where it falls short of COVERAGE the interval is widened until it does not.

Why a source, not a check: the checks of one source share its measurements (a published run's speedups
share its All-Reduce time; an emulated cluster's share its network), so they are not independent
evidence; a source is one run of one cluster at one size.

Nothing here is fitted to a row: the interval is the class's worst error times the least factor that
makes the held-out coverage reach COVERAGE (1 where the plain worst error already does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

COVERAGE = 0.90  # the share of held-out checks a stated interval must cover
MIN_SOURCES = 3  # fewer sources leave too little to hold one out against: the class borrows the pooled one


@dataclass(frozen=True)
class HeldOutInterval:
    """A class's stated interval on the speedup and how it fared held out.

    interval: the worst |error| of the class's checks x `factor`;
    factor: >= 1, how far the worst error had to widen for the held-out coverage to reach COVERAGE;
    coverage: the share of checks inside factor x the worst error of the other sources;
    mean_abs_error: the typical |error| (the equivalence margin);
    checks, sources: how much evidence stands behind it."""

    interval: float
    factor: float
    coverage: float
    mean_abs_error: float
    checks: int
    sources: int


def _others_worst(by_source: dict[str, list[float]]) -> dict[str, float]:
    """Each source's interval as the other sources state it: their worst |error|."""
    out = {}
    for name in by_source:
        rest = [e for other, errs in by_source.items() if other != name for e in errs]
        out[name] = max(rest)
    return out


def held_out_coverage(by_source: dict[str, list[float]], factor: float) -> float:
    """The share of checks inside `factor` x the worst |error| of the other sources."""
    return _coverage(by_source, _others_worst(by_source), factor)


def _coverage(by_source: dict[str, list[float]], others: dict[str, float], factor: float) -> float:
    inside = [e <= factor * others[name] * (1 + 1e-9) for name, errs in by_source.items() for e in errs]
    return sum(inside) / len(inside)


def leave_one_source_out(errors: Sequence[tuple[str, float]], coverage: float = COVERAGE) -> HeldOutInterval:
    """The held-out interval of (source, relative error) checks; needs checks from at least two sources.

    The factor is the least of the candidates e / (the others' worst) that brings the held-out coverage to
    `coverage`: each candidate just admits one more check, so no smaller factor covers as many."""
    by_source: dict[str, list[float]] = {}
    for name, err in errors:
        by_source.setdefault(name, []).append(abs(err))
    if len(by_source) < 2:
        raise ValueError(f"leave-one-source-out needs checks from two sources or more, got {len(by_source)}")
    flat = [e for errs in by_source.values() for e in errs]
    others = _others_worst(by_source)
    candidates = sorted(
        {1.0} | {e / others[name] for name, errs in by_source.items() for e in errs if others[name] > 0}
    )
    factor = next(
        (f for f in candidates if f >= 1.0 and _coverage(by_source, others, f) >= coverage), candidates[-1]
    )
    return HeldOutInterval(
        interval=factor * max(flat),
        factor=factor,
        coverage=_coverage(by_source, others, factor),
        mean_abs_error=sum(flat) / len(flat),
        checks=len(flat),
        sources=len(by_source),
    )

"""Predictions waiting for their runs, and the batches those runs go in.

Why a module of its own: advise, a sweep's advise_many and the reduced systems all hand their runs here,
so the runs that share draws go in one loop (recurrence.run_jobs, complete_system) and a run met twice
(base-2 is one-peer-exp at n = 2^p: the very same rounds, costs, window and compute) is run once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from runtime_model.prediction.recurrence import Job


@dataclass(frozen=True)
class Pending:
    """A prediction waiting for its run: `finish(result)` makes it from the result of `job` (a Job, or
    any object with batch_key() and run_batch(jobs, seed, with_free), e.g. complete's reduced system)."""

    job: object
    seed: int
    finish: Callable[[object], object]
    mean_of: Callable[[object], float] | None = None  # the mean alone, where finish does more (crossovers)


def run_pending(pending: Sequence[Pending]) -> list:
    """Finish every pending prediction, running the jobs of one batch key and seed together (a sweep's
    topologies at one n, and its reduced systems of one size, cost one loop over iterations, not one each)."""
    return [p.finish(r) for p, r in zip(pending, run_jobs_of(pending), strict=True)]


def run_means(pending: Sequence[Pending]) -> list[float]:
    """Only each prediction's mean iteration time (Pending.mean_of where it has one): what a search
    over many scenarios compares, without each one's quantiles and factor breakdown (nor the free column
    the breakdown reads: complete's reduced system then solves half the extremes)."""
    results = run_jobs_of(pending, with_free=False)
    return [
        p.mean_of(r) if p.mean_of is not None else p.finish(r).mean_s
        for p, r in zip(pending, results, strict=True)
    ]


def run_jobs_of(pending: Sequence[Pending], with_free: bool = True) -> list:
    """Each pending prediction's job result, the jobs of one batch key and seed run together (without
    `with_free`, results for means alone: free_s and se_s may be NaN, samples_s empty)."""
    batches: list[tuple[tuple, list[int]]] = []
    for i, p in enumerate(pending):
        key = (p.job.batch_key(), p.seed)
        for head, members in batches:
            if head == key:
                members.append(i)
                break
        else:
            batches.append((key, [i]))
    results: dict[int, object] = {}
    for (_, seed), members in batches:
        same = _first_equal([pending[i].job for i in members])
        runs = [m for m, s in zip(members, same, strict=True) if s is None]
        jobs = [pending[i].job for i in runs]
        results.update(zip(runs, type(jobs[0]).run_batch(jobs, seed, with_free), strict=True))
        results.update((m, results[members[s]]) for m, s in zip(members, same, strict=True) if s is not None)
    return [results[i] for i in range(len(pending))]


def _first_equal(jobs: Sequence[object]) -> list[int | None]:
    """Per job, the index of an earlier job with the very same inputs (its run is that one's), or None."""
    out: list[int | None] = []
    for i, job in enumerate(jobs):
        out.append(next((j for j in range(i) if out[j] is None and _same_job(jobs[j], job)), None))
    return out


def _same_job(a: object, b: object) -> bool:
    """Same rounds (labels), communication, window and compute: the same recurrence, bit for bit."""
    if not (isinstance(a, Job) and isinstance(b, Job)):
        return False
    sa, sb = a.schedule, b.schedule
    head = (sa.n, sa.period, a.warmup, a.measured, a.gpus_per_node, len(a.comm_per_round))
    if head != (sb.n, sb.period, b.warmup, b.measured, b.gpus_per_node, len(b.comm_per_round)):
        return False
    if not (a.compute is b.compute or a.compute == b.compute):
        return False
    ga, gb = sa.static_graph, sb.static_graph
    if (ga is None) != (gb is None) or (ga is not None and ga.peer_offsets != gb.peer_offsets):
        return False
    if ga is None and not all(
        ra is rb or np.array_equal(ra.labels, rb.labels) for ra, rb in zip(sa.rounds, sb.rounds, strict=True)
    ):
        return False
    return all(np.array_equal(x, y) for x, y in zip(a.comm_per_round, b.comm_per_round, strict=True))

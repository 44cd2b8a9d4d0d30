"""Decent-DP's prediction and consensus on a reduced system (symmetry.Reduction): cost independent of n.

Why: above symmetry.FULL_MAX_N ranks the per-rank recurrence is replaced by the same recurrence on the
quotient system. Communication costs are still those of the existing functions (Round.per_rank_cost,
round_comm, group_costs_s, static_graph_comm_s), evaluated on the reduced rounds, so a change to the cost
model flows through unchanged. Without compute variance the answer is exact (symmetry module doc); with
variance it is a seeded Monte-Carlo of REDUCED_RANKS ranks whose standard error (batch means over
periods) is reported as `se_s`.

complete with variance couples every rank to the max over all n: its reduced system tracks that max
explicitly (complete_system.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from runtime_model.convergence.consensus import ConsensusMetrics, _metrics, consensus_metrics
from runtime_model.core.order_stats import quantile_of_repeated
from runtime_model.core.scenario import ClusterShape, Compute, Scenario
from runtime_model.core.variation import MIN_FACTOR, PERSISTENT_SEED, Variation
from runtime_model.prediction.complete_system import CompleteJob
from runtime_model.prediction.group_pipeline import last_bucket_share, round_charges
from runtime_model.prediction.iteration import (
    SIM_BUDGET,
    SIM_MAX_ITERS,
    SIM_MIN_ITERS,
    SIM_SEED,
    SIM_WARMUP,
    IterationPrediction,
    gossip_pending,
    plan_job,
    prediction_from_growth,
    steady_floor_s,
    steady_floored,
)
from runtime_model.prediction.pending import Pending, run_pending
from runtime_model.prediction.recurrence import Growth
from runtime_model.prediction.round_comm import (
    RoundComm,
    group_costs_s,
    nic_bound_s,
    round_comm,
    static_graph_comm_s,
)
from runtime_model.topology.exchange import ExchangeStyle, adapted_scenario
from runtime_model.topology.registry import (
    TopologyNotApplicable,
    build_schedule,
    require_applicable,
    topology_info,
)
from runtime_model.topology.schedule import Schedule
from runtime_model.topology.symmetry import FULL_MAX_N, REDUCED_RANKS, NoReduction, Reduction, reduce

CHUNK = 1 << 20  # ranks per chunk when a persistent draw must be scanned over all n


def has_variance(comp: Compute) -> bool:
    """Does anything in C_i(t) vary from iteration to iteration (else the recurrence is deterministic)?"""
    return comp.wait_distribution.sd_s > 0 or comp.variation.node_cv > 0


def reduced_rounds(red: Reduction, scenario: Scenario) -> list[RoundComm]:
    """Each reduced rank's gossip costs in every full round (RoundComm: solo, shared, NIC busy, charged),
    from the existing cost functions: a covering map keeps every group's shape, hence its costs."""
    net, buckets = scenario.network, scenario.buckets
    window = scenario.decent_dp_compute.compute_s
    if red.static_offsets is not None:
        cost = np.full(red.n, static_graph_comm_s(red.static_offsets, red.full, buckets.message_bytes, net))
        return [RoundComm(cost, cost, np.zeros(red.n), cost)]
    sizes = [b.nbytes for b in buckets.gossip]
    by_small: dict[int, RoundComm] = {}
    for j in sorted(set(red.round_map)):
        if red.group_scale:
            per_rank = red.small.rounds[j].per_rank_cost(
                red.shape, lambda g: group_costs_s(red.lift(g), sizes, net, window), net.nics_per_node
            )
            by_small[j] = RoundComm(*per_rank.T)
        else:
            by_small[j] = round_comm(red.small, j, red.shape, buckets, net, window)
    return [by_small[j] for j in red.round_map]


def reduced_compute(comp: Compute, red: Reduction) -> Compute:
    """The compute of the reduced ranks: the first n' ranks' persistent factors (phi is the identity on
    them), with the slowest rank of the whole system placed on its image, so a persistent straggler or the
    tail of a rank spread is never lost; the stragglers beyond n' alias onto the reduced ranks."""
    var = comp.variation
    if var.is_iid:
        return comp
    n, n_red = red.full.gpus, red.n
    spread = None
    if var.rank_factors is not None and len(var.rank_factors) == n:
        full = np.asarray(var.rank_factors, dtype=float)
        spread = full[:n_red].copy()
        slow = int(np.argmax(full))
        image = int(red.rank_map(np.array([slow]))[0])
        spread[image] = max(spread[image], float(full[slow]))
    elif var.rank_cv > 0:
        spread = Variation(rank_cv=var.rank_cv).factors(n_red)
        slow, z_max = _largest_draw(n)
        image = int(red.rank_map(np.array([slow]))[0])
        spread[image] = max(spread[image], max(1.0 + var.rank_cv * z_max, MIN_FACTOR))
    count = min(var.straggler_count, n_red) if var.straggler_count else 0
    reduced = Variation(
        straggler_factor=var.straggler_factor,
        straggler_count=count,
        node_cv=var.node_cv,
        rank_factors=None if spread is None else tuple(spread.tolist()),
        source=var.source,
    )
    return replace(comp, variation=reduced)


def _largest_draw(n: int) -> tuple[int, float]:
    """(index, value) of the largest of the n seeded persistent draws, scanned in chunks (same stream)."""
    rng = np.random.default_rng(PERSISTENT_SEED)
    best, where = -np.inf, 0
    for start in range(0, n, CHUNK):
        z = rng.standard_normal(min(CHUNK, n - start))
        i = int(np.argmax(z))
        if z[i] > best:
            best, where = float(z[i]), start + i
    return where, best


@dataclass(frozen=True)
class ReducedResult:
    prediction: IterationPrediction
    se_s: float  # Monte-Carlo standard error of the mean iteration time (0 without variance)
    ranks: int  # ranks simulated


def reduced_prediction(
    scenario: Scenario, red: Reduction, allreduce: IterationPrediction | None = None
) -> ReducedResult:
    """Decent-DP's prediction for the full system from its reduced one (module doc)."""
    return run_pending([reduced_pending(scenario, red, allreduce)])[0]


def reduced_pending(
    scenario: Scenario, red: Reduction, allreduce: IterationPrediction | None = None
) -> Pending:
    """reduced_prediction waiting for its recurrence (recurrence.run_pending batches those that share n)."""
    scenario = adapted_scenario(red.small.exchange, scenario)
    comp = reduced_compute(scenario.decent_dp_compute, red)
    rounds = reduced_rounds(red, scenario)
    per_rank, comm, at_once, channels_s = round_charges(rounds, red.small, scenario, comp)
    k = red.shape.gpus_per_node
    if red.group_scale and has_variance(comp) and red.orbit_size > 1:  # complete: M tracked explicitly
        measured = int(np.clip(SIM_BUDGET // red.n, SIM_MIN_ITERS, SIM_MAX_ITERS))
        job = CompleteJob(
            comp, comm[0], red.full.gpus, k, SIM_WARMUP, measured, last_bucket_share(scenario.buckets)
        )
    else:  # deterministic: the full recurrence's own window, so the answer is the per-rank one exactly
        budget_n = None if has_variance(comp) else red.full.gpus
        job = plan_job(red.schedule(), comp, comm, budget_n, k, last_bucket_share(scenario.buckets))

    def floor_s() -> float:
        # the NICs' byte bound, on the reduced NICs: each carries what its full preimages carry
        nic_bound = nic_bound_s(rounds, red.shape, scenario.network.nics_per_node)
        return steady_floor_s(max(nic_bound, channels_s), comp, red.n)

    def finish(growth: Growth) -> ReducedResult:
        mean, samples = steady_floored(growth, floor_s())
        p50, p99 = quantile_of_repeated(samples, [0.5, 0.99], red.orbit_size)
        pred = prediction_from_growth(
            scenario, red.name, per_rank, (mean, growth.free_s, p50, p99), allreduce, at_once
        )
        return ReducedResult(pred, growth.se_s, red.n)

    return Pending(job, SIM_SEED, finish, lambda growth: steady_floored(growth, floor_s())[0])


# ---------------------------------------------------------------- consensus from structure


def reduced_consensus(red: Reduction) -> ConsensusMetrics:
    """The full schedule's consensus metrics without its n-sized rounds.

    - a topology with a closed form (TopologyInfo.consensus: ring's Fourier symbols, static-exp's
      circulant eigenvalues) answers from it;
    - the others are exact schedules: the full period ends with the same rounds as the reduced
      schedule's, so the product reaches J as many rounds before the period's end as it does there
      (tests check this against the per-rank computation up to n = 4,096).
    """
    n, period = red.full.gpus, red.period
    closed_form = topology_info(red.name).consensus
    if closed_form is not None:
        c = closed_form(red)
        return _metrics(n, c.period, c.exact_rounds, c.rho, c.method, c.worst_round_contraction)
    small = _small_consensus(red.small)
    if small.exact_rounds is None or small.exact_rounds > red.small.period:
        raise NoReduction(f"{red.name}: the reduced schedule is not exact within its period")
    exact = period - (red.small.period - small.exact_rounds)
    return _metrics(n, period, exact, 0.0, "symmetry", small.worst_round_contraction)


# ---------------------------------------------------------------- the advisor's entry point


@dataclass(frozen=True)
class TopologyModel:
    """One topology at one shape, predicted per rank (n <= FULL_MAX_N) or on its reduced system."""

    name: str
    shape: ClusterShape
    schedule: Schedule | None  # the full schedule (per-rank path)
    reduction: Reduction | None

    @property
    def decent_dp_note(self) -> str | None:
        return (self.schedule or self.reduction.small).decent_dp_note

    @property
    def decent_dp_runnable(self) -> bool:
        return self.decent_dp_note is None

    def predict(
        self, scenario: Scenario, allreduce: IterationPrediction | None = None
    ) -> IterationPrediction:
        return run_pending([self.pending(scenario, allreduce)])[0]

    @property
    def exchange(self) -> ExchangeStyle:
        """The library that runs it and how (exchange.py)."""
        return (self.schedule or self.reduction.small).exchange

    def pending(self, scenario: Scenario, allreduce: IterationPrediction | None = None) -> Pending:
        """predict waiting for its recurrence (recurrence.run_pending runs a batch of them at once)."""
        if self.schedule is not None:
            return gossip_pending(scenario, self.schedule, allreduce)
        p = self.reduced_pending(scenario, allreduce)
        return replace(p, finish=lambda growth, f=p.finish: f(growth).prediction)

    def predict_reduced(self, scenario: Scenario, allreduce=None) -> ReducedResult:
        return run_pending([self.reduced_pending(scenario, allreduce)])[0]

    def reduced_pending(self, scenario: Scenario, allreduce=None) -> Pending:
        red = self.reduction
        if not has_variance(scenario.decent_dp_compute):  # exact on the smallest quotient
            red = reduce(self.name, self.shape, _build_small, target=1)
        return reduced_pending(scenario, red, allreduce)

    def consensus(self) -> ConsensusMetrics:
        if self.schedule is not None:
            return consensus_metrics(self.schedule, gpus_per_node=self.shape.gpus_per_node)
        return reduced_consensus(self.reduction)

    @property
    def period(self) -> int:
        """Rounds per period of the full schedule (a reduced system plays them all, round_map)."""
        return self.schedule.period if self.schedule is not None else self.reduction.schedule().period

    def group_sizes(self) -> list[int]:
        """The distinct group sizes over the full schedule's rounds: a covering map keeps every group's
        size (complete's one group is every rank)."""
        if self.schedule is not None:
            rounds = self.schedule.rounds
        else:
            rounds = [self.reduction.small.rounds[j] for j in sorted(set(self.reduction.round_map))]
        sizes = {int(s) for r in rounds for s in set(r.group_sizes().tolist())}
        if self.reduction is not None and self.reduction.group_scale:
            sizes = {s * self.reduction.orbit_size for s in sizes}
        return sorted(sizes)


@lru_cache(maxsize=32)
def _small_consensus(small: Schedule) -> ConsensusMetrics:
    """consensus_metrics of a reduced system's small schedule (kept: a sweep's n share it, _build_small)."""
    return consensus_metrics(small)


@lru_cache(maxsize=32)
def _built(name: str, shape: ClusterShape) -> Schedule:
    return build_schedule(name, shape)


def _build_small(name: str, shape: ClusterShape) -> Schedule:
    """A reduced system's small schedule: the same few shapes recur at every n of a sweep above
    FULL_MAX_N, so they are built (and their rounds placed) once."""
    return _built(name, shape) if shape.gpus <= FULL_MAX_N else build_schedule(name, shape)


def topology_model(name: str, shape: ClusterShape, target: int = REDUCED_RANKS) -> TopologyModel:
    """Build `name` at `shape`: in full up to FULL_MAX_N ranks, else its reduced system. Raises
    TopologyNotApplicable (the topology cannot run, or rtmodel has no reduced system for it here)."""
    if shape.gpus <= FULL_MAX_N:
        return TopologyModel(name, shape, build_schedule(name, shape), None)
    require_applicable(topology_info(name).applicability, shape)
    try:
        red = reduce(name, shape, _build_small, target)
    except NoReduction as exc:
        raise TopologyNotApplicable(
            f"rtmodel predicts {name} above {FULL_MAX_N} GPUs only through its symmetry, and this n has none "
            f"it can use ({exc})"
        ) from None
    return TopologyModel(name, shape, None, red)

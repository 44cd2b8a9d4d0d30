"""Per-iteration time of All-Reduce (PyTorch DDP) and of a gossip schedule (Decent-DP), with the three factors.

All-Reduce (DDP): buckets are all-reduced serially as they become ready in backward; the last
bucket's tail and the optimizer step never hide; all n workers meet every iteration, so the compute
part is E[max of n draws] (exact order statistics).

Gossip (Decent-DP): the exchange of bucket b launched in iteration t is waited for at bucket b's
hook in iteration t+1, so it hides behind a whole iteration, and a worker depends only on its
group's members *one iteration earlier*. That is a max-plus recurrence per rank i:

    X_i(t+1) = max( X_i(t) + C_i(t+1) + t_O ,  max_{j in group_t(i)} X_j(t) + comm_t + t_O,last )

(X = when a rank launches its last bucket's exchange; that exchange has the next forward + backward to
hide behind, then the last bucket's optimizer step t_O,last runs after the wait, on the critical path.)

whose growth rate is the iteration time; comm_t is the rank's own group's all-reduce in round t.
When every rank's rounds look alike it is mean_t max(C + t_O, comm_t) (a slow round cannot borrow
slack from a fast one); when ranks are slow in different rounds (alternating-exp-ring: half the
nodes use the network each iteration) a rank alternates its own slow and fast iterations. We run the
recurrence itself (a seeded Monte-Carlo of the compute draws, exact without variance; common random
numbers across topologies), because the one-iteration slack makes E[max over the group] only an
upper bound.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from runtime_model.core.order_stats import max_of_ranks, quantile_of_repeated
from runtime_model.core.scenario import Bucket, ClusterShape, Compute, Scenario
from runtime_model.prediction.collectives import allreduce_parts_s, global_allreduce_shape
from runtime_model.prediction.factors import FactorBreakdown, Worlds, shapley_factors
from runtime_model.prediction.group_pipeline import exchange_bound_s, last_bucket_share, round_charges
from runtime_model.prediction.pending import Pending, run_pending
from runtime_model.prediction.recurrence import FlatPeers, Growth, Job, run_jobs
from runtime_model.prediction.round_comm import (
    nic_bound_s,
    round_comm,
)
from runtime_model.topology.exchange import adapted_scenario
from runtime_model.topology.schedule import Schedule
from runtime_model.topology.symmetry import FULL_MAX_N

SIM_SEED = 20241015  # fixed: predictions are deterministic; common random numbers across topologies
SIM_BUDGET = 60_000  # rank-iterations per simulation: bounds advisor latency at large n
SIM_MIN_ITERS, SIM_MAX_ITERS, SIM_WARMUP = 12, 240, 8
SIM_MAX_REACH = 4096  # iterations of warm-up at most for a persistent slowdown to reach every rank
STRAGGLER_BUDGET = 50 * SIM_BUDGET  # rank-iterations that warm-up may cost
DDP_SIM_BUDGET, DDP_SIM_MIN_ITERS, DDP_SIM_MAX_ITERS = 2_000_000, 50, 4000  # max over n per iteration


@dataclass(frozen=True)
class IterationPrediction:
    name: str
    mean_s: float
    p50_s: float
    p99_s: float
    compute_wait_s: float  # expected compute part incl. waiting for slower workers (excl. optimizer)
    comm_s: float  # communication per iteration (serial sum over buckets; mean over rounds)
    exposed_comm_s: float  # part of the iteration spent waiting on communication
    optimizer_s: float
    factors: FactorBreakdown | None = None
    per_round_comm_s: tuple[float, ...] = ()


def ddp_exposed_tail_s(
    compute: Compute,
    buckets: Sequence[Bucket],
    bucket_cost_s: Sequence[float],
    latency_s: Sequence[float] | None = None,
) -> float:
    """max(0, e_B - t_B) with e_1 = r_1 + AR(M_1), e_b = max(e_{b-1}, r_b) + AR(M_b).

    With `latency_s` (each bucket's latency part, for a backend with two collectives in flight) a
    bucket that finds the link busy only adds its transfer: e_b = max(e_{b-1} + bw_b, r_b + AR(M_b)).
    """
    end = 0.0
    lat = latency_s if latency_s is not None else [None] * len(bucket_cost_s)
    for bucket, cost, fixed in zip(buckets, bucket_cost_s, lat, strict=True):
        ready = bucket.ready_fraction * compute.backward_s
        end = max(end, ready) + cost if fixed is None else max(end + cost - fixed, ready + cost)
    return max(0.0, end - compute.backward_s)


def allreduce_prediction(scenario: Scenario) -> IterationPrediction:
    """DDP: E[max_n C] + exposed tail + t_O; quantiles from P(max_n C <= x) = F(x)^n."""
    shape, net, comp = scenario.shape, scenario.network, scenario.compute
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node, net.nics_per_node)
    parts = [allreduce_parts_s(group, b.nbytes, net) for b in scenario.buckets.ddp]
    costs = [f + b for f, b in parts]
    overlapped = [f for f, _ in parts] if net.concurrent_collectives > 1 else None
    tail = ddp_exposed_tail_s(comp, scenario.buckets.ddp, costs, overlapped)
    wait, p50, p99 = compute_wait_of_all(comp, shape)
    fixed = tail + comp.optimizer_s
    return IterationPrediction(
        name="allreduce",
        mean_s=wait + fixed,
        p50_s=p50 + fixed,
        p99_s=p99 + fixed,
        compute_wait_s=wait,
        comm_s=float(sum(costs)),
        exposed_comm_s=tail,
        optimizer_s=comp.optimizer_s,
    )


def compute_wait_of_all(
    comp: Compute, shape: ClusterShape, seed: int = SIM_SEED
) -> tuple[float, float, float]:
    """(mean, p50, p99) of max over all n ranks of C: exact order statistics when every rank draws from
    one distribution (F(x)^n); with stragglers, a rank spread or node-correlated terms a seeded
    Monte-Carlo of the same draws the gossip recurrence uses (exact without i.i.d. variance), and above
    symmetry.FULL_MAX_N the rank classes of order_stats.max_of_ranks (no n-sized arrays).

    Remembered per (compute, shape, seed): a crossover's bandwidth search asks the same compute at
    every point (advise --profile asked 137 times for 31 answers, each a Monte-Carlo of its own)."""
    try:
        return _remembered_wait(comp, shape, seed)
    except TypeError:  # an input that cannot be hashed (a what-if's own Compute): computed afresh
        return _wait_of_all(comp, shape, seed)


def _wait_of_all(comp: Compute, shape: ClusterShape, seed: int) -> tuple[float, float, float]:
    dist, n = comp.wait_distribution, shape.gpus  # C and the step's deviation: DDP steps, then computes
    if comp.variation.is_iid:
        return dist.expected_max(n), dist.quantile_of_max(0.50, n), dist.quantile_of_max(0.99, n)
    if n > FULL_MAX_N and comp.variation.rank_factors is None:  # rank classes, no n-sized draws
        return max_of_ranks(dist, comp.variation, n, shape.gpus_per_node)
    comp = replace(comp, distribution=dist)
    rng = np.random.default_rng(seed)
    iters = int(np.clip(DDP_SIM_BUDGET // max(n, 1), DDP_SIM_MIN_ITERS, DDP_SIM_MAX_ITERS))
    block = comp.block_sampler(n)  # every iteration's draws at once (<= DDP_SIM_BUDGET values), same stream
    if block is not None:
        maxima = block(rng, iters).max(axis=1)
    else:
        draw = comp.sampler(n, shape.gpus_per_node)
        maxima = np.array([draw(rng).max() for _ in range(iters)])
    p50, p99 = quantile_of_repeated(maxima, [0.5, 0.99])
    return float(maxima.mean()), float(p50), float(p99)


_remembered_wait = functools.lru_cache(maxsize=256)(_wait_of_all)


def plan_job(
    schedule: Schedule,
    compute: Compute,
    comm_per_round: Sequence[np.ndarray],
    budget_n: int | None = None,
    gpus_per_node: int = 1,
    step_share: float = 0.0,
) -> Job:
    """The run of one schedule's recurrence: `budget_n` (default n) sets how many iterations the work
    budget allows, so a reduced system can stand for a larger one without changing its length;
    `step_share` is the part of the step after the last wait (last_bucket_share)."""
    n = schedule.n
    period = len(comm_per_round)
    wanted = int(np.clip(SIM_BUDGET // max(budget_n or n, 1), SIM_MIN_ITERS, SIM_MAX_ITERS))
    measured = period * max(1, -(-wanted // period))
    warmup = max(SIM_WARMUP, 2 * period)
    if not compute.variation.is_iid:
        warmup = max(warmup, period + _straggler_transient(FlatPeers(schedule), compute, n))
    return Job(schedule, comm_per_round, warmup, measured, compute, gpus_per_node, step_share)


def simulate_growth_stats(
    schedule: Schedule,
    compute: Compute,
    comm_per_round: Sequence[np.ndarray],
    seed: int = SIM_SEED,
    gpus_per_node: int = 1,
    budget_n: int | None = None,
) -> Growth:
    """Run the max-plus recurrence (seeded Monte-Carlo of the compute draws; exact when sd = 0), with its
    Monte-Carlo error (recurrence.run_jobs; `budget_n`: plan_job).

    comm_per_round[r] is each rank's gossip time (plus the last bucket's optimizer step) in round r.
    The growth with that communication, with free communication, and the per-iteration samples
    X_i(t+1) - X_i(t) over ranks and measured iterations (for p50/p99). The measured window is a whole
    number of periods after a warm-up of at least two periods."""
    return run_jobs([plan_job(schedule, compute, comm_per_round, budget_n, gpus_per_node)], seed)[0]


def _straggler_transient(peers: FlatPeers, compute: Compute, n: int) -> int:
    """Iterations before every rank runs at the slowest rank's pace. A delay reaches rank j after d_j
    iterations (the schedule's distance), and rank j, free at its own pace, is caught once the slowest
    rank's lag d_j x rate_slow exceeds what it gained: after ~ d_j x rate_slow / (rate_slow - rate_typical)
    iterations. Bounded by SIM_MAX_REACH and by the work budget (at very large n the transient is cut
    short and the growth slightly underestimated)."""
    s = compute.variation.factors(n)
    slowest = int(np.argmax(s))
    c, o = compute.compute_s, compute.optimizer_s
    slow, typical = s[slowest] * c + o, float(np.median(s)) * c + o
    cap = int(min(SIM_MAX_REACH, max(SIM_WARMUP, STRAGGLER_BUDGET // max(n, 1))))
    if slow <= typical:
        return 0
    distance = _reach_iterations(peers, n, slowest, cap)
    return int(min(cap, np.ceil(1.5 * distance * slow / (slow - typical))))


def _reach_iterations(peers: FlatPeers, n: int, source: int, cap: int) -> int:
    """Iterations until a delay at rank `source` has reached every rank through the schedule (at most
    `cap`): the transient before every rank runs at a persistent straggler's pace."""
    reached = np.zeros(2 * n)  # the flat layout's two columns; only the first is read
    reached[source] = 1.0
    for t in range(cap):
        if reached[:n].min() > 0:
            return t
        reached = peers(reached, t)
    return cap


def gossip_prediction(
    scenario: Scenario, schedule: Schedule, allreduce: IterationPrediction | None = None
) -> IterationPrediction:
    """Decent-DP on `schedule`: growth rate of the recurrence, plus the factor breakdown vs All-Reduce
    (`allreduce`: the same scenario's All-Reduce prediction, when the caller already has it)."""
    return run_pending([gossip_pending(scenario, schedule, allreduce)])[0]


def gossip_pending(
    scenario: Scenario, schedule: Schedule, allreduce: IterationPrediction | None = None
) -> Pending:
    """gossip_prediction waiting for its recurrence (recurrence.run_pending runs several at once)."""
    scenario = adapted_scenario(schedule.exchange, scenario)
    shape, net, comp = scenario.shape, scenario.network, scenario.decent_dp_compute
    period = 1 if schedule.static_graph is not None else schedule.period
    rounds = [round_comm(schedule, i, shape, scenario.buckets, net, comp.compute_s) for i in range(period)]
    # Flows of a NIC overlap as far as their drifting offsets make them (flow_drift), and two bounds hold
    # whatever the overlap: a rank never waits less than its flows' solo time (RoundComm.charged_s), and
    # the NICs must carry every flow's bytes each period (nic_bound_s).
    per_rank, comm, at_once, channels_s = round_charges(rounds, schedule, scenario, comp)
    job = plan_job(schedule, comp, comm, None, shape.gpus_per_node, last_bucket_share(scenario.buckets))

    def floor_s() -> float:
        nic_bound = max(nic_bound_s(rounds, shape, net.nics_per_node), channels_s)
        return steady_floor_s(nic_bound, comp, schedule.n)

    def finish(growth: Growth) -> IterationPrediction:
        mean, samples = steady_floored(growth, floor_s())
        p50, p99 = quantile_of_repeated(samples, [0.5, 0.99])
        return prediction_from_growth(
            scenario, schedule.name, per_rank, (mean, growth.free_s, p50, p99), allreduce, at_once
        )

    return Pending(job, SIM_SEED, finish, lambda growth: steady_floored(growth, floor_s())[0])


def steady_floored(growth: Growth, floor_s: float) -> tuple[float, np.ndarray]:
    """(mean, samples) of the recurrence raised to a bound the long run cannot undercut (steady_floor_s)
    where the measured window does (flows that overlap less than their bytes allow; a straggler's
    transient longer than the window)."""
    if floor_s > growth.mean_s:
        return floor_s, growth.samples_s + (floor_s - growth.mean_s)
    return growth.mean_s, growth.samples_s


def steady_floor_s(nic_bound: float, compute: Compute, n: int) -> float:
    """What a connected schedule's long-run rate never undercuts: the NICs' byte bound, and the slowest
    rank's own pace (s_max x mean C + optimizer). Every rank of a connected max-plus system runs at one
    rate in the long run (its cycle mean), and rank i's own loop alone takes s_i x C + optimizer. The
    window of a recurrence ends before a small persistent slowdown has reached every rank when the
    transient outlasts SIM_MAX_REACH (a 0.2 % straggler on a 32-ring: ~12,000 iterations)."""
    pace = float(compute.variation.factors(n).max()) * compute.distribution.mean_s + compute.optimizer_s
    return max(nic_bound, pace)


def prediction_from_growth(
    scenario: Scenario,
    name: str,
    per_rank: Sequence[np.ndarray],
    growth: tuple[float, float, float, float],
    allreduce: IterationPrediction | None = None,
    at_once: float = 1.0,
) -> IterationPrediction:
    """The prediction from each round's per-rank gossip time and the recurrence's (mean, free, p50, p99):
    shared by the per-rank recurrence and the reduced system (runtime_model.prediction.reduced_system).
    `at_once`: the rounds' exchanges a link carries at once (group_pipeline.channels)."""
    comp = scenario.decent_dp_compute
    mean, free, p50, p99 = growth
    comm_rounds = [float(c.max()) for c in per_rank]
    wait = free - comp.optimizer_s
    comm_mean = float(np.mean([c.mean() for c in per_rank]))
    exposed = max(0.0, mean - wait - comp.optimizer_s)  # time waiting on gossip beyond compute

    ar = allreduce if allreduce is not None else allreduce_prediction(scenario)
    factors = shapley_factors(_worlds(scenario, ar, mean, wait, per_rank, at_once))
    return IterationPrediction(
        name=name,
        mean_s=mean,
        p50_s=p50,
        p99_s=p99,
        compute_wait_s=wait,
        comm_s=comm_mean,
        exposed_comm_s=exposed,
        optimizer_s=comp.optimizer_s,
        factors=factors,
        per_round_comm_s=tuple(comm_rounds),
    )


UNEVEN_REL_TOL = 1e-6  # exchanges within this relative spread are even (rounding, not cause)


def uneven_exchanges(per_rank: Sequence[np.ndarray]) -> bool:
    """Do the exchanges differ between rounds or between the ranks of a round (factors module doc)?"""
    lo = min(float(np.min(c)) for c in per_rank)
    hi = max(float(np.max(c)) for c in per_rank)
    return hi - lo > UNEVEN_REL_TOL * max(hi, 1e-12)


def compute_varies(scenario: Scenario) -> bool:
    """Any compute variation (i.i.d., persistent or node-correlated) in either execution's compute."""
    for comp in (scenario.compute, scenario.decent_dp_compute):
        dist = comp.wait_distribution  # E[max of 2 draws] exceeds the mean exactly when the draws vary
        if (dist is not None and dist.expected_max(2) > dist.mean_s) or not comp.variation.is_iid:
            return True
    return False


def _worlds(scenario: Scenario, ar: IterationPrediction, mean_s, wait_s, per_rank, at_once: float) -> Worlds:
    """The ingredients of the factor breakdown's mixed worlds (factors.Worlds) from each round's
    per-rank exchange times; the global all-reduce volume in those worlds runs on one group."""
    comm_rounds = [float(c.max()) for c in per_rank]
    ddp, dp, shape = scenario.compute, scenario.decent_dp_compute, scenario.shape
    # Decent-DP's compute is a scaled copy of DDP's on presets (same distribution family and variation),
    # so waiting only for the group scales the same way.
    ratio = ddp.compute_s / dp.compute_s if dp.compute_s > 0 else 1.0
    total = scenario.buckets.message_bytes
    per_bucket = [float(np.mean(comm_rounds)) * b.nbytes / total for b in scenario.buckets.ddp]
    return Worlds(
        allreduce_s=ar.mean_s,
        topology_s=mean_s,
        ddp_wait_all_s=ar.compute_wait_s,
        ddp_wait_group_s=wait_s * ratio,
        ddp_optimizer_s=ddp.optimizer_s,
        ddp_tail_allreduce_s=ar.exposed_comm_s,
        ddp_tail_topology_s=ddp_exposed_tail_s(ddp, scenario.buckets.ddp, per_bucket),
        dp_wait_all_s=compute_wait_of_all(dp, shape)[0] if dp is not ddp else ar.compute_wait_s,
        dp_wait_group_s=wait_s,
        dp_optimizer_s=dp.optimizer_s,
        allreduce_bound_s=exchange_bound_s(ar.comm_s, scenario.buckets, dp),
        round_bound_s=tuple(exchange_bound_s(c, scenario.buckets, dp, at_once) for c in comm_rounds),
        uneven_exchanges=uneven_exchanges(per_rank),
        varied=compute_varies(scenario),
        one_node=shape.nodes == 1,
    )

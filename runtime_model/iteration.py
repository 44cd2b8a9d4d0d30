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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from runtime_model.collectives import allreduce_parts_s, global_allreduce_shape, serial_allreduces_s
from runtime_model.scenario import Bucket, BucketLayout, ClusterShape, Compute, Network, Scenario
from runtime_model.schedule import Schedule

SIM_SEED = 20241015  # fixed: predictions are deterministic; common random numbers across topologies
SIM_BUDGET = 60_000  # rank-iterations per simulation: bounds advisor latency at large n
SIM_MIN_ITERS, SIM_MAX_ITERS, SIM_WARMUP = 12, 240, 8


@dataclass(frozen=True)
class FactorBreakdown:
    """How much of T_AR - T_topology each factor explains; the three parts sum to `total_s`.

    Computed as a telescoping chain of counterfactuals, so the sum is exact:
      variance = T_AR - T_AR(with the topology's compute wait instead of max-of-n)
      overlap  = that - max(wait + t_O, global all-reduce volume)   (whole-iteration window, no tail)
      links    = that - T_topology                                  (group sizes, link classes, NIC sharing)
    """

    overlap_s: float
    links_s: float
    variance_s: float

    @property
    def total_s(self) -> float:
        return self.overlap_s + self.links_s + self.variance_s


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
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node)
    parts = [allreduce_parts_s(group, b.nbytes, net) for b in scenario.buckets.ddp]
    costs = [f + b for f, b in parts]
    overlapped = [f for f, _ in parts] if net.concurrent_collectives > 1 else None
    tail = ddp_exposed_tail_s(comp, scenario.buckets.ddp, costs, overlapped)
    dist, n = comp.distribution, shape.gpus
    wait = dist.expected_max(n)
    fixed = tail + comp.optimizer_s
    return IterationPrediction(
        name="allreduce",
        mean_s=wait + fixed,
        p50_s=dist.quantile_of_max(0.50, n) + fixed,
        p99_s=dist.quantile_of_max(0.99, n) + fixed,
        compute_wait_s=wait,
        comm_s=float(sum(costs)),
        exposed_comm_s=tail,
        optimizer_s=comp.optimizer_s,
    )


def round_comm_per_rank_s(
    schedule: Schedule, round_index: int, shape: ClusterShape, buckets: BucketLayout, net: Network
) -> np.ndarray:
    """Each rank's gossip time in this round: serial sum over buckets of its own group's all-reduce.

    Per rank, not the round's slowest group: with a one-iteration slack a rank only waits for its
    own group, and which groups are slow changes from round to round (alternating-exp-ring).
    """
    if schedule.static_graph is not None:
        cost = static_graph_comm_s(schedule.static_graph.peer_offsets, shape, buckets.message_bytes, net)
        return np.full(shape.gpus, cost)
    return schedule.rounds[round_index].per_rank_cost(
        shape, lambda g: serial_allreduces_s(g, [b.nbytes for b in buckets.gossip], net)
    )


def round_comm_s(
    schedule: Schedule, round_index: int, shape: ClusterShape, buckets: BucketLayout, net: Network
) -> float:
    """The round's slowest group's gossip time (what the table shows as comm per round)."""
    return float(round_comm_per_rank_s(schedule, round_index, shape, buckets, net).max())


def static_graph_comm_s(offsets: Sequence[int], shape: ClusterShape, nbytes: float, net: Network) -> float:
    """A static graph has no disjoint groups: each rank exchanges the whole message with every peer.

    Peers inside the node cost an intra-node exchange; peers on other nodes share the NIC with the
    node's other k ranks, which all send across at once (q = k). Exchanges of one rank are serial;
    each sends the message one way and receives one the other way at once (full duplex): alpha + S*beta.
    """
    k = shape.gpus_per_node
    total = 0.0
    for off in offsets:
        crosses = any((r // k) != ((r + off) % shape.gpus) // k for r in range(min(k, shape.gpus)))
        link, share = (net.inter, k) if crosses else (net.intra, 1)
        total += link.latency_s + nbytes * share / link.bandwidth_Bps
    return total


class _PeerMax:
    """max over each rank's group (or static neighbourhood) of a per-rank vector, vectorised.

    Groups: sort ranks by label once, then a segmented max (reduceat) and a scatter back.
    """

    def __init__(self, schedule: Schedule):
        self.static = schedule.static_graph.peer_offsets if schedule.static_graph is not None else ()
        self.rounds = []
        if self.static:
            return
        for r in schedule.rounds:
            order, starts = r.sorted_groups
            sizes = np.diff(np.r_[starts, r.n])
            self.rounds.append((order, starts, np.repeat(np.arange(starts.size), sizes)))

    def __call__(self, x: np.ndarray, t: int) -> np.ndarray:
        """x has shape (n,) or (n, 2): two independent systems advanced together."""
        if self.static:
            out = x.copy()
            for off in self.static:
                out = np.maximum(out, np.roll(x, -off, axis=0))
            return out
        order, starts, seg = self.rounds[t % len(self.rounds)]
        gmax = np.maximum.reduceat(x[order], starts, axis=0)
        out = np.empty_like(x)
        out[order] = gmax[seg]
        return out


def simulate_growth(
    schedule: Schedule, compute: Compute, comm_per_round: Sequence[np.ndarray], seed: int = SIM_SEED
) -> tuple[float, float, np.ndarray]:
    """Run the max-plus recurrence (seeded Monte-Carlo of the compute draws; exact when sd = 0).

    comm_per_round[r] is each rank's gossip time (plus the last bucket's optimizer step) in round r.
    Returns (growth with that communication, growth with free communication, per-iteration samples
    X_i(t+1) - X_i(t) over ranks and measured iterations, for p50/p99). The measured window is a
    whole number of periods after a warm-up of at least two periods.
    """
    n = schedule.n
    peers = _PeerMax(schedule)
    period = len(comm_per_round)
    wanted = int(np.clip(SIM_BUDGET // max(n, 1), SIM_MIN_ITERS, SIM_MAX_ITERS))
    measured = period * max(1, -(-wanted // period))
    warmup = max(SIM_WARMUP, 2 * period)
    rng = np.random.default_rng(seed)
    comm = [np.stack([np.broadcast_to(c, (n,)), np.zeros(n)], axis=1) for c in comm_per_round]
    x = np.zeros((n, 2))
    start = None
    samples = []
    for t in range(warmup + measured):
        c = compute.distribution.sample(rng, n) + compute.optimizer_s
        new = np.maximum(x + c[:, None], peers(x, t) + comm[t % period])
        if t >= warmup:
            if start is None:
                start = x.copy()
            samples.append(new[:, 0] - x[:, 0])
        x = new
    growth = (x - start).mean(axis=0) / measured
    return float(growth[0]), float(growth[1]), np.concatenate(samples)


def last_bucket_optimizer_s(compute: Compute, buckets: BucketLayout) -> float:
    """Decent-DP steps each bucket in its hook; the last bucket's share runs after the last wait."""
    return compute.optimizer_s * buckets.gossip[-1].nbytes / buckets.message_bytes


def gossip_prediction(
    scenario: Scenario, schedule: Schedule, allreduce: IterationPrediction | None = None
) -> IterationPrediction:
    """Decent-DP on `schedule`: growth rate of the recurrence, plus the factor breakdown vs All-Reduce
    (`allreduce`: the same scenario's All-Reduce prediction, when the caller already has it)."""
    shape, net, comp = scenario.shape, scenario.network, scenario.decent_dp_compute
    period = 1 if schedule.static_graph is not None else schedule.period
    per_rank = [round_comm_per_rank_s(schedule, i, shape, scenario.buckets, net) for i in range(period)]
    comm_rounds = [float(c.max()) for c in per_rank]
    opt_last = last_bucket_optimizer_s(comp, scenario.buckets)
    mean, free, samples = simulate_growth(schedule, comp, [c + opt_last for c in per_rank])
    p50, p99 = (float(v) for v in np.quantile(samples, [0.5, 0.99]))
    wait = free - comp.optimizer_s
    comm_mean = float(np.mean([c.mean() for c in per_rank]))
    exposed = max(0.0, mean - wait - comp.optimizer_s)  # time waiting on gossip beyond compute

    ar = allreduce if allreduce is not None else allreduce_prediction(scenario)
    b_variance = ar.mean_s - ar.compute_wait_s + wait
    c_overlap = max(wait + comp.optimizer_s, ar.comm_s + opt_last)
    factors = FactorBreakdown(
        variance_s=ar.mean_s - b_variance,
        overlap_s=b_variance - c_overlap,
        links_s=c_overlap - mean,
    )
    return IterationPrediction(
        name=schedule.name,
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

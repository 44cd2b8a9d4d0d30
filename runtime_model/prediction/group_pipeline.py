"""What a Decent-DP rank waits for after its last launch: a round's exchange starts at its buckets'
launches, behind the last round's on one channel, or at once on a group of its own where the link
carries more than one group's rate (Network.group_concurrency > 1).

Why: Decent-DP (decent_dp/ddp.py, `_ddp_fn`) launches bucket k's all-reduce in its backward hook on the
group of that iteration's round and waits for it at bucket k's hook one iteration later, and it makes one
process group per distinct set of ranks (decent_dp/topo.py). The recurrence (iteration.py) charges what
a rank waits for after its last launch, then the last bucket's step t_O,last. With P distinct groups a rank cycles through, the group of iteration t was last used
P >= 2 iterations earlier and is idle when bucket 1 is launched, so its buckets move while backward and
the steps of later buckets run; only what the channel has not done by the last launch is waited for:

    waited = max over k of ( D x S_k - gap_k )

(D: the round's exchange; S_k: the share of its bytes in bucket k and after; gap_k: the time from bucket
k's launch to the last one's, its share of backward plus the steps of the buckets after it). The link
still carries every round's bytes: the long-run iteration is at least D / min(g, P) (g: the measured
gain of two groups over one). On one H200 host, gloo, 2 and 4 ranks sharing the GPU, that pipelined loop
moved 1.4-1.8x one group's rate (benchmarks/results/gloo-gossip-pipeline/h200-2026-11-28). Where g = 1
(presets; NCCL on a NIC) or every round uses the same group, one channel carries every round: its
buckets queue behind the last round's, which finished at least the last bucket's step before this
round's last launch, so the wait is at most max(D - t_O,last, the pipelined wait), and exactly that
while the channel is never idle (pipelined_waits).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from runtime_model.core.scenario import BucketLayout, Compute, Scenario
from runtime_model.prediction.round_comm import RoundComm, exposed_exchange_s
from runtime_model.topology.schedule import Schedule


def distinct_groups(schedule: Schedule) -> int:
    """The fewest distinct groups any rank cycles through over one period (a group is its set of ranks:
    Decent-DP registers one process group per set)."""
    if schedule.static_graph is not None or not schedule.rounds:
        return 1
    keys = np.stack([_group_keys(r.labels) for r in schedule.rounds[: schedule.period]])  # (P, n, 3)
    if keys.shape[0] == 1:
        return 1
    same_as_earlier = np.zeros(keys.shape[:2], dtype=bool)
    for p in range(1, keys.shape[0]):
        same_as_earlier[p] = np.any(np.all(keys[:p] == keys[p], axis=2), axis=0)
    return int((~same_as_earlier).sum(axis=0).min())


def _group_keys(labels: np.ndarray) -> np.ndarray:
    """Per rank, (smallest rank, size, sum of ranks) of its group in one round: one group's identity in
    the schedules the advisor builds, without n-sized sets."""
    n_groups = int(labels.max()) + 1
    ranks = np.arange(labels.size)
    low = np.full(n_groups, labels.size)
    np.minimum.at(low, labels, ranks)
    size = np.bincount(labels, minlength=n_groups)
    total = np.bincount(labels, weights=ranks, minlength=n_groups).astype(np.int64)
    return np.stack([low[labels], size[labels], total[labels]], axis=1)


def last_bucket_share(buckets: BucketLayout) -> float:
    """Decent-DP steps each bucket in its hook; the last bucket's share of the step runs after the last
    wait (by bytes)."""
    return buckets.gossip[-1].nbytes / buckets.message_bytes


def last_bucket_optimizer_s(compute: Compute, buckets: BucketLayout) -> float:
    return compute.optimizer_s * last_bucket_share(buckets)


def launch_gaps_s(buckets: BucketLayout, compute: Compute) -> tuple[np.ndarray, np.ndarray]:
    """(S_k, gap_k) per gossip bucket: the share of the bytes from bucket k on, and the seconds from its
    launch to the last bucket's (its share of backward, then the steps of the buckets after it, each by
    bytes as last_bucket_share counts them)."""
    sizes = np.array([b.nbytes for b in buckets.gossip], float)
    ready = np.array([b.ready_fraction for b in buckets.gossip], float)
    share_from = np.cumsum(sizes[::-1])[::-1] / sizes.sum()
    after = share_from - sizes / sizes.sum()
    gaps = (ready[-1] - ready) * compute.backward_s + compute.optimizer_s * after
    return share_from, np.maximum(gaps, 0.0)


def channels(schedule: Schedule, group_gain: float) -> float:
    """How many rounds' exchanges a link carries at once: min(gain, P) where a rank's rounds cycle
    through P >= 2 groups of their own and two groups measured faster than one, else 1 (one channel)."""
    if group_gain <= 1.0 or not schedule.exchange.hidden:
        return 1.0
    groups = distinct_groups(schedule)
    return min(group_gain, groups) if groups >= 2 else 1.0


def pipelined_waits(
    waited: Sequence[np.ndarray],
    schedule: Schedule,
    buckets: BucketLayout,
    compute: Compute,
    at_once: float,
) -> tuple[list[np.ndarray], float]:
    """(what the recurrence charges after the last launch per round, the floor the channels set on the
    long-run iteration). The exchange run after the step (plain SGP) is charged whole, no floor.

    Rounds on groups of their own with a gain above 1: the group is idle at the first launch, so the
    pipelined wait, and the channels' floor (module doc). Otherwise one channel carries every round: the
    round's buckets queue behind the last round's, which was done (F) at least the last bucket's step
    before this round's last launch X (that step follows its wait). So the wait after X is at most
    max(D - t_O,last, pipelined), and exactly that when the channel is never idle: the recurrence then
    grows by D per iteration, not D + t_O,last (the channel works while the last bucket steps).
    `at_once`: channels(schedule, the network's group_concurrency)."""
    if not schedule.exchange.hidden:
        return list(waited), 0.0
    lines = launch_gaps_s(buckets, compute)
    pipelined = [_pipelined_s(d, *lines) for d in waited]
    if at_once > 1.0:
        per_rank_mean = np.mean(np.stack(waited), axis=0)
        return pipelined, float(per_rank_mean.max()) / at_once
    step_last = last_bucket_optimizer_s(compute, buckets)
    return [np.maximum(d - step_last, p) for d, p in zip(waited, pipelined, strict=True)], 0.0


def round_charges(
    rounds: Sequence[RoundComm], schedule: Schedule, scenario: Scenario, compute: Compute
) -> tuple[list[np.ndarray], list[np.ndarray], float, float]:
    """(each round's per-rank exchange, what the recurrence charges per round after the last launch: the
    pipelined wait and then the last bucket's step, the channels the link runs, the floor they set on the
    long-run iteration): one rule for the per-rank recurrence and the reduced system."""
    per_rank, waited = exposed_exchange_s(rounds, schedule, compute.compute_s)
    at_once = channels(schedule, scenario.network.group_concurrency)
    waited, channels_s = pipelined_waits(waited, schedule, scenario.buckets, compute, at_once)
    opt_last = last_bucket_optimizer_s(compute, scenario.buckets)
    return per_rank, [c + opt_last for c in waited], at_once, channels_s


def exchange_bound_s(
    exchange_s: float, buckets: BucketLayout, compute: Compute, at_once: float = 1.0
) -> float:
    """The least iteration one rank's hidden exchange of `exchange_s` per round allows, without variance
    (what pipelined_waits charges, then the last bucket's step): the factor breakdown's mixed worlds
    charge exchanges by the same rule as the recurrence."""
    pipelined = float(_pipelined_s(np.array([exchange_s]), *launch_gaps_s(buckets, compute))[0])
    return max(pipelined + last_bucket_optimizer_s(compute, buckets), exchange_s / at_once)


def _pipelined_s(exchange_s: np.ndarray, share_from: np.ndarray, gaps: np.ndarray) -> np.ndarray:
    """Per rank, what is left of its exchange at the last launch when its group is idle at the first:
    max over k of (D x S_k - gap_k) (module doc; S_k, gap_k: launch_gaps_s). One pass over the ranks per
    bucket (a max over a short last axis of an (n, buckets) array costs several times more), and one value
    where every rank's exchange is the same: the same floats either way."""
    if exchange_s.size and exchange_s.min() == exchange_s.max():
        return np.full(exchange_s.shape, np.max(exchange_s.flat[0] * share_from - gaps))
    out = exchange_s * share_from[0] - gaps[0]
    for share, gap in zip(share_from[1:], gaps[1:], strict=True):
        np.maximum(out, exchange_s * share - gap, out=out)
    return out

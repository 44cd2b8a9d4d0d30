"""The batched recurrence (runtime_model/prediction/recurrence.py), complete's batched reduced system and the sweep's
one pass over n give each run's own numbers: equal to a plain per-rank loop, and alone = in a batch.

The plain loop here is the recurrence as iteration.py's module doc states it, one rank group at a time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from runtime_model.advice.advisor import advise, advise_many
from runtime_model.core.distributions import EmpiricalCompute, NormalCompute
from runtime_model.core.scenario import ClusterShape, Compute
from runtime_model.core.variation import Variation
from runtime_model.prediction.complete_system import CompleteJob, _normal_extremes, simulate_complete
from runtime_model.prediction.group_pipeline import last_bucket_optimizer_s
from runtime_model.prediction.iteration import SIM_SEED, plan_job
from runtime_model.prediction.pending import Pending, run_means, run_pending
from runtime_model.prediction.recurrence import FlatPeers, batch_se, run_jobs
from runtime_model.prediction.round_comm import round_comm
from runtime_model.presets import to_model as presets
from runtime_model.topology.registry import TopologyNotApplicable, build_schedule, topology_names
from runtime_model.topology.schedule import Round, ScheduleError


def _scenario(n, k, cv=0.05, **kw):
    return presets.scenario_from_choice(
        presets.resolve(presets.PresetRequest(n, gpus_per_node=k, compute_cv=cv, **kw))
    )


def _jobs(sc):
    comp, k = sc.decent_dp_compute, sc.shape.gpus_per_node
    opt = last_bucket_optimizer_s(comp, sc.buckets)
    out = []
    for name in topology_names():
        try:
            sch = build_schedule(name, sc.shape)
        except TopologyNotApplicable:
            continue
        period = 1 if sch.static_graph is not None else sch.period
        window = comp.compute_s
        comm = [
            round_comm(sch, t, sc.shape, sc.buckets, sc.network, window).charged_s + opt
            for t in range(period)
        ]
        out.append(plan_job(sch, comp, comm, gpus_per_node=k))
    return out


def _peer_max_plainly(schedule, x, t):
    """max over each rank's group (static graph: its neighbourhood), group by group."""
    n = schedule.n
    if schedule.static_graph is not None:
        return np.max([np.roll(x, -off, axis=0) for off in (0, *schedule.static_graph.peer_offsets)], axis=0)
    out = np.empty_like(x)
    for members in schedule.rounds[t % schedule.period].groups():
        out[members] = x[members].max(axis=0)
    assert out.shape[0] == n
    return out


def _plain_run(job, seed=SIM_SEED):
    """The recurrence for one job: (n, 2) state, one draw per iteration (iteration.py's module doc)."""
    sch, comp, n = job.schedule, job.compute, job.schedule.n
    rng = np.random.default_rng(seed)
    draw = comp.sampler(n, job.gpus_per_node)
    period = len(job.comm_per_round)
    x, start, samples, marks = np.zeros((n, 2)), None, [], []
    for t in range(job.warmup + job.measured):
        c = draw(rng) + comp.optimizer_s
        cost = np.stack([np.broadcast_to(job.comm_per_round[t % period], (n,)), np.zeros(n)], axis=1)
        new = np.maximum(x + c[:, None], _peer_max_plainly(sch, x, t) + cost)
        if t >= job.warmup:
            if start is None:
                start = x.copy()
            if (t - job.warmup) % period == 0:
                marks.append(float(x[:, 0].mean()))
            samples.append(new[:, 0] - x[:, 0])
        x = new
    marks.append(float(x[:, 0].mean()))
    growth = (x - start).mean(axis=0) / job.measured
    return float(growth[0]), float(growth[1]), np.concatenate(samples), batch_se(marks, period)


def _same(growth, plain):
    assert (growth.mean_s, growth.free_s, growth.se_s) == (plain[0], plain[1], plain[3])
    np.testing.assert_array_equal(growth.samples_s, plain[2])


@pytest.mark.slow
@pytest.mark.parametrize(
    "n, k, kw",
    [
        (64, 4, {}),
        (96, 4, {}),
        (48, 8, {"straggler": (1.5, 2)}),
        (32, 4, {"node_cv": 0.05}),
        (128, 2, {"rank_cv": 0.05}),
        (16, 4, {"compute_cv": 0.0}),
    ],
)
def test_a_batch_gives_each_schedule_the_plain_loops_numbers_bit_for_bit(n, k, kw):
    sc = _scenario(n, k, **{"cv": kw.pop("compute_cv", 0.05), **kw})
    jobs = _jobs(sc)
    batch = run_jobs(jobs, SIM_SEED)
    for job, growth in zip(jobs, batch, strict=True):
        _same(growth, _plain_run(job))
        _same(run_jobs([job], SIM_SEED)[0], _plain_run(job))


@pytest.mark.parametrize(
    "n, k, kw", [(64, 4, {}), (48, 8, {"straggler": (1.5, 2)}), (32, 4, {"node_cv": 0.05})]
)
def test_a_run_without_the_free_column_keeps_the_comm_column_bit_for_bit(n, k, kw):
    """What a search over scenarios reads (pending.run_means): every kind of schedule, pairs, groups and
    static graphs, batched as the two-column run is."""
    jobs = _jobs(_scenario(n, k, **{"cv": 0.05, **kw}))
    assert {FlatPeers.kind_of(j.schedule) for j in jobs} == {"pairs", "groups", "static"}
    for both, alone in zip(run_jobs(jobs, SIM_SEED), run_jobs(jobs, SIM_SEED, columns=1), strict=True):
        assert alone.mean_s == both.mean_s
        assert math.isnan(alone.free_s) and not math.isnan(both.free_s)
        # a run for means alone records no window: no samples, no standard error
        assert alone.samples_s.size == 0 and math.isnan(alone.se_s)
        assert both.samples_s.size > 0 and not math.isnan(both.se_s)


def test_a_searchs_means_are_the_full_predictions_means():
    sc = _scenario(64, 4)
    pending = [Pending(j, SIM_SEED, lambda g: g, lambda g: g.mean_s) for j in _jobs(sc)]
    assert run_means(pending) == [g.mean_s for g in run_pending(pending)]


def test_runs_with_different_normal_computes_share_the_draws_but_keep_their_own_numbers():
    """A sweep batches n' = 1024 reduced systems of different n, whose compute differs: each keeps its own."""
    jobs = _jobs(_scenario(64, 4))
    other = _jobs(_scenario(64, 4, cv=0.2))
    pending = [Pending(j, SIM_SEED, lambda g: g) for j in jobs + other]
    assert len({p.job.batch_key() for p in pending}) == 1
    for job, growth in zip(jobs + other, run_pending(pending), strict=True):
        _same(growth, _plain_run(job))


def _complete_jobs(n, computes, n_full=1 << 16, k=4):
    rng = np.random.default_rng(5)
    return [CompleteJob(c, 0.004 + 1e-4 * rng.random(n), n_full, k, 8, 30) for c in computes]


@pytest.mark.parametrize(
    "variation",
    [Variation(), Variation(rank_cv=0.05), Variation(straggler_factor=1.5, straggler_count=3)],
    ids=lambda v: v.describe(),
)
def test_completes_reduced_system_in_a_batch_is_each_jobs_own_run(variation):
    base = Compute(0.01, 0.02, 0.004, NormalCompute(0.03, 0.002), variation=variation)
    computes = [base, Compute(0.01, 0.02, 0.003, NormalCompute(0.031, 0.003), variation=variation)]
    if not variation.is_iid:
        computes = [base, base]  # only equal computes share a batch then
    jobs = _complete_jobs(256, computes)
    together = simulate_complete(jobs, SIM_SEED)
    for job, g in zip(jobs, together, strict=True):
        alone = simulate_complete([job], SIM_SEED)[0]
        assert (g.mean_s, g.free_s, g.se_s) == (alone.mean_s, alone.free_s, alone.se_s)
        np.testing.assert_array_equal(g.samples_s, alone.samples_s)


@pytest.mark.parametrize(
    "distribution",
    [NormalCompute(0.03, 0.002), EmpiricalCompute((0.028, 0.029, 0.030, 0.031, 0.035))],
    ids=["normal", "empirical"],
)
def test_completes_comm_column_alone_is_the_two_column_runs_bit_for_bit(distribution):
    """A search reads means alone (pending.run_means): complete then runs without its free column."""
    jobs = _complete_jobs(256, [Compute(0.01, 0.02, 0.004, distribution)] * 2)
    for both, alone in zip(
        simulate_complete(jobs, SIM_SEED), simulate_complete(jobs, SIM_SEED, with_free=False), strict=True
    ):
        assert (alone.mean_s, alone.se_s) == (both.mean_s, both.se_s)
        np.testing.assert_array_equal(alone.samples_s, both.samples_s)
        assert math.isnan(alone.free_s) and not math.isnan(both.free_s)


def _survival_root(base, s, dist, others, u):
    """The extreme's defining equation solved by bisection (200 halvings), for reference."""
    tail = -math.expm1(math.log(u) / others)
    lo, hi = float(base.min()) - 1.0, float(base.max()) + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        z = ((mid - base) / s - dist.mean_s) / dist.sd_s
        surv = np.mean([0.5 * math.erfc(v / math.sqrt(2.0)) for v in z])
        lo, hi = (mid, hi) if surv > tail else (lo, mid)
    return 0.5 * (lo + hi)


def test_the_unseen_ranks_extreme_solves_its_equation_to_a_millionth_of_the_sd():
    rng = np.random.default_rng(11)
    dist = NormalCompute(0.03, 0.002)
    for u in (0.5, 0.03, 0.97):
        rows = []
        for spread_sd in (0.0, 0.5, 5.0, 20.0):
            base = 1.0 + spread_sd * dist.sd_s * rng.random(512)
            s = np.maximum(1.0 + 0.05 * rng.standard_normal(512), 0.5) if spread_sd == 5.0 else np.ones(512)
            rows += [(dist, base, s, others) for others in (3000, 1 << 14, 1 << 24)]
        for (d, base, s, others), v in zip(rows, _normal_extremes(rows, u), strict=True):
            assert abs(v - _survival_root(base, s, d, others, u)) <= 1e-6 * d.sd_s


def test_a_sweeps_one_pass_over_n_gives_each_n_its_own_advice():
    ns = [8, 64, 96, 4096, 8192, 12288]
    scenarios = [_scenario(n, 4) for n in ns]
    for sc, batched in zip(scenarios, advise_many(scenarios), strict=True):
        alone = advise(sc)
        assert batched.allreduce == alone.allreduce
        for a, b in zip(batched.rows, alone.rows, strict=True):
            assert (a.topology, a.applicable, a.prediction, a.consensus) == (
                b.topology,
                b.applicable,
                b.prediction,
                b.consensus,
            )


def _random_pair_round(rng, n):
    perm = rng.permutation(n)
    pairs = int(rng.integers(0, n // 2 + 1))
    labels = np.empty(n, dtype=np.int64)
    for i in range(pairs):
        labels[perm[2 * i]] = labels[perm[2 * i + 1]] = i
    labels[perm[2 * pairs :]] = pairs + np.arange(n - 2 * pairs)
    return Round(labels, np.full(n - pairs, 0.5))


def test_pair_rounds_placement_is_the_ring_walks():
    rng = np.random.default_rng(1)
    for _ in range(400):
        n = int(rng.choice([1, 2, 4, 6, 8, 12, 16, 24, 64, 96]))
        k = int(rng.choice([d for d in (1, 2, 3, 4, 8) if n % d == 0]))
        nics = int(rng.choice([1, 2, 3, 4, 8]))
        rnd, shape = _random_pair_round(rng, n), ClusterShape(n, k)
        for fast, ring in zip(
            rnd._pair_placement(shape, nics), rnd._ring_placement(shape, nics), strict=True
        ):
            assert fast.dtype.kind == ring.dtype.kind and np.array_equal(fast, ring), (n, k, nics)


def test_an_invalid_round_is_refused_every_time_it_is_checked():
    rnd = Round(np.array([0, 0, 5]), np.array([1.0]))
    for _ in range(2):
        with pytest.raises(ScheduleError):
            rnd.validate()


def test_a_run_met_twice_is_run_once_and_is_still_its_own():
    """base-2 is one-peer-exp at n = 2^p (the same rounds and costs): one run serves both."""
    jobs = _jobs(_scenario(64, 4))
    names = [j.schedule.name for j in jobs]
    out = run_pending([Pending(j, SIM_SEED, lambda g: g) for j in jobs])
    a, b = names.index("one-peer-exp"), names.index("base-2")
    assert out[a] is out[b]
    _same(out[b], _plain_run(jobs[b]))
    assert out[names.index("ring")] is not out[a]

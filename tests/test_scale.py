"""The reduced system (runtime_model/topology/symmetry.py, reduced_system.py) against the per-rank recurrence.

Without variance it must equal the per-rank answer exactly on every topology; with variance it must agree
within its stated Monte-Carlo error; All-Reduce's max over n from rank classes must agree with the
Monte-Carlo of every rank; and the model must answer at 2^24 without n-sized work per round.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.convergence.consensus import consensus_metrics
from runtime_model.core.distributions import NormalCompute
from runtime_model.core.order_stats import max_of_ranks, quantile_of_repeated
from runtime_model.core.scenario import ClusterShape, Compute
from runtime_model.core.variation import Variation
from runtime_model.prediction.group_pipeline import channels, last_bucket_optimizer_s, pipelined_waits
from runtime_model.prediction.iteration import (
    allreduce_prediction,
    compute_wait_of_all,
    gossip_prediction,
    simulate_growth_stats,
)
from runtime_model.prediction.reduced_system import reduced_consensus, reduced_prediction, topology_model
from runtime_model.prediction.round_comm import exposed_exchange_s, nic_bound_s, round_comm
from runtime_model.presets import to_model as presets
from runtime_model.topology.exchange import adapted_scenario
from runtime_model.topology.registry import (
    TopologyNotApplicable,
    build_schedule,
    topology_names,
    unreduced_names,
)
from runtime_model.topology.symmetry import FULL_MAX_N, reduce

SHAPES = [(4096, 8), (1024, 4), (1024, 1), (768, 4), (96, 2), (512, 8), (2048, 2)]


def _scenario(n, k, cv, **kw):
    """The preset scenario, at the default global batch (25,000 tokens) or one token per GPU beyond it."""
    kw.setdefault("global_batch", max(n, 25_000))
    return presets.scenario_from_choice(presets.resolve(presets.PresetRequest(n, gpus_per_node=k, compute_cv=cv, **kw)))


def _pairs(n, k):
    for name in topology_names():
        if name in unreduced_names():
            continue
        try:
            yield name, build_schedule(name, ClusterShape(n, k))
        except TopologyNotApplicable:
            continue


@pytest.mark.parametrize("n, k", SHAPES)
@pytest.mark.parametrize("target", [1, 64])
def test_without_variance_the_reduced_system_is_the_per_rank_recurrence(n, k, target):
    sc = _scenario(n, k, 0.0)
    ar = allreduce_prediction(sc)
    for name, full in _pairs(n, k):
        red = reduce(name, sc.shape, build_schedule, target)
        assert red.n <= max(n // 2, 8 * k) or red.n == n, (name, red.n)
        a, b = gossip_prediction(sc, full, ar), reduced_prediction(sc, red, ar).prediction
        # exposed_comm_s is a difference of iteration-sized terms: its rounding is the iteration's
        tiny = 1e-12 * a.mean_s
        for field in ("mean_s", "p50_s", "p99_s", "compute_wait_s", "comm_s", "exposed_comm_s"):
            assert getattr(b, field) == pytest.approx(getattr(a, field), rel=1e-12, abs=tiny), (name, field)
        assert b.per_round_comm_s == pytest.approx(a.per_round_comm_s, rel=1e-12)


@pytest.mark.parametrize("n, k", SHAPES)
def test_reduced_costs_are_the_existing_functions_on_the_covering_ranks(n, k):
    sc = _scenario(n, k, 0.0)
    for name, full in _pairs(n, k):
        if full.static_graph is not None:
            continue
        red = reduce(name, sc.shape, build_schedule, 64)
        from runtime_model.prediction.reduced_system import reduced_rounds

        reduced = [r.charged_s for r in reduced_rounds(red, sc)]
        ranks = np.arange(n)
        image = red.rank_map(ranks)
        for t in range(full.period):
            window = sc.decent_dp_compute.compute_s
            per_rank = round_comm(full, t, sc.shape, sc.buckets, sc.network, window).charged_s
            np.testing.assert_allclose(reduced[t][image], per_rank, rtol=1e-12, err_msg=f"{name} round {t}")


@pytest.mark.parametrize("n, k", SHAPES)
def test_consensus_from_structure_equals_the_per_rank_computation(n, k):
    for name, full in _pairs(n, k):
        red = reduce(name, ClusterShape(n, k), build_schedule, 16)
        a, b = consensus_metrics(full), reduced_consensus(red)
        assert b.exact_rounds == a.exact_rounds, name
        assert b.rho == pytest.approx(a.rho, abs=1e-9), name
        assert b.worst_round_contraction == pytest.approx(a.worst_round_contraction, abs=1e-9), name
        assert b.tau_over_p == pytest.approx(a.tau_over_p, rel=1e-6), name


def _full_growth(sc, schedule):
    sc = adapted_scenario(schedule.exchange, sc)  # as the library cuts its message (exchange.py)
    comp = sc.decent_dp_compute
    period = 1 if schedule.static_graph is not None else schedule.period
    opt = last_bucket_optimizer_s(comp, sc.buckets)
    rounds = [
        round_comm(schedule, i, sc.shape, sc.buckets, sc.network, comp.compute_s) for i in range(period)
    ]
    _, waited = exposed_exchange_s(rounds, schedule, comp.compute_s)
    at_once = channels(schedule, sc.network.group_concurrency)
    waited, channels_s = pipelined_waits(waited, schedule, sc.buckets, comp, at_once)
    growth = simulate_growth_stats(schedule, comp, [c + opt for c in waited], gpus_per_node=sc.shape.gpus_per_node)
    return growth, max(nic_bound_s(rounds, sc.shape, sc.network.nics_per_node), channels_s)


@pytest.mark.parametrize("n, k", [(1024, 4), (1024, 8), (512, 1), (768, 4)])
def test_with_variance_the_reduced_system_agrees_within_its_monte_carlo_error(n, k):
    """Stated error: 5 combined standard errors (batch means of both runs) plus 0.5% for the folding
    (a reduced rank meets the same partner again after log2 n' rounds instead of log2 n)."""
    sc = _scenario(n, k, 0.1)
    for name, full in _pairs(n, k):
        red = reduce(name, sc.shape, build_schedule, 256)
        assert red.n <= 256
        res = reduced_prediction(sc, red)
        ref, nic_floor_s = _full_growth(sc, full)
        ref_mean = max(ref.mean_s, nic_floor_s)
        tol = 5 * math.hypot(res.se_s, ref.se_s) + 0.005 * ref_mean
        assert abs(res.prediction.mean_s - ref_mean) <= tol, (name, res.prediction.mean_s, ref_mean, tol)


@pytest.mark.parametrize(
    "var",
    [
        Variation(straggler_factor=1.5, straggler_count=3),
        Variation(node_cv=0.05),
        Variation(straggler_factor=1.3, straggler_count=8, node_cv=0.03),
        Variation(rank_cv=0.05),
    ],
    ids=lambda v: v.describe(),
)
def test_max_over_n_from_rank_classes_agrees_with_the_per_rank_monte_carlo(var):
    dist = NormalCompute(0.05, 0.005)
    comp = Compute(0.02, 0.03, 0.005, dist, variation=var)
    mc = compute_wait_of_all(comp, ClusterShape(1024, 4))  # n <= FULL_MAX_N: every rank drawn
    exact = max_of_ranks(dist, var, 1024, 4)
    # the Monte-Carlo's p99 from ~2,000 maxima is good to ~1%; a rank spread is a population in
    # max_of_ranks and one seeded draw in the Monte-Carlo
    assert exact == pytest.approx(mc, rel=0.01)


def test_max_over_n_without_variation_classes_is_the_iid_order_statistic():
    dist = NormalCompute(0.05, 0.005)
    mean, p50, p99 = max_of_ranks(dist, Variation(), 1 << 20, 8)
    assert mean == pytest.approx(dist.expected_max(1 << 20), rel=1e-5)
    assert p99 == pytest.approx(dist.quantile_of_max(0.99, 1 << 20), rel=1e-6)


def test_quantile_of_repeated_samples_is_numpys_on_the_repeated_multiset():
    s = np.random.default_rng(3).standard_normal(37)
    for r in (1, 2, 5, 64):
        assert quantile_of_repeated(s, [0.5, 0.99, 0.0, 1.0], r) == pytest.approx(
            np.quantile(np.repeat(s, r), [0.5, 0.99, 0.0, 1.0]).tolist(), rel=1e-12
        )


def test_quantile_of_samples_is_numpys_to_the_last_bit():
    """Without repetition it stands in for np.quantile in the predictions (baselines unchanged)."""
    rng = np.random.default_rng(5)
    for size in (1, 2, 3, 10, 101, 1000, 4096):
        s = rng.lognormal(-3.0, 0.5, size)
        qs = [0.5, 0.99, 0.0, 1.0, 0.25, 0.75]
        assert quantile_of_repeated(s, qs) == np.quantile(s, qs).tolist()


def test_a_persistent_straggler_sets_the_pace_at_any_n():
    """Without i.i.d. variance every rank of a connected schedule runs at the slowest rank's pace."""
    for n in (256, 1 << 16):
        sc = _scenario(n, 4, 0.0, straggler=(2.0, 1))
        comp = sc.decent_dp_compute
        for name in ("ring", "one-peer-exp", "alternating-exp-ring"):
            pred = topology_model(name, sc.shape).predict(sc)
            assert pred.mean_s >= 2.0 * comp.compute_s + comp.optimizer_s - 1e-9, (n, name)


def test_the_advisor_answers_at_2_24_with_every_topology_it_can_reduce():
    res = CliRunner().invoke(app, ["advise", "--gpus", str(1 << 24), "--global-batch", str(1 << 24), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    rows = {p["topology"]: p for p in data["predictions"]}
    reducible = [name for name in topology_names() if name not in unreduced_names()]
    assert all(rows[name]["applicable"] for name in reducible), rows
    assert all(math.isfinite(rows[name]["iteration_s"]["mean"]) for name in reducible)
    assert all("no symmetry known" in rows[name]["reason"] for name in unreduced_names())


@pytest.fixture
def built_schedules(monkeypatch) -> list[int]:
    """The sizes n of every schedule validated (i.e. built) while the test runs, with the reduced systems'
    cache of small schedules cleared so they are built afresh."""
    import runtime_model.topology.schedule as schedule_mod
    from runtime_model.prediction.reduced_system import _built

    _built.cache_clear()  # small schedules are kept across calls: build them afresh here
    built = []
    original = schedule_mod.Schedule.validate
    monkeypatch.setattr(
        schedule_mod.Schedule, "validate", lambda self: built.append(self.n) or original(self)
    )
    return built


def test_above_the_full_simulation_limit_no_full_schedule_is_built(built_schedules):
    built = built_schedules
    for name in topology_names():
        if name not in unreduced_names():
            topology_model(name, ClusterShape(1 << 20, 8))
    assert built and max(built) <= FULL_MAX_N


# ---------------------------------------------------------------- base-2 with a large odd part


def _partition_the_rounds_respect(schedule):
    """The coarsest partition of ranks in which two ranks of a class have, in every round, partners of one
    class (and both or neither alone): what any exact smaller system (a quotient) would have to merge."""
    n = schedule.n
    partners = []
    for rnd in schedule.rounds:
        order, starts = rnd.sorted_groups
        sizes = np.diff(starts, append=n)
        partner = np.arange(n)
        two = starts[sizes == 2]
        partner[order[two]], partner[order[two + 1]] = order[two + 1], order[two]
        partners.append(partner)
    cls = np.zeros(n, dtype=np.int64)
    while True:
        key = np.stack([cls] + [cls[p] for p in partners] + [p == np.arange(n) for p in partners], axis=1)
        new = np.unique(key, axis=0, return_inverse=True)[1].reshape(-1)
        if new.max() == cls.max():
            return int(cls.max()) + 1
        cls = new


@pytest.mark.parametrize("n, k", [(4100, 4), (4097, 1), (12012, 4)])
def test_base2_has_no_quotient_smaller_than_its_odd_part(n, k):
    """Why base-2 with a large odd part q is simulated with whole q-blocks: no two positions of a block play
    the same part in every round, so the partition the rounds respect has q classes (blocks alike)."""
    q = n >> ((n & -n).bit_length() - 1)
    assert _partition_the_rounds_respect(build_schedule("base-2", ClusterShape(n, k))) == q


@pytest.mark.parametrize("n, k", [(4097, 1), (4101, 3), (16400, 2)])
def test_base2_above_4096_with_a_large_odd_part_is_the_per_rank_recurrence(n, k):
    """Odd n (one simple Base-2 graph: the system itself) and 2^a q with q > 1,024 (whole q-blocks kept)."""
    sc = _scenario(n, k, 0.0)
    model = topology_model("base-2", sc.shape)
    assert model.schedule is None and model.reduction.n <= n
    full = gossip_prediction(sc, build_schedule("base-2", sc.shape))
    got = model.predict(sc)
    for field in ("mean_s", "p50_s", "p99_s", "compute_wait_s", "comm_s"):
        assert getattr(got, field) == pytest.approx(getattr(full, field), rel=1e-12), field
    assert (
        model.consensus().exact_rounds == consensus_metrics(build_schedule("base-2", sc.shape)).exact_rounds
    )


def test_base2_beyond_the_largest_exact_system_says_why():
    with pytest.raises(TopologyNotApplicable, match="no smaller system reproduces it|only all 70001 ranks"):
        topology_model("base-2", ClusterShape(70001, 1))
    with pytest.raises(TopologyNotApplicable, match="odd part 65535"):
        topology_model("base-2", ClusterShape(16 * 65535, 8))


# ---------------------------------------------------------------- rtmodel topologies at any n


def _mixing_matrices(schedule, rounds):
    """Each round's n x n mixing matrix from first principles, not from runtime_model's own operators: a
    rank keeps its group's weight w of itself and takes (1 - w) / (size - 1) from every other member
    (groups as the row lists them); a static graph averages each rank with ranks i + d, weight each."""
    n = schedule.n
    if schedule.static_graph is not None:
        g = schedule.static_graph
        w = np.eye(n) * g.weight
        for d in g.peer_offsets:
            w[np.arange(n), (np.arange(n) + d) % n] += g.weight
        return [w]
    mats = []
    for rnd, groups in zip(schedule.rounds, rounds, strict=True):
        w = np.zeros((n, n))
        for group in groups:
            self_w = rnd.weights[rnd.labels[group[0]]]
            other = (1 - self_w) / (len(group) - 1) if len(group) > 1 else 0.0
            w[np.ix_(group, group)] = other
            w[group, group] = self_w if len(group) > 1 else 1.0
        mats.append(w)
    return mats


def _consensus_by_definition(schedule, rounds):
    """(exact_rounds, rho, worst_round_contraction) as runtime_model/convergence/consensus.py defines them, with dense
    matrices: the first t <= 3 periods at which the product of rounds is J, ||period product - J||_2, and
    max over rounds of ||W_r - J||_2."""
    mats = _mixing_matrices(schedule, rounds)
    n = schedule.n
    j = np.full((n, n), 1.0 / n)
    norm = lambda m: float(np.linalg.norm(m - j, 2))  # noqa: E731
    prod, exact, period_product = np.eye(n), None, None
    for t in range(1, 3 * len(mats) + 1):
        prod = mats[(t - 1) % len(mats)] @ prod
        period_product = prod if t == len(mats) else period_product
        exact = t if exact is None and np.abs(prod - j).max() <= 1e-9 else exact
    return exact, norm(period_product), max(norm(m) for m in mats)


@pytest.mark.parametrize("n, k", [(1, 1), (6, 3), (16, 4), (64, 4), (96, 2), (768, 4), (4096, 8)])
def test_topology_rows_up_to_4096_describe_the_full_schedules(n, k):
    """Each row against the schedule it describes, not against a second copy of topology_rows: applicable
    exactly where the schedule builds (else the builder's reason); the rounds it lists partition the ranks,
    their count is the period and their sizes the group sizes; up to 96 ranks, the consensus figures are
    the definitions' values from dense matrices; above, they are in range and consistent."""
    from runtime_model.advice.report import topology_rows
    from runtime_model.topology.registry import TOPOLOGIES

    shape = ClusterShape(n, k)
    rows = topology_rows(shape, with_rounds=True)
    assert [r["topology"] for r in rows] == list(topology_names())
    assert topology_rows(shape) == [r | {"rounds": None} if r["applicable"] else r for r in rows]
    for row in rows:
        name = row["topology"]
        assert row["description"] == TOPOLOGIES[name].description
        try:
            schedule = build_schedule(name, shape)
        except TopologyNotApplicable as exc:
            assert row == {"topology": name, "description": row["description"], "applicable": False,
                           "reason": str(exc)}
            continue
        assert row["applicable"] is True
        rounds = row["rounds"]
        assert len(rounds) == row["period"] >= 1, name
        for groups in rounds:
            assert sorted(r for g in groups for r in g) == list(range(n)), name
        assert row["group_sizes"] == sorted({len(g) for groups in rounds for g in groups}), name
        assert row["runs_on_decent_dp"] is (row["reason"] is None), name
        assert row["decent_dp_builtin"] is (row["decent_dp_name"] is not None), name
        if schedule.static_graph is not None:
            assert not row["runs_on_decent_dp"] and row["group_sizes"] == [1], name
        c = row["consensus"]
        assert 0.0 <= c["rho"] <= 1.0 and 0.0 <= c["worst_round_contraction"] <= 1.0, name
        assert c["tau_over_p"] == pytest.approx(row["period"] / (1 - c["rho"] ** 2)), name
        if c["exact_rounds"] is not None and c["exact_rounds"] <= row["period"]:
            assert c["rho"] == 0.0, name
        if schedule.static_graph is None and any(len(groups) > 1 for groups in rounds):
            assert c["worst_round_contraction"] == 1.0, name  # a vector constant on each group stays
        if n == 1:
            assert (c["exact_rounds"], c["rho"], c["worst_round_contraction"]) == (0, 0.0, 0.0), name
        elif n <= 96:
            exact, rho, worst = _consensus_by_definition(schedule, rounds)
            assert c["exact_rounds"] == exact, name
            assert c["rho"] == pytest.approx(0.0 if exact is not None and exact <= row["period"] else rho,
                                             abs=1e-9), name
            worst = worst if worst > 1e-9 else 0.0  # rounding residue is not a rate
            assert c["worst_round_contraction"] == pytest.approx(worst, abs=1e-9), name


@pytest.mark.parametrize("n, k", SHAPES)
def test_a_reduced_systems_period_group_sizes_and_note_are_the_full_schedules(n, k):
    from runtime_model.prediction.reduced_system import TopologyModel

    shape = ClusterShape(n, k)
    for name, full in _pairs(n, k):
        reduced = TopologyModel(name, shape, None, reduce(name, shape, build_schedule, 16))
        whole = TopologyModel(name, shape, full, None)
        assert reduced.period == whole.period, name
        assert reduced.group_sizes() == whole.group_sizes(), name
        assert reduced.decent_dp_note == whole.decent_dp_note, name


def test_rtmodel_topologies_answers_at_2_24_without_a_full_schedule(built_schedules):
    built = built_schedules
    res = CliRunner().invoke(
        app, ["topologies", "--gpus", str(1 << 24), "--gpus-per-node", "8", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    rows = {r["topology"]: r for r in json.loads(res.output)["topologies"]}
    assert all(r["applicable"] for name, r in rows.items() if name not in unreduced_names())
    assert all(not rows[name]["applicable"] for name in unreduced_names())
    assert rows["one-peer-exp"]["period"] == 24 and rows["complete"]["group_sizes"] == [1 << 24]
    assert rows["static-exp"]["consensus"]["rho"] == pytest.approx(23 / 25)
    assert built and max(built) <= FULL_MAX_N

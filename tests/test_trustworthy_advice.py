"""Advice a user can trust (issue 27): convergence-aware picks, factors only where their cause is, margins
on the speedup that grow with what a profile did not measure."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from calibration.synthetic import SyntheticTruth, write_synthetic_profile
from runtime_model.advice.advisor import ACCURACY, ITERATION, advise, advise_many, pick
from runtime_model.advice.confidence import (
    PROFILE,
    class_margin,
    measured_errors,
    profile_margin,
    source_class,
)
from runtime_model.convergence.consensus_cost import (
    EXACT,
    EXTRAPOLATED,
    HOPELESS,
    MEASURED,
    REFERENCE_GPUS,
    consensus_cost,
)
from runtime_model.core.scenario import Link
from runtime_model.presets import to_model as presets
from runtime_model.presets.to_model import load_library


def _scenario(n: int, **kw):
    return presets.scenario_from_choice(presets.resolve(presets.PresetRequest(n, **kw)))


def _rows(adv):
    return {r.topology: r for r in adv.rows if r.applicable}


# --- the consensus cost --------------------------------------------------------------------------------


def test_the_measured_reference_is_the_boundary_of_measured():
    """One-peer-exp at 64 GPUs is the paper's measured setting: transient ratio exactly 1, 'measured'."""
    row = _rows(advise(_scenario(REFERENCE_GPUS, cluster="dgx-h100")))["one-peer-exp"]
    assert row.convergence.transient_ratio == pytest.approx(1.0)
    assert row.convergence.kind == MEASURED


def test_classes_follow_the_theory_at_scale():
    rows = _rows(advise(_scenario(1024, cluster="dgx-h100")))
    assert rows["complete"].convergence.kind == EXACT
    assert rows["ring"].convergence.kind == HOPELESS  # tau/p ~ 53,000 at 1,024
    assert rows["one-peer-exp"].convergence.kind == EXTRAPOLATED  # log2(1024) = 10 rounds, 16x the GPUs
    # the transient ratio grows as n^2 (tau/p)^2 (fixed global batch: module doc)
    c = rows["one-peer-exp"].consensus
    assert rows["one-peer-exp"].convergence.transient_ratio == pytest.approx(
        (1024 / 64) ** 2 * (c.tau_over_p / 6) ** 2
    )


def test_a_schedule_that_never_averages_is_hopeless():
    from runtime_model.convergence.consensus import ConsensusMetrics

    never = ConsensusMetrics(None, 1.0, 1.0, 0.0, math.inf, "x", 1.0, math.inf)
    assert consensus_cost(8, never).kind == HOPELESS


# --- picks ------------------------------------------------------------------------------------------------


def test_ties_inside_the_margin_go_to_the_better_consensus_not_to_003_ms():
    """The issue's case: at 1,024 GPUs on dgx-h100 the ring is 0.05 ms faster than one-peer-exp and
    complete, and its models barely agree: it must not be the pick."""
    adv = advise(_scenario(1024, cluster="dgx-h100"), margin=0.2)
    rows = _rows(adv)
    fastest = min(rows.values(), key=lambda r: r.prediction.mean_s)
    assert fastest.topology == "ring"
    assert adv.recommendation.topology == "complete"  # exact averaging, within the margin
    assert "ring" in adv.recommendation.equivalent


def test_outside_the_margin_the_faster_wins_whatever_its_consensus():
    adv = advise(_scenario(1024, cluster="dgx-h100"), margin=0.0)
    assert pick(adv.rows, 0.0, ITERATION).topology == "ring"


def test_accuracy_objective_never_picks_hopeless_and_says_what_it_ranked():
    adv = advise(_scenario(1024, cluster="dgx-h100"), margin=0.0, objective=ACCURACY)
    assert _rows(adv)[adv.recommendation.topology].convergence.kind != HOPELESS
    assert "--objective accuracy" in adv.recommendation.verdict
    adv = advise(_scenario(1024, cluster="dgx-h100"), margin=0.0)
    assert "--objective iteration" in adv.recommendation.verdict


def _clusters():
    return sorted(load_library(()).clusters)


@pytest.mark.slow
@pytest.mark.parametrize("cluster", _clusters())
def test_no_hopeless_pick_without_a_warning_on_any_cluster(cluster):
    """n = 64 .. 16,384 on every cluster preset, both objectives."""
    scenarios = [_scenario(n, cluster=cluster) for n in (64, 256, 1024, 4096, 16384)]
    for objective in (ITERATION, ACCURACY):
        for adv in advise_many(
            scenarios, margin=class_margin(source_class(scenarios[0])), objective=objective
        ):
            rec = adv.recommendation
            chosen = rec.candidate or rec.topology
            if chosen == "allreduce":
                continue
            kind = _rows(adv)[chosen].convergence.kind
            if kind == HOPELESS:
                assert objective == ITERATION and "WARNING" in rec.verdict, (
                    cluster,
                    adv.scenario.shape,
                    rec.verdict,
                )


# --- factors ------------------------------------------------------------------------------------------------


def test_no_variance_credited_without_compute_variation():
    """The issue's case: tcp-25g, --compute-cv 0: every topology's variance part is exactly 0, and AER's
    uneven exchanges are named as their own effect."""
    sc = _scenario(64, network="tcp-25g", compute_cv=0.0)
    adv = advise(sc)
    for r in _rows(adv).values():
        f = r.prediction.factors
        assert f.variance_s == 0.0, r.topology
        assert f.total_s == pytest.approx(adv.allreduce.mean_s - r.prediction.mean_s, abs=1e-9)
    aer = _rows(adv)["alternating-exp-ring"].prediction.factors
    assert aer.uneven_s > 0
    assert "variance" not in adv.recommendation.verdict
    assert "uneven exchanges" in adv.recommendation.verdict


def test_variance_is_credited_where_compute_varies():
    adv = advise(_scenario(64, network="tcp-25g", compute_cv=0.2))
    assert _rows(adv)["complete"].prediction.factors.variance_s > 0


def test_one_node_has_no_heterogeneous_links():
    adv = advise(_scenario(8, gpus_per_node=8, gpu="H100", network="tcp-25g", compute_cv=0.0), margin=0.0)
    for r in _rows(adv).values():
        names = [name for name, _ in r.prediction.factors.named_s()]
        assert "heterogeneous links" not in names and "smaller exchanges" in names
    assert "heterogeneous links" not in adv.recommendation.verdict


def test_no_overlap_credited_when_there_is_nothing_to_overlap():
    """Links so fast that nothing is communicated for long, one compute for both executions: the overlap
    switch changes no world, so it is credited nothing."""
    sc = _scenario(16, compute_ms=30.0, optimizer_ms=2.0, compute_cv=0.0)
    instant = Link(latency_s=0.0, bandwidth_Bps=1e30)
    sc = replace(sc, network=replace(sc.network, intra=instant, inter=instant, group_costs={}))
    for r in _rows(advise(sc)).values():
        assert r.prediction.factors.overlap_s == pytest.approx(0.0, abs=1e-6), r.topology


# --- margins ------------------------------------------------------------------------------------------------


def test_the_margin_is_on_the_speedup():
    sc = _scenario(64, network="tcp-25g")
    adv = advise(sc, margin=class_margin(source_class(sc)))
    assert "on the speedup" in adv.recommendation.verdict


def test_profile_margins_grow_with_what_was_not_measured():
    base, _ = profile_margin(4, 4, {"intra": (True, 0.0), "inter": (True, 0.0)})
    assert base == pytest.approx(measured_errors()[PROFILE].speedup_mean_abs_error)
    one_node, parts = profile_margin(64, 8, {"intra": (True, 0.0), "inter": (False, 0.0)})
    assert one_node > base and one_node > measured_errors()[PROFILE].mean_abs_error
    assert any("preset" in p.what for p in parts) and any("extrapolated" in p.what for p in parts)
    loose, _ = profile_margin(4, 4, {"intra": (True, 0.0), "inter": (True, 0.437)})
    assert loose > 0.437


def test_a_one_node_profile_advising_64_gpus_states_more_than_the_calibrated_margin(tmp_path):
    from calibration.profiled import scenario_from_profile

    path = write_synthetic_profile(tmp_path / "one-node.json", SyntheticTruth(nodes=1, ranks_per_node=4))
    fallback = presets.network_preset(*presets.link_names(None, None))
    ps = scenario_from_profile(path, 64, 4, fallback_network=fallback)
    margin = ps.margin()
    assert margin.equivalence > measured_errors()[PROFILE].mean_abs_error
    assert margin.interval > measured_errors()[PROFILE].speedup_max_abs_error
    assert "inter-node link from a preset" in margin.why and "extrapolated from 4 to 64 GPUs" in margin.why


def test_a_validation_of_ranks_sharing_a_gpu_states_what_such_profiles_missed_by_on_gpu_hosts():
    """validate picks with the measured error of profiles like its own: ranks sharing one GPU (their
    intra-node link a copy through the host, kept as measured) erred far more on GPU hosts than profiles
    on the emulated cluster, and the verdict's interval says so; other profiles keep the emulated figure."""
    from pathlib import Path

    from calibration.profile_view import load_profile
    from rtmodel_validation.plan import choose_topology, run_shape, validation_inputs
    from runtime_model.advice.confidence import SHARED_GPU_PROFILE

    root = Path(__file__).parents[1]
    runs = root / "benchmarks/results/gpu-accuracy/h200-2026-11-28/runs"
    scenario, margin = validation_inputs(load_profile(runs / "profile-4r-3200.json"), run_shape(4, 4))
    shared = measured_errors()[SHARED_GPU_PROFILE]
    assert margin.interval == pytest.approx(shared.speedup_max_abs_error)
    assert margin.equivalence == pytest.approx(shared.speedup_mean_abs_error)
    assert "ranks sharing a GPU" in margin.why
    _, _, advisor, _ = choose_topology(None, True, scenario, margin)
    assert f"within the {margin.equivalence:.1%} margin" in advisor.verdict
    _, cpu = validation_inputs(load_profile(root / "tests/data/real_profile_2x1.json"), run_shape(2, 1))
    own = measured_errors()[PROFILE].speedup_max_abs_error
    assert f"calibrated profile at its measured shape ±{own:.1%}" in cpu.why and "sharing" not in cpu.why


# --- validate's run-to-run spread ---------------------------------------------------------------------------


def _comparison(name: str, per_rank_times_s: list[list[float]]):
    from types import SimpleNamespace

    from rtmodel_validation.analysis import compare, measure

    m = measure(per_rank_times_s)
    pred = SimpleNamespace(p50_s=m.p50_s, mean_s=m.mean_s, p99_s=m.max_s)
    return compare(name, pred, m)


def test_batch_means_give_the_standard_error_of_a_runs_mean():
    from rtmodel_validation.analysis import BATCHES, batch_means_se

    steady = [[0.1] * 20, [0.1] * 20]
    assert batch_means_se(steady) == 0.0
    drifting = [[0.1 + 0.01 * (i // 5) for i in range(20)]] * 2  # four blocks: 0.10, 0.11, 0.12, 0.13
    block_means = [0.10, 0.11, 0.12, 0.13]
    mean = sum(block_means) / BATCHES
    sd = (sum((b - mean) ** 2 for b in block_means) / (BATCHES - 1)) ** 0.5
    assert batch_means_se(drifting) == pytest.approx(sd / BATCHES**0.5)
    assert batch_means_se([[0.1, 0.2]]) == 0.0  # too few iterations for a spread


def test_a_single_noisy_run_does_not_settle_a_verdict_near_the_margin():
    from rtmodel_validation.analysis import verdict

    ar = _comparison("allreduce", [[1.0, 1.3, 0.8, 1.2, 0.9, 1.1, 0.7, 1.3] * 2] * 2)
    noisy = _comparison("ring", [[0.95, 1.25, 0.75, 1.15, 0.85, 1.05, 0.65, 1.25] * 2] * 2)
    v = verdict(ar, noisy, margin=0.05)
    assert v.measured_speedup_rel_se > 0 and not v.settled
    calm = _comparison("ring", [[0.5] * 16] * 2)
    v = verdict(_comparison("allreduce", [[1.0] * 16] * 2), calm, margin=0.05)
    assert v.measured_speedup_rel_se == 0.0 and v.settled


def test_validate_recommended_runs_the_too_close_candidate(monkeypatch):
    """Too close to call keeps All-Reduce and names the topology to validate: validate runs that one."""
    from types import SimpleNamespace as NS

    import runtime_model.advice.advisor
    from rtmodel_validation.plan import choose_topology
    from tests.helpers import scenario

    rows = [NS(topology=t, applicable=True, prediction=NS(mean_s=m)) for t, m in (("ring", 0.9), ("one-peer-exp", 1.0))]
    rec = NS(topology="allreduce", candidate="one-peer-exp", too_close_to_call=True, verdict="Too close", speedup=1.0)
    monkeypatch.setattr(runtime_model.advice.advisor, "advise", lambda sc, **kw: NS(rows=rows, recommendation=rec))
    name, _, _, notes = choose_topology(None, True, scenario(n=4, k=2))
    assert name == "one-peer-exp" and "too close to call" in notes[0]


def test_under_the_accuracy_objective_nothing_of_unknown_time_is_marked_beside_the_pick():
    """Issue 50: under --objective accuracy a hopeless or extrapolated row was '≈ best', and the verdict's
    'Equivalent per iteration' listed rows whose time to the loss is not known beside a pick of known
    time. Marks and equivalents now come from the rows the objective ranks."""
    from runtime_model.convergence.consensus_cost import EXACT, MEASURED

    adv = advise(_scenario(256, cluster="a100-eth25"), objective=ACCURACY, margin=0.157)
    known = {"allreduce"} | {
        name for name, r in _rows(adv).items() if r.runnable and r.convergence.kind in (EXACT, MEASURED)
    }
    assert known != {"allreduce"}  # complete is exact: the pool the objective ranks is not empty
    assert set(adv.standing()) <= known
    assert set(adv.recommendation.equivalent) <= known
    fastest = min(r.prediction.mean_s for r in adv.rows if r.applicable and r.runnable)
    assert fastest < min(_rows(adv)[n].prediction.mean_s for n in known - {"allreduce"})  # an unknown one is faster
    by_iteration = advise(_scenario(256, cluster="a100-eth25"), objective=ITERATION, margin=0.157)
    assert any(name not in known for name in by_iteration.standing())  # time per iteration marks them all

"""rtmodel validate: real DDP vs Decent-DP runs on CPU (gloo), error paths, results file and report.

The real runs (marked `cluster`) take a profile with the profiler first, because the validation only
accepts a profile of the run's own shape; they use a small synthetic model (sleeping compute) so the
whole file stays well under two minutes on two cores.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from rtmodel_cli.commands.validate import register
from rtmodel_cli.failing import OneLineUsageErrors, guard_app
from rtmodel_validation.analysis import compare, measure, ordering, verdict
from rtmodel_validation.results import read_records, summarise_results
from runtime_model.prediction.iteration import IterationPrediction
from tests.host_device import expected_device_and_backend

SMALL_MODEL = {"param_mb": 2, "layers": 4, "forward_ms": 4, "backward_ms": 8, "jitter": "normal", "jitter_cv": 0.1}


def _pred(p50_s: float, mean_s: float, p99_s: float) -> IterationPrediction:
    """A prediction with only the times a comparison reads."""
    return IterationPrediction("test", mean_s, p50_s, p99_s, 0.0, 0.0, 0.0, 0.0)


def _app() -> typer.Typer:
    app = typer.Typer(cls=OneLineUsageErrors)  # as rtmodel's: a bad choice (--format xml) is one line too

    @app.callback()
    def main() -> None:  # a group, so the command is invoked as `validate ...`
        pass

    register(app)
    return guard_app(app)


def _invoke(args: list[str]):
    return CliRunner().invoke(_app(), ["validate", *args])


def _one_error_line(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture
def synthetic_profiles(tmp_path):
    """Schema-v1 profiles with known parameters (no torch needed): 1 node x 2 and 2 nodes x 2."""
    from calibration.synthetic import write_synthetic_profile

    two = write_synthetic_profile(tmp_path / "p2.json", nodes=1, ranks_per_node=2, extra_workload=SMALL_MODEL)
    four = write_synthetic_profile(tmp_path / "p4.json", nodes=2, ranks_per_node=2, extra_workload=SMALL_MODEL)
    return two, four


# ----------------------------------------------------------------------------- error paths (no ranks start)


def test_unknown_topology_is_one_line(synthetic_profiles, tmp_path):
    res = _invoke(["--profile", str(synthetic_profiles[0]), "--topology", "torus-9", "--results", str(tmp_path / "r")])
    assert res.exit_code != 0
    line = _one_error_line(res)
    assert "unknown topology 'torus-9'" in line and "ring" in line
    assert not (tmp_path / "r").exists()


def test_topology_inapplicable_for_shape_gives_reason(synthetic_profiles):
    res = _invoke(["--profile", str(synthetic_profiles[0]), "--topology", "alternating-exp-ring"])
    assert res.exit_code != 0
    line = _one_error_line(res)
    assert "cannot run on 2 ranks" in line and "number of nodes to be a power of 2" in line


def test_static_exp_cannot_run_on_decentdp(synthetic_profiles):
    res = _invoke(["--profile", str(synthetic_profiles[1]), "--topology", "static-exp"])
    assert res.exit_code != 0
    assert "cannot run on Decent-DP" in _one_error_line(res)


def test_profile_shape_mismatch_names_both_shapes(synthetic_profiles):
    res = _invoke(["--profile", str(synthetic_profiles[0]), "--topology", "ring", "--nproc-per-node", "4",
                   "--ranks-per-node", "2"])
    assert res.exit_code != 0
    line = _one_error_line(res)
    assert "2 ranks (1 node(s) x 2)" in line and "4 ranks (2 node(s) x 2)" in line


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--iterations", "0"], "--iterations must be an integer from 1 to 100,000"),
        (["--warmup", "1"], "--warmup must be an integer from 2 to 100,000"),
        (["--recommended"], "not both"),
        (["--format", "xml"], "'xml' is not one of 'table', 'json'"),
        (["--model-arg", "nope=1"], "has no argument 'nope'"),
    ],
)
def test_bad_options_are_one_line(synthetic_profiles, args, needle):
    res = _invoke(["--profile", str(synthetic_profiles[0]), "--topology", "ring", *args])
    assert res.exit_code != 0
    assert needle in _one_error_line(res)


def test_missing_results_file_for_report(tmp_path):
    res = _invoke(["--report", "--results", str(tmp_path / "none.jsonl")])
    assert res.exit_code != 0
    assert "no results file" in _one_error_line(res)


# ----------------------------------------------------------------------------- pure analysis


def test_measure_pools_ranks_and_reports_spread():
    m = measure([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
    assert m.p50_s == pytest.approx(2.5)  # median of the 6 pooled samples
    assert m.per_rank_median_s == (2.0, 4.0)
    assert m.rank_spread == pytest.approx(2.0)
    assert m.samples == 6 and m.min_s == 1.0 and m.max_s == 6.0
    c = compare("ring", _pred(p50_s=3.0, mean_s=3.1, p99_s=4.0), m)
    assert m.mean_s == pytest.approx(3.0)
    assert c.error == pytest.approx((3.1 - 3.0) / 3.0)  # judged on the mean (throughput)


def test_verdict_categories_and_margin():
    assert ordering(1.2) == "topology faster"
    assert ordering(1 / 1.2) == "allreduce faster"
    assert ordering(1.04) == "too close" and ordering(0.97) == "too close"
    ar = compare("allreduce", _pred(p50_s=2.0, mean_s=2.0, p99_s=2.0), measure([[2.2], [2.2]]))
    topo = compare("ring", _pred(p50_s=1.0, mean_s=1.0, p99_s=1.0), measure([[2.1], [2.1]]))
    v = verdict(ar, topo)
    assert v.predicted == "topology faster" and v.measured == "too close" and not v.held
    assert v.measured_speedup == pytest.approx(2.2 / 2.1)


def _record(topology: str, world_size: int, ranks_per_node: int, **runs) -> dict:
    """A whole validation record (the committed example's, notebooks/data), with its topology, shape and
    the given runs' entries changed: `allreduce={"error": 0.1}` updates that comparison."""
    from pathlib import Path

    example = Path(__file__).parent.parent / "notebooks" / "data" / "example_validations.jsonl"
    rec = json.loads(example.read_text().splitlines()[0])
    rec["topology"] = topology
    rec["shape"] = {"world_size": world_size, "ranks_per_node": ranks_per_node, "nodes": world_size // ranks_per_node}
    for key, change in runs.items():
        rec[key] = {**rec[key], **change}
    return rec


def test_summary_over_records(tmp_path):
    path = tmp_path / "r.jsonl"
    recs = [
        _record("ring", 4, 2, allreduce={"error": 0.1}, decentralized={"error": -0.3}, verdict={"held": True}),
        _record("base-2", 2, 2, allreduce={"error": -0.2}, decentralized={"error": 0.05}, verdict={"held": False}),
    ]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\nnot json\n")
    s = summarise_results(path)
    assert s.records == 2 and s.skipped_lines == 1 and s.verdicts_held == 1
    assert s.overall.n == 4
    assert s.overall.mean_abs_error == pytest.approx((0.1 + 0.3 + 0.2 + 0.05) / 4)
    assert s.overall.max_abs_error == pytest.approx(0.3)
    assert s.by_run["allreduce"].mean_abs_error == pytest.approx(0.15)
    assert s.by_run["ring"].n == 1 and s.by_run["base-2"].max_abs_error == pytest.approx(0.05)
    assert s.shapes == ["2 ranks on 1 node(s)", "4 ranks on 2 node(s)"]


def test_a_record_that_does_not_read_is_refused_by_its_line(tmp_path):
    """The readers read records typed: a record without a field is named by its line, never skipped
    (a summary or a plot silently missing a run misleads)."""
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.results import read_parity_points

    path = tmp_path / "r.jsonl"
    broken = _record("ring", 4, 2)
    del broken["ranks"]
    path.write_text(json.dumps(_record("ring", 4, 2)) + "\n" + json.dumps(broken) + "\n")
    for read in (summarise_results, read_parity_points):
        with pytest.raises(ValidationError, match=r"r\.jsonl:2: the validation record lacks ranks"):
            read(path)


def test_parity_points_from_records_and_flat_lines(tmp_path):
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.results import ParityPoint, read_parity_points

    path = tmp_path / "r.jsonl"
    rec = _record("ring", 4, 2)
    rec["allreduce"] = {**rec["allreduce"], "predicted_mean_s": 0.02, "measured": {**rec["allreduce"]["measured"], "mean_s": 0.025}}
    rec["decentralized"] = {**rec["decentralized"], "name": "ring", "predicted_mean_s": 0.01,
                            "measured": {**rec["decentralized"]["measured"], "mean_s": 0.012}}
    flat = {"method": "ring", "predicted_mean_s": 0.05, "measured_mean_s": 0.04, "source": "synthetic"}
    path.write_text("# comment\n\n" + json.dumps(rec) + "\n" + json.dumps(flat) + "\n")
    points = read_parity_points(path)
    assert points[0] == ParityPoint("4 ranks / 2 node(s)", "allreduce", pytest.approx(20.0), pytest.approx(25.0))
    assert points[1].method == "ring" and points[1].measured_ms == pytest.approx(12.0)
    assert points[2] == ParityPoint("", "ring", pytest.approx(50.0), pytest.approx(40.0), "synthetic")
    assert read_records(path) == ([rec], 1)  # the summary's reader: the flat line is not a record
    path.write_text('{"method": "ring"}\nnot json\n')
    with pytest.raises(ValidationError, match=":2: not JSON"):
        read_parity_points(path)
    path.write_text('{"method": "ring"}\n')
    with pytest.raises(ValidationError, match="no records"):
        read_parity_points(path)
    with pytest.raises(ValidationError, match="cannot read validation results: no results file"):
        read_parity_points(tmp_path / "missing.jsonl")


def test_run_shape_is_a_checked_cluster_shape():
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.plan import describe_shape, run_shape
    from runtime_model.core.scenario import ClusterShape

    assert run_shape(4, 2) == ClusterShape(4, 2) and describe_shape(run_shape(4, 2)) == "4 ranks (2 node(s) x 2)"
    with pytest.raises(ValidationError, match="at least 2 ranks"):
        run_shape(1, 1)
    with pytest.raises(ValidationError, match="--ranks-per-node 3 does not divide the world size 4"):
        run_shape(4, 3)


def test_plan_predicts_with_the_profiles_scenario(synthetic_profiles):
    from dataclasses import replace

    from calibration import scenario_from_profile
    from calibration.profile_view import load_profile
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.plan import _placeholder_network, make_plan, run_shape
    from runtime_model.prediction.iteration import allreduce_prediction, gossip_prediction

    opts = ValidateOptions(topology="ring", iterations=5, warmup=2)
    plan = make_plan(load_profile(synthetic_profiles[1]), run_shape(4, 2), opts)
    sc = scenario_from_profile(synthetic_profiles[1], 4, 2, _placeholder_network()).scenario
    sc = replace(sc, description=f"validation of {synthetic_profiles[1]}")
    assert plan.predicted.allreduce == allreduce_prediction(sc)
    assert plan.predicted.topology.mean_s == gossip_prediction(sc, _schedule(sc, "ring")).mean_s
    assert plan.rank_job(60).world_size == 4 and plan.rank_job(60).ranks_per_node == 2
    assert plan.workload.batch_per_rank == 8 and plan.profile_info.backend == "synthetic"
    assert plan.to_dict()["predicted"]["allreduce"]["mean_s"] == plan.predicted.allreduce.mean_s


def _schedule(sc, name):
    from runtime_model.topology.registry import build_schedule

    return build_schedule(name, sc.shape)


def _fake_advice(recommended: str):
    from types import SimpleNamespace as NS

    rows = [NS(topology=name, applicable=True, prediction=NS(mean_s=t))
            for name, t in (("static-exp", 0.5), ("ring", 1.0), ("one-peer-exp", 0.9))]
    rec = NS(topology=recommended, too_close_to_call=False, verdict="Keep All-Reduce: it is faster.", speedup=1.0,
             candidate=None)
    return NS(rows=rows, recommendation=rec)


@pytest.mark.parametrize("recommended, note", [("allreduce", "keeping All-Reduce"),
                                               ("static-exp", "cannot run on Decent-DP")])
def test_recommended_falls_back_to_best_runnable_topology(monkeypatch, recommended, note):
    import runtime_model.advice.advisor
    from rtmodel_validation.plan import choose_topology
    from tests.helpers import scenario

    monkeypatch.setattr(runtime_model.advice.advisor, "advise", lambda sc, **kw: _fake_advice(recommended))
    name, schedule, advisor, notes = choose_topology(None, True, scenario(n=4, k=2))
    assert name == "one-peer-exp" and schedule.name == "one-peer-exp"  # fastest one Decent-DP can run
    assert advisor.recommendation == recommended
    assert len(notes) == 1 and note in notes[0] and "one-peer-exp" in notes[0]


def test_recommended_uses_the_advisors_pick():
    from rtmodel_validation.plan import choose_topology
    from runtime_model.advice.advisor import advise
    from tests.helpers import scenario

    sc = scenario(n=8, k=2, sd=0.004)
    name, schedule, advisor, notes = choose_topology(None, True, sc)
    rec = advise(sc).recommendation.topology
    assert advisor.recommendation == rec
    assert (name == rec and not notes) or (rec == "allreduce" and notes)


# ----------------------------------------------------------------------------- Decent-DP registration


@pytest.mark.slow
def test_decentdp_registration_is_idempotent_and_group_based():
    pytest.importorskip("torch")
    pytest.importorskip("decent_dp")
    import importlib

    from decent_dp.topo import TopologyReg

    import rtmodel_decentdp as reg
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.topology.registry import build_schedule

    importlib.reload(reg)  # importing again must not raise on the registry's duplicate check
    assert reg.register_all() == ["base-2"]
    assert "base-2" in TopologyReg.registry and "static-exp" not in TopologyReg.registry
    # other libraries' rows stay with their library: Decent-DP would run them with its own exchange
    assert not {"sgp-exp", "osgp-exp", "bluefog-dynamic-exp"} & set(TopologyReg.registry)
    sched = build_schedule("base-2", ClusterShape(4, 2))
    edges = reg.schedule_edges(sched)
    assert [[e.ranks for e in rnd] for rnd in edges] == [r.groups() for r in sched.rounds]
    assert all(e.weight == 0.5 for rnd in edges for e in rnd)
    with pytest.raises(reg.DecentDPTopologyError, match="cannot run on Decent-DP"):
        reg.schedule_edges(build_schedule("base-2", ClusterShape(6, 2)))  # has 1-rank groups
    with pytest.raises(reg.DecentDPTopologyError, match="cannot run on Decent-DP"):
        reg.schedule_edges(build_schedule("static-exp", ClusterShape(4, 2)))


# ----------------------------------------------------------------------------- real runs


def _profile(tmp_path, nproc: int, k: int):
    pytest.importorskip("torch")
    pytest.importorskip("decent_dp")
    from profiler.launch import run_profile
    from profiler.options import ProfileOptions

    out = tmp_path / f"profile-{nproc}x{k}.json"
    run_profile(ProfileOptions(out, model="synthetic", model_args=SMALL_MODEL, batch_per_rank=4, quick=True,
                               nproc_per_node=nproc, ranks_per_node=k, progress=False, timeout_s=120))
    return out


def _check_result(res, n: int, iterations: int, topology: str):
    assert res.shape.gpus == n and res.topology == topology
    assert [r.rank for r in res.ranks] == list(range(n))  # every rank reported
    for run, comp in (("allreduce", res.allreduce), ("decentralized", res.decentralized)):
        times = res.times_s[run]
        assert len(times) == n and all(len(t) == iterations for t in times)
        assert all(t > 0 for rank in times for t in rank)
        pooled = np.concatenate(times)
        assert comp.measured.p50_s == pytest.approx(float(np.median(pooled)))
        assert comp.measured.samples == n * iterations
        assert comp.error == pytest.approx((comp.predicted_mean_s - comp.measured.mean_s) / comp.measured.mean_s)
        assert comp.predicted_p50_s > 0 and comp.measured.rank_spread >= 1.0
    v = res.verdict
    assert v.measured_speedup == pytest.approx(res.allreduce.measured.mean_s / res.decentralized.measured.mean_s)
    assert v.predicted_speedup == pytest.approx(res.allreduce.predicted_mean_s / res.decentralized.predicted_mean_s)
    assert v.held == (v.predicted == v.measured)
    d2c = res.distance_to_consensus
    assert len(d2c.per_rank) == n and math.isfinite(d2c.max) and d2c.max >= 0


@pytest.mark.slow
@pytest.mark.cluster
def test_validate_two_ranks_base2(tmp_path, monkeypatch):
    """2 CPU ranks on one node; base-2 is not a Decent-DP built-in, so this also runs our registration."""
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.validate import run_validation

    monkeypatch.chdir(tmp_path)
    profile = _profile(tmp_path, 2, 2)
    results = tmp_path / "runs.jsonl"
    opts = ValidateOptions(topology="base-2", iterations=6, warmup=3, results_path=results, timeout_s=180)
    res = run_validation(profile, opts)
    _check_result(res, 2, 6, "base-2")
    assert res.decent_dp_topology == "base-2" and (res.device, res.backend) == expected_device_and_backend(2)
    records, skipped = read_records(results)
    assert skipped == 0 and len(records) == 1
    rec = records[0]
    assert rec["topology"] == "base-2" and rec["shape"] == {"world_size": 2, "ranks_per_node": 2, "nodes": 1}
    assert rec["allreduce"]["error"] == pytest.approx(res.allreduce.error)
    assert rec["decentralized"]["measured"]["p50_s"] == pytest.approx(res.decentralized.measured.p50_s)
    assert "times_s" not in rec and rec["timestamp_utc"].endswith("Z")


@pytest.mark.slow
@pytest.mark.cluster
def test_validate_four_ranks_two_pretend_nodes_via_cli(tmp_path, monkeypatch):
    """4 CPU ranks as 2 pretend nodes x 2 (Decent-DP gets _local_world_size=2), through the CLI, then --report."""
    monkeypatch.chdir(tmp_path)
    profile = _profile(tmp_path, 4, 2)
    results = tmp_path / "runs.jsonl"
    res = _invoke(["--profile", str(profile), "--topology", "alternating-exp-ring", "--nproc-per-node", "4",
                   "--ranks-per-node", "2", "--iterations", "6", "--warmup", "3", "--format", "json",
                   "--results", str(results), "--timeout-s", "180"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["shape"] == {"world_size": 4, "ranks_per_node": 2, "nodes": 2}
    assert doc["decent_dp_topology"] == "alternating-exp-ring"
    assert len(doc["times_s"]["allreduce"]) == 4 and len(doc["times_s"]["decentralized"]) == 4
    for run in ("allreduce", "decentralized"):
        pooled = np.concatenate(doc["times_s"][run])
        assert doc[run]["measured"]["p50_s"] == pytest.approx(float(np.median(pooled)))
        mean = float(np.mean(pooled))
        assert doc[run]["measured"]["mean_s"] == pytest.approx(mean)
        assert doc[run]["error"] == pytest.approx((doc[run]["predicted_mean_s"] - mean) / mean)  # on the mean
    assert any("emulated" in n for n in doc["notes"])

    rep = _invoke(["--report", "--results", str(results), "--format", "json"])
    assert rep.exit_code == 0, rep.stderr
    summary = json.loads(rep.stdout)
    errors = [doc["allreduce"]["error"], doc["decentralized"]["error"]]
    assert summary["records"] == 1 and summary["overall"]["n"] == 2
    assert summary["overall"]["max_abs_error"] == pytest.approx(max(abs(e) for e in errors))
    assert summary["overall"]["mean_abs_error"] == pytest.approx(sum(abs(e) for e in errors) / 2)
    assert set(summary["by_run"]) == {"allreduce", "alternating-exp-ring"}
    table = _invoke(["--report", "--results", str(results)])
    assert table.exit_code == 0 and "alternating-exp-ring" in table.stdout

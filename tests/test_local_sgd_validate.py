"""`rtmodel validate --local-sgd-h`: local SGD (DiLoCo) run for real and set beside its prediction.

Bad options end as one line before any rank starts; the job and report keep their JSON round trip (and
load documents written before local SGD existed); the outer step really averages over ranks; a real run
on CPU ranks times whole periods and records predicted vs measured. No test asserts a timing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_validation.errors import ValidationError
from rtmodel_validation.job import RankJob, RankReport, RunWorkload
from rtmodel_validation.local_sgd import local_sgd_counts, local_sgd_options
from rtmodel_validation.options import ValidateOptions
from runtime_model.prediction.local_sgd import LocalSgd, local_sgd_prediction
from tests.spawned import end_spawned_rank

ROOT = Path(__file__).resolve().parent.parent
PROFILE_2X2 = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
OUTER_LR, OUTER_MOMENTUM = 0.7, 0.9

# ----------------------------------------------------------------------------- bad options (no rank starts)

H4 = ["--local-sgd-h", "4"]
BAD = [
    (["--local-sgd-h", "-3"], "--local-sgd-h"),
    (["--local-sgd-h", "many"], "--local-sgd-h"),
    ([*H4, "--local-sgd-overlap", "-1"], "--local-sgd-overlap"),
    ([*H4, "--local-sgd-fragments", "0"], "--local-sgd-fragments"),
    ([*H4, "--local-sgd-fragments", "5"], "--local-sgd-fragments"),
    ([*H4, "--local-sgd-overlap", "2", "--local-sgd-fragments", "2"], "--local-sgd-overlap"),
    ([*H4, "--local-sgd-overlap", "4"], "--local-sgd-overlap"),
    ([*H4, "--local-sgd-bits", "12"], "--local-sgd-bits"),
    ([*H4, "--local-sgd-bits", "8"], "no quantizing all-reduce"),
    ([*H4, "--local-sgd-bits", "4"], "no quantizing all-reduce"),
    ([*H4, "--local-sgd-replica", "rack"], "--local-sgd-replica"),
    (["--local-sgd-h", "0", "--local-sgd-overlap", "1"], "--local-sgd-h 0 turns local SGD off"),
    (["--local-sgd-overlap", "30"], "--local-sgd-overlap"),  # H not given is 30, as in advise and plot
]


@pytest.mark.parametrize("args, names", BAD, ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_bad_local_sgd_option_is_one_line_exit_2_before_any_rank(args, names, tmp_path, monkeypatch):
    import rtmodel_validation.validate

    def no_run(*a, **k):
        raise AssertionError("a bad option reached the run")

    monkeypatch.setattr(rtmodel_validation.validate, "run_validation", no_run)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["validate", "--profile", str(PROFILE_2X2), "--topology", "ring", *args])
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert names in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []


def test_options_checked_and_given_h_30_when_only_another_one_is_given():
    from rtmodel_cli.local_sgd_options import local_sgd_asked

    opts = local_sgd_options(8, 1, 2, 16, "gpu")
    assert opts == LocalSgd(inner_steps=8, overlap_steps=1, fragments=2, bits=16, replica="gpu")
    assert local_sgd_options(4) == LocalSgd(inner_steps=4)  # the model's defaults for what is not given
    # one meaning in every command: none asked, none run (validate's default); H=0 none; H not given 30
    assert local_sgd_asked({}, by_default=False) is None
    assert local_sgd_asked({"local_sgd_h": 0}, by_default=True) is None
    asked = local_sgd_asked({"local_sgd_overlap": 1}, by_default=False)
    assert local_sgd_options(**asked) == LocalSgd(inner_steps=30, overlap_steps=1)


@pytest.mark.parametrize(
    "iterations, warmup, h, expected",
    [
        (20, 5, 4, (8, 20)),
        (20, 5, 8, (8, 24)),
        (3, 2, 100, (100, 100)),
        (40, 4, 4, (4, 40)),
        (1, 9, 1, (9, 1)),
    ],
)
def test_counts_are_whole_periods_at_least_asked(iterations, warmup, h, expected):
    warm, timed = local_sgd_counts(iterations, warmup, h)
    assert (warm, timed) == expected
    assert warm % h == 0 and timed % h == 0 and warm >= max(warmup, h) and timed >= iterations


# ----------------------------------------------------------------------------- the plan and its prediction


def test_plan_predicts_local_sgd_on_the_same_scenario_and_hands_it_to_the_ranks():
    from calibration.profile_view import load_profile
    from calibration.profiled import scenario_from_profile
    from rtmodel_validation.plan import _placeholder_network, make_plan, run_shape
    from runtime_model.prediction.iteration import allreduce_prediction

    profile = load_profile(PROFILE_2X2)
    shape = run_shape(4, 2)
    opts = LocalSgd(inner_steps=8, overlap_steps=1, fragments=2)
    plan = make_plan(
        profile, shape, ValidateOptions(topology="ring", iterations=10, warmup=3, local_sgd=opts)
    )
    scenario = scenario_from_profile(profile, 4, 2, _placeholder_network()).scenario
    assert plan.predicted.allreduce.mean_s == pytest.approx(allreduce_prediction(scenario).mean_s)
    assert plan.predicted.local_sgd.mean_s == pytest.approx(local_sgd_prediction(scenario, opts).mean_s)
    assert (plan.local_sgd_warmup, plan.local_sgd_iterations) == local_sgd_counts(10, plan.warmup, 8)
    job = plan.rank_job(60.0)
    assert job.local_sgd == opts and plan.local_sgd == opts  # typed both sides of the rank boundary
    from rtmodel_validation.job import RankJob

    assert RankJob.from_json(json.loads(json.dumps(job.to_json()))) == job  # as the workers read it
    assert (
        make_plan(profile, shape, ValidateOptions("ring", iterations=10, warmup=3)).rank_job(60.0).local_sgd
        is None
    )
    with pytest.raises(ValidationError, match="no quantizing all-reduce"):
        make_plan(
            profile, shape, ValidateOptions("ring", iterations=10, warmup=3, local_sgd=LocalSgd(8, bits=8))
        )


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--local-sgd-h", "30"], (True, 30)),  # as advise prints it: beside the advisor's pick
        (["--local-sgd-fragments", "2"], (True, 30)),
        (["--topology", "ring", "--local-sgd-h", "4"], (False, 4)),  # a named topology stays
        (["--recommended", "--local-sgd-h", "4"], (True, 4)),
    ],
)
def test_local_sgd_alone_validates_it_beside_the_advisors_pick(args, expected, tmp_path, monkeypatch):
    """`rtmodel validate --profile PROFILE --local-sgd-h 30` runs as advise prints it: a run always sets
    local SGD beside DDP and one Decent-DP topology, and with none named it is the advisor's."""
    import rtmodel_validation.validate

    planned = []
    monkeypatch.setattr(rtmodel_validation.validate, "run_validation", lambda _p, opts: planned.append(opts))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["validate", "--profile", str(PROFILE_2X2), *args])
    assert res.exit_code == 0, res.output
    (opts,) = planned
    assert (opts.recommended, opts.local_sgd.inner_steps) == expected
    assert opts.topology == (None if expected[0] else "ring")


@pytest.mark.parametrize("args", [[], ["--local-sgd-h", "0"]])
def test_nothing_to_validate_is_still_one_line_exit_2(args, tmp_path, monkeypatch):
    """No topology and no local SGD (H=0 is none): validate still asks what to run."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["validate", "--profile", str(PROFILE_2X2), *args])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error: choose what to validate") and len(res.stderr.splitlines()) == 1


# ----------------------------------------------------------------------------- the rank boundary

JOB = RankJob(4, 2, "ring", "ring", False, RunWorkload("synthetic", {"layers": 2}, 4, 25.0), 8, 4, 60.0)
REPORT = RankReport(1, 1, "node0", "cpu", "gloo", (0.1, 0.2), (0.09, 0.08), 0.0)


@pytest.mark.parametrize(
    "value",
    [
        JOB,
        RankJob(
            **{
                **JOB.__dict__,
                "local_sgd": LocalSgd(inner_steps=4, overlap_steps=1, fragments=2, bits=16, replica="gpu"),
            }
        ),
        REPORT,
        RankReport(**{**REPORT.__dict__, "local_sgd_s": (0.05, 0.06, 0.07, 0.3)}),
    ],
    ids=["job", "job+local-sgd", "report", "report+local-sgd"],
)
def test_round_trip_is_exact(value):
    assert type(value).from_json(json.loads(json.dumps(value.to_json()))) == value


def test_documents_from_before_local_sgd_still_load():
    old_job = {k: v for k, v in JOB.to_json().items() if k != "local_sgd"}
    old_report = {k: v for k, v in REPORT.to_json().items() if k != "local_sgd_s"}
    assert RankJob.from_json(old_job).local_sgd is None
    assert RankReport.from_json(old_report).local_sgd_s == ()
    with pytest.raises(ValidationError, match="lacks warmup"):  # a field without default is still required
        RankJob.from_json({k: v for k, v in old_job.items() if k != "warmup"})


# ----------------------------------------------------------------------------- the result and its record


def _fake_reports(plan, with_local_sgd: bool):
    n, steps = plan.shape.gpus, plan.local_sgd_iterations
    return [
        RankReport(r, r % 2, f"node{r // 2}", "cpu", "gloo", (0.1,) * 8, (0.09,) * 8, 0.0,
                   tuple(0.05 + 0.01 * (i % 4) for i in range(steps)) if with_local_sgd else ())
        for r in range(n)
    ]  # fmt: skip


def test_result_record_and_readers_carry_local_sgd(tmp_path):
    from calibration.profile_view import load_profile
    from rtmodel_validation.plan import make_plan, run_shape
    from rtmodel_validation.results import append_record, read_parity_points, summarise_results
    from rtmodel_validation.validate import assemble

    profile, shape = load_profile(PROFILE_2X2), run_shape(4, 2)
    plan = make_plan(
        profile, shape, ValidateOptions("ring", iterations=8, warmup=3, local_sgd=LocalSgd(inner_steps=4))
    )
    res = assemble(plan, _fake_reports(plan, True), "2025-01-01T00:00:00Z")
    c = res.local_sgd
    assert c.name == "local-sgd H=4" and c.measured.samples == 4 * plan.local_sgd_iterations
    assert c.measured.mean_s == pytest.approx(0.065)
    assert c.predicted_mean_s == pytest.approx(plan.predicted.local_sgd.mean_s)
    assert c.error == pytest.approx((c.predicted_mean_s - 0.065) / 0.065)
    assert res.local_sgd_run.options.inner_steps == 4 and res.times_s["local_sgd"][3][0] == 0.05
    path = append_record(tmp_path / "v.jsonl", res)
    rec = json.loads(path.read_text())
    assert rec["local_sgd"]["error"] == pytest.approx(c.error) and rec["local_sgd_run"]["iterations"] == 8
    assert math.isnan(c.predicted_p50_s) and rec["local_sgd"]["predicted_p50_s"] is None  # no percentiles
    assert {p.method for p in read_parity_points(path)} == {"allreduce", "ring", "local-sgd H=4"}
    assert set(summarise_results(path).by_run) == {"allreduce", "ring", "local-sgd H=4"}
    from rtmodel_validation.results import ValidationResult, dumps

    back = ValidationResult.from_record(rec)  # the record read back, typed: it writes the same line again
    assert json.loads(dumps(back.to_record())) == rec and back.local_sgd.measured == c.measured
    assert back.local_sgd_run == res.local_sgd_run and back.local_sgd_run.options == plan.local_sgd
    assert (
        back.shape == res.shape and back.verdict == res.verdict and math.isnan(back.local_sgd.predicted_p50_s)
    )

    plain = make_plan(profile, shape, ValidateOptions("ring", iterations=8, warmup=3))
    old = assemble(plain, _fake_reports(plain, False), "2025-01-01T00:00:00Z").to_record()
    assert "local_sgd" not in old and "local_sgd_run" not in old  # the record it always was


def test_table_shows_local_sgd_beside_the_others():
    from rich.console import Console

    from calibration.profile_view import load_profile
    from rtmodel_cli.commands.validate import render_local_sgd
    from rtmodel_validation.plan import make_plan, run_shape
    from rtmodel_validation.validate import assemble

    plan = make_plan(
        load_profile(PROFILE_2X2),
        run_shape(4, 2),
        ValidateOptions("ring", iterations=8, warmup=3, local_sgd=LocalSgd(4)),
    )
    console = Console(record=True, width=200)
    render_local_sgd(assemble(plan, _fake_reports(plan, True), "t"), console)
    text = console.export_text()
    assert "local-sgd H=4" in text and "predicted" in text and "measured 65.00 ms" in text


# ----------------------------------------------------------------------------- the outer step itself


def test_outer_step_is_diloco_nesterov_on_the_pseudo_gradient(one_rank_group):
    torch = one_rank_group
    from rtmodel_harness.local_sgd import OuterSync

    params = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2))]
    sync = OuterSync(params, inner_steps=2)
    expected, buf = 0.0, 0.0
    for step in range(6):
        with torch.no_grad():
            for p in params:
                p.add_(1.0)
        sync.after_step(step)
        if step % 2 == 1:  # an outer step: pseudo-gradient = theta_outer - theta = -2 everywhere
            buf = OUTER_MOMENTUM * buf - 2.0
            expected -= OUTER_LR * (-2.0 + OUTER_MOMENTUM * buf)
            assert all(torch.allclose(p, torch.full_like(p, expected)) for p in params)
    assert expected > 6  # Nesterov's momentum overshoots the 6 plain steps


def test_fragments_are_contiguous_staggered_and_written_back(one_rank_group):
    torch = one_rank_group
    from rtmodel_harness.local_sgd import FlatParams, OuterSync, fragment_bounds, launch_step

    assert fragment_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert [launch_step(p, 8, 2) for p in range(2)] == [3, 7]  # P = 1: after H steps, DiLoCo
    assert [launch_step(p, 6, 3) for p in range(3)] == [1, 3, 5]
    params = [torch.nn.Parameter(torch.arange(3.0)), torch.nn.Parameter(torch.arange(3.0, 7.0))]
    flat = FlatParams(params)
    assert flat.read(2, 5).tolist() == [2.0, 3.0, 4.0]
    flat.write(2, 5, torch.tensor([-1.0, -2.0, -3.0]))
    assert params[0].tolist() == [0.0, 1.0, -1.0] and params[1].tolist() == [-2.0, -3.0, 5.0, 6.0]
    sync = OuterSync(params, inner_steps=4, overlap_steps=1, fragments=2, bits=16)
    assert sync.wire_dtype == torch.float16
    sync.after_step(1)  # fragment 0 launched, lands one step later
    assert [f.fragment for f in sync.in_flight] == [0]
    sync.after_step(2)
    assert sync.in_flight == []
    sync.after_step(3)
    sync.finish()
    assert sync.in_flight == []


def _two_rank_worker(rank: int, store: str, out: str):
    import torch
    import torch.distributed as dist

    from rtmodel_harness.local_sgd import OuterSync

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    params = [torch.nn.Parameter(torch.full((5,), float(rank))), torch.nn.Parameter(torch.zeros(3, 2))]
    sync = OuterSync(params, inner_steps=4)  # starts both ranks from rank 0's parameters
    for step in range(8):
        with torch.no_grad():
            for p in params:
                p.add_(rank + 1.0)  # the replicas drift apart: rank 0 by 1, rank 1 by 2 per step
        sync.after_step(step)
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    Path(f"{out}.{rank}").write_text(json.dumps(flat.tolist()))
    end_spawned_rank()


@pytest.mark.slow
def test_outer_step_averages_over_ranks_and_leaves_them_identical(tmp_path):
    """2 gloo ranks drift apart by 4 and 8 per period; after each outer step both hold the outer
    parameters stepped on the average pseudo-gradient (-6)."""
    pytest.importorskip("torch")
    import torch.multiprocessing as mp

    mp.spawn(_two_rank_worker, args=(str(tmp_path / "store"), str(tmp_path / "out")), nprocs=2)
    ranks = [json.loads((tmp_path / f"out.{r}").read_text()) for r in range(2)]
    assert ranks[0] == ranks[1]
    outer, buf = 0.0, 0.0
    for _ in range(2):
        buf = OUTER_MOMENTUM * buf - 6.0
        outer -= OUTER_LR * (-6.0 + OUTER_MOMENTUM * buf)
    assert ranks[0] == pytest.approx([outer] * 11, rel=1e-6)


# ----------------------------------------------------------------------------- a real run


@pytest.mark.slow
@pytest.mark.cluster
def test_validate_runs_local_sgd_for_whole_periods(tmp_path, monkeypatch):
    """2 CPU ranks on one node: DDP inside it every inner step (a node subgroup), two fragments with
    overlap (async all-reduce), fp16 on the wire; every rank times a whole number of periods."""
    from rtmodel_validation.results import read_records
    from rtmodel_validation.validate import run_validation
    from tests.test_validation import _profile

    monkeypatch.chdir(tmp_path)
    profile = _profile(tmp_path, 2, 2)
    results = tmp_path / "runs.jsonl"
    opts = LocalSgd(inner_steps=4, overlap_steps=1, fragments=2, bits=16)
    res = run_validation(profile, ValidateOptions(topology="ring", iterations=6, warmup=3, results_path=results,
                                                  timeout_s=180, local_sgd=opts))  # fmt: skip
    run, c = res.local_sgd_run, res.local_sgd
    assert run.iterations == 8 and run.warmup % 4 == 0 and run.warmup >= 4
    times = res.times_s["local_sgd"]
    assert len(times) == 2 and all(len(t) == 8 for t in times) and all(x > 0 for t in times for x in t)
    assert c.name == opts.name and c.measured.samples == 16 and c.predicted_mean_s > 0
    assert c.error == pytest.approx((c.predicted_mean_s - c.measured.mean_s) / c.measured.mean_s)
    assert len(res.times_s["allreduce"][0]) == 6  # DDP's and Decent-DP's runs as before
    (rec,), _ = read_records(results)
    assert rec["local_sgd"]["measured"]["mean_s"] == pytest.approx(c.measured.mean_s)


def test_the_local_sgd_flags_are_the_inputs_keys_in_order():
    """The shell's option group and the inputs' keys name the same five options, H first."""
    from dataclasses import fields

    from rtmodel_cli.local_sgd_options import LocalSgdFlags
    from rtmodel_inputs.fields import OPTION_NAMES
    from rtmodel_inputs.local_sgd import KEYS

    assert KEYS == tuple(f.name for f in fields(LocalSgdFlags))
    assert set(KEYS) <= set(OPTION_NAMES)

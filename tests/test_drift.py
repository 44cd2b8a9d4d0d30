"""validate tells the machine's drift from the model's error (issue 50): the bare step timed again at
validate time against the profile's compute, the errors with today's compute beside those as profiled,
each host's load; and a drift beyond what a fresh profile errs by says to profile again."""

import json
from dataclasses import replace

import pytest
from rich.console import Console

from calibration.profile_view import load_profile
from rtmodel_validation.drift import drift_threshold
from rtmodel_validation.job import RankReport
from rtmodel_validation.options import ValidateOptions
from rtmodel_validation.plan import make_plan, run_shape
from rtmodel_validation.results import ValidationResult, dumps
from rtmodel_validation.validate import assemble
from runtime_model.prediction.iteration import allreduce_prediction, gossip_prediction
from tests.test_local_sgd_validate import PROFILE_2X2


def _plan():
    return make_plan(
        load_profile(PROFILE_2X2), run_shape(4, 2), ValidateOptions(topology="ring", iterations=8, warmup=3)
    )


def _reports(plan, bare_factor: float | None, load: float | None = 0.5):
    bare = () if bare_factor is None else (plan.profile_compute_s * bare_factor,) * 5
    return [
        RankReport(r, r % 2, f"node{r // 2}", "cpu", "gloo", (0.1,) * 8, (0.09,) * 8, 0.0, (), bare, load)
        for r in range(plan.shape.gpus)
    ]


def test_the_compute_now_against_the_profiles_and_the_errors_with_it():
    plan = _plan()
    res = assemble(plan, _reports(plan, 1.5), "t")
    d = res.drift
    assert d.drift == pytest.approx(0.5) and d.now_compute_s == pytest.approx(
        1.5 * plan.profile_compute_s
    )
    scenario, schedule = plan.model_inputs.scenario, plan.model_inputs.schedule
    today = scenario.compute_scaled(1.5)
    assert d.allreduce_error_today == pytest.approx((allreduce_prediction(today).mean_s - 0.1) / 0.1)
    assert d.topology_error_today == pytest.approx(
        (gossip_prediction(today, schedule).mean_s - 0.09) / 0.09
    )
    assert (
        d.allreduce_error_today > res.allreduce.error
    )  # slower compute now: the model, asked again, is slower
    assert d.load_avg_1m == {"node0": 0.5, "node1": 0.5}
    assert d.beyond and 0.5 > drift_threshold()
    assert res.to_record()["drift"]["drift"] == pytest.approx(0.5)
    assert ValidationResult.from_record(json.loads(dumps(res.to_record()))).drift == d  # read back, typed


def test_an_unchanged_machine_shows_the_same_errors_and_no_warning():
    plan = _plan()
    res = assemble(plan, _reports(plan, 1.0, load=None), "t")
    assert res.drift.drift == pytest.approx(0.0) and not res.drift.beyond
    assert res.drift.allreduce_error_today == pytest.approx(res.allreduce.error, rel=1e-9)
    assert res.drift.load_avg_1m == {}


def test_reports_without_a_bare_step_write_the_record_they_always_did():
    plan = _plan()
    res = assemble(plan, _reports(plan, None), "t")
    assert res.drift is None and "drift" not in res.to_record()
    assert RankReport.from_json(_reports(plan, None)[0].to_json()) == _reports(plan, None)[0]
    report = _reports(plan, 1.2)[0]
    assert RankReport.from_json(report.to_json()) == report  # the bare times cross the rank boundary


def test_the_table_says_it_and_what_to_do_beyond_the_threshold():
    from rtmodel_cli.validation_tables import render_result

    plan = _plan()
    console = Console(width=100, record=True)
    render_result(assemble(plan, _reports(plan, 1.5), "t"), console)
    text = " ".join(console.export_text().split())
    assert "compute drift: the bare step is" in text and "(+50.0%)" in text
    assert "profile again (rtmodel profile) before judging the model" in text
    console = Console(width=100, record=True)
    render_result(assemble(plan, _reports(replace(plan), 1.02), "t"), console)
    text = " ".join(console.export_text().split())
    assert "(+2.0%)" in text and "profile again" not in text

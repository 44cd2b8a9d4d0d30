"""`--ddp-bucket-view` (scenario key `ddp_bucket_view`): DDP(gradient_as_bucket_view=True) divides each
gradient in its bucket instead of copying it in and back (reducer.cpp), so DDP's own host and memory work
shrinks and nothing else moves; the paper's comparison prices its DDP that way, as its script runs it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.presets import to_model as presets

runner = CliRunner()


def test_view_halves_the_bytes_and_the_ops_of_ddps_own_work_and_leaves_the_rest():
    copy = presets.iteration_work(presets.resolve(presets.PresetRequest(64, gpu="A100")))
    view = presets.iteration_work(
        presets.resolve(presets.PresetRequest(64, gpu="A100", ddp_bucket_view=True))
    )
    assert view.ddp_copies.device_s == pytest.approx(copy.ddp_copies.device_s / 2)
    assert view.ddp_copies.host_s == pytest.approx(copy.ddp_copies.host_s / 2)
    for part in ("forward", "backward", "optimizer", "mixing"):
        assert getattr(view, part) == getattr(copy, part)


def test_default_is_torchs_default():
    assert presets.resolve(presets.PresetRequest(8)).ddp_bucket_view is False


def _advise(*args) -> dict:
    res = runner.invoke(app, ["advise", "--gpus", "32", "--cluster", "a100-ib100", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_option_makes_all_reduce_faster_and_gossip_unchanged():
    copy, view = _advise(), _advise("--ddp-bucket-view")
    mean = {d["topology"]: d["iteration_s"]["mean"] for d in copy["predictions"] if d["iteration_s"]}
    mean_view = {d["topology"]: d["iteration_s"]["mean"] for d in view["predictions"] if d["iteration_s"]}
    assert mean_view["allreduce"] < mean["allreduce"]
    assert mean_view["alternating-exp-ring"] == mean["alternating-exp-ring"]
    assert "gradient_as_bucket_view" in view["inputs"]["compute"]["source"]
    assert view["inputs"]["preset"]["ddp_bucket_view"] is True


def test_a_scenario_file_sets_it_and_a_wrong_type_is_one_line(tmp_path):
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text("gpus = 32\ncluster = 'a100-ib100'\nddp_bucket_view = true\n")
    bad.write_text("ddp_bucket_view = 'yes'\n")
    res = runner.invoke(app, ["advise", "--scenario", str(good), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["inputs"]["preset"]["ddp_bucket_view"] is True
    res = runner.invoke(app, ["advise", "--scenario", str(bad)])
    assert res.exit_code == 2
    assert "'ddp_bucket_view' must be true or false" in res.output and "Traceback" not in res.output


def test_the_paper_comparison_prices_its_ddp_with_bucket_views():
    from rtmodel_literature import paper

    df = paper.compare()
    row = df[(df.cluster == "a100-ib100") & (df.gpus == 32) & (df.method == "allreduce")].iloc[0]
    view = presets.resolve(
        presets.PresetRequest(
            32, cluster="a100-ib100", model="transformer-base", global_batch=25_000, ddp_bucket_view=True
        )
    )
    from runtime_model.advice.advisor import advise

    assert row.predicted_ms == pytest.approx(
        advise(presets.scenario_from_choice(view)).allreduce.mean_s * 1e3
    )

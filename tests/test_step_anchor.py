"""Your measured DDP step as the anchor (issue 50): `advise --step-ms MS [--step-gpus N]` backs the
compute out of the step, reproduces it at its n, moves the prediction at other n, and says how far the
presets' own prediction there was, against their measured margin."""

import json

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from runtime_model.advice.confidence import class_margin, source_class
from runtime_model.presets import to_model as presets

runner = CliRunner()


def _scenario(gpus: int):
    return presets.scenario_from_choice(presets.resolve(presets.PresetRequest(gpus)))


def _json(*argv: str) -> dict:
    res = runner.invoke(app, ["advise", *argv, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _allreduce_s(doc: dict) -> float:
    return doc["predictions"][0]["iteration_s"]["mean"]


def test_the_step_is_reproduced_at_its_n_and_the_prediction_moves_at_another():
    at_64 = _json("--gpus", "64", "--step-ms", "100")
    assert _allreduce_s(at_64) == pytest.approx(0.100, rel=0.01)
    anchor = at_64["inputs"]["step_anchor"]
    assert anchor["step_gpus"] == 64 and anchor["reproduced_ms"] == pytest.approx(100.0, rel=1e-6)
    at_256 = _json("--gpus", "256", "--step-ms", "100", "--step-gpus", "64")
    assert at_256["inputs"]["step_anchor"]["compute_ms"] == pytest.approx(anchor["compute_ms"], rel=1e-9)
    presets_256 = _allreduce_s(_json("--gpus", "256"))
    assert _allreduce_s(at_256) != pytest.approx(0.100, rel=0.001)  # its own n: the model's prediction
    assert _allreduce_s(at_256) != pytest.approx(presets_256, rel=0.05)  # the anchored compute moved it
    assert at_256["inputs"]["assumptions"]["global_batch_from"] == "your step"


def test_the_presets_residual_is_judged_against_their_margin():
    near = _json("--gpus", "64", "--step-ms", "75")["inputs"]["step_anchor"]
    far = _json("--gpus", "64", "--step-ms", "100")["inputs"]["step_anchor"]
    assert near["presets_ms"] == far["presets_ms"] == pytest.approx(_allreduce_s(_json("--gpus", "64")) * 1e3)
    margin = class_margin(source_class(_scenario(64))).equivalence
    assert abs(near["residual"]) < margin < abs(far["residual"])
    table = " ".join(
        runner.invoke(app, ["advise", "--gpus", "64", "--step-ms", "100"], terminal_width=100).output.split()
    )
    assert "note: your DDP step 100 ms at 64 GPUs is reproduced with" in table
    assert f"beyond their ±{margin:.1%} margin, so they do not describe this cluster" in table
    assert "the compute backed out of your DDP step (--step-ms)" in table.split("┏")[0]  # the head line


def test_your_own_model_has_no_preset_compute_to_compare():
    doc = _json("--gpus", "128", "--params", "1e8", "--step-ms", "300")
    assert (
        doc["inputs"]["step_anchor"]["presets_ms"] is None
        and doc["inputs"]["step_anchor"]["residual"] is None
    )
    assert _allreduce_s(doc) == pytest.approx(0.300, rel=0.01)


def test_a_step_the_presets_links_cannot_reach_says_what_to_measure():
    res = runner.invoke(app, ["advise", "--gpus", "128", "--params", "1.3e9", "--step-ms", "450"])
    assert res.exit_code == 2
    line = res.output.strip()
    assert "\n" not in line and "shorter than the model's All-Reduce step with no compute at all" in line
    assert "--nccl-tests" in line

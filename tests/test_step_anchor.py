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


def _presets_ms(gpus: int) -> float:
    return _allreduce_s(_json("--gpus", str(gpus))) * 1e3


def test_the_step_is_reproduced_at_its_n_and_the_prediction_moves_at_another():
    step = f"{1.5 * _presets_ms(64):.1f}"  # half again the presets' DDP step: the compute must move
    at_64 = _json("--gpus", "64", "--step-ms", step)
    assert _allreduce_s(at_64) * 1e3 == pytest.approx(float(step), rel=0.01)
    anchor = at_64["inputs"]["step_anchor"]
    assert anchor["step_gpus"] == 64 and anchor["reproduced_ms"] == pytest.approx(float(step), rel=1e-6)
    at_256 = _json("--gpus", "256", "--step-ms", step, "--step-gpus", "64")
    assert at_256["inputs"]["step_anchor"]["compute_ms"] == pytest.approx(anchor["compute_ms"], rel=1e-9)
    assert _allreduce_s(at_256) * 1e3 != pytest.approx(float(step), rel=0.001)  # its own n: the model's
    assert _allreduce_s(at_256) * 1e3 != pytest.approx(_presets_ms(256), rel=0.05)  # the anchor moved it
    assert at_256["inputs"]["assumptions"]["global_batch_from"] == "your step"


def test_the_presets_residual_is_judged_against_their_margin():
    margin = class_margin(source_class(_scenario(64))).equivalence
    presets_ms = _presets_ms(64)
    near_ms, far_ms = f"{presets_ms * (1 + margin / 2):.1f}", f"{presets_ms * (1 + 3 * margin):.1f}"
    near = _json("--gpus", "64", "--step-ms", near_ms)["inputs"]["step_anchor"]
    far = _json("--gpus", "64", "--step-ms", far_ms)["inputs"]["step_anchor"]
    assert near["presets_ms"] == far["presets_ms"] == pytest.approx(presets_ms)
    assert abs(near["residual"]) < margin < abs(far["residual"])
    table = " ".join(
        runner.invoke(app, ["advise", "--gpus", "64", "--step-ms", far_ms], terminal_width=100).output.split()
    )
    assert f"note: your DDP step {float(far_ms):g} ms at 64 GPUs is reproduced with" in table
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


def test_a_step_your_measured_links_cannot_reach_names_them_not_the_presets():
    """The refusal says whose links priced the exchange: asking for nccl-tests after one was given helps no one."""
    from runtime_model.advice.step_anchor import PRESET_LINKS, anchor_compute
    from runtime_model.core.errors import InvalidCombination

    def slow(compute_ms):
        return 500.0 + compute_ms

    with pytest.raises(InvalidCombination, match="--nccl-tests FILE"):
        anchor_compute(slow, 400.0, 8, None, 0.1, links_from=PRESET_LINKS)
    with pytest.raises(InvalidCombination, match="your nccl-tests run's links are slower") as exc:
        anchor_compute(slow, 400.0, 8, None, 0.1, links_from="your nccl-tests run's")
    assert "--nccl-tests FILE" not in str(exc.value)

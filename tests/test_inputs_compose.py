"""Measured inputs compose (issue 64): every source resolves once into one AdviceInputs, and a measurement
equal to the model's own value changes nothing a user acts on.

The invariants, over combinations of sources (hypothesis): a DDP step equal to the model's own All-Reduce
prediction, and an nccl-tests log whose times are the model's own all-reduce times, each alone and both
together, keep the pick (or the candidate a too-close verdict names) and move its time by under 1 %;
a measured class's interval is never wider than the preset's it replaces, so a committed verdict stays
committed (a too-close one may commit: the measured class has earned a narrower interval);
the tuned-DDP re-answer is drawn on the same measured network as the rows (never a preset the user
replaced); the Python entry point and the command give the same answer.
"""

import json

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_inputs.answer import advise
from rtmodel_inputs.sources import resolve_inputs
from runtime_model.prediction.collectives import allreduce_s, global_allreduce_shape
from runtime_model.prediction.iteration import allreduce_prediction
from tests.nccl_tests_text import nccl_tests_output

runner = CliRunner()
SIZES = [2**p for p in range(20, 31)]  # 1 MiB .. 1 GiB, as all_reduce_perf -b 1M -e 1G -f 2 runs
QUESTIONS = [
    {"gpus": 64},
    {"gpus": 16, "gpu": "T4", "gpus_per_node": 1},
    {"gpus": 32, "cluster": "dgx-h100"},
    {"gpus": 128, "network": "tcp-25g"},
    {"gpus": 16, "network": "roce-100g", "global_batch": 100000},
]


def _models_own_log(question: dict, tmp_path) -> str:
    """An nccl-tests log across two of the question's nodes whose times are the model's own all-reduce."""
    sc = resolve_inputs(question).scenario
    k = sc.shape.gpus_per_node
    group = global_allreduce_shape(2 * k, k, sc.network.nics_per_node)
    times_us = {s: allreduce_s(group, s, sc.network) * 1e6 for s in SIZES}
    path = tmp_path / f"own-{abs(hash(json.dumps(question, sort_keys=True)))}.txt"
    path.write_text(nccl_tests_output(times_us, ranks=2 * k, hosts=2))
    return str(path)


def _pick(adv) -> tuple[str, bool, float]:
    """(the pick or the candidate a too-close verdict names, too close?, its predicted iteration in s: a
    speedup would move with the All-Reduce a tuned-DDP re-answer sets it against)."""
    rec = adv.recommendation
    name = rec.candidate if rec.too_close_to_call and rec.candidate else rec.topology
    row = next((r for r in adv.rows if r.topology == name and r.prediction is not None), None)
    return name, rec.too_close_to_call, (adv.allreduce if row is None else row.prediction).mean_s


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.parametrize("with_step, with_log", [(True, False), (False, True), (True, True)])
def test_a_measurement_equal_to_the_models_own_changes_nothing(question, with_step, with_log, tmp_path):
    plain = advise(**question)
    measured = dict(question)
    if with_step:
        measured["step_ms"] = allreduce_prediction(resolve_inputs(question).scenario).mean_s * 1e3
    if with_log:
        measured["nccl_tests"] = _models_own_log(question, tmp_path)
    answer = advise(**measured)
    topology, close, speedup = _pick(plain)
    assert _pick(answer)[0] == topology
    assert answer.verdict_margin <= plain.verdict_margin + 1e-12
    if not close:
        assert not _pick(answer)[1]
    assert _pick(answer)[2] == pytest.approx(speedup, rel=0.01)


@pytest.mark.parametrize("question", QUESTIONS[:3])
def test_the_tuned_ddp_is_drawn_on_the_measured_network(question, tmp_path):
    """The log at 1/16 of the model's bandwidth: the rows and the tuned DDP both run on it."""
    sc = resolve_inputs(question).scenario
    k = sc.shape.gpus_per_node
    group = global_allreduce_shape(2 * k, k, sc.network.nics_per_node)
    slow = sc.network.scaled(inter_bandwidth=1 / 16)
    log = tmp_path / "slow.txt"
    log.write_text(nccl_tests_output({s: allreduce_s(group, s, slow) * 1e6 for s in SIZES}, 2 * k, 2))
    inputs = resolve_inputs({**question, "nccl_tests": str(log)})
    assert inputs.tuned_ddp_scenario is not None
    assert inputs.tuned_ddp_scenario.network == inputs.scenario.network
    assert inputs.scenario.network.inter.source.startswith("nccl-tests")
    assert inputs.measured("nccl-tests")
    # only DDP's own copies differ: the gossip rows' compute is the same object's value
    assert inputs.tuned_ddp_scenario.gossip_compute == inputs.scenario.gossip_compute
    tuned_ms = allreduce_prediction(inputs.tuned_ddp_scenario).mean_s
    assert tuned_ms <= allreduce_prediction(inputs.scenario).mean_s


def test_a_step_scales_the_models_compute_and_keeps_its_structure():
    """The step's correction is one factor on forward + backward: DDP's bucket copies and Decent-DP's
    mixing keep their difference in proportion, and the tuned DDP takes the same factor."""
    base = resolve_inputs({"gpus": 64})
    step_ms = 2 * allreduce_prediction(base.scenario).mean_s * 1e3
    anchored = resolve_inputs({"gpus": 64, "step_ms": step_ms})
    assert anchored.measured("step-ms")
    assert allreduce_prediction(anchored.scenario).mean_s * 1e3 == pytest.approx(step_ms, rel=1e-6)
    factor = anchored.scenario.compute.compute_s / base.scenario.compute.compute_s
    assert factor > 1
    for measured, preset in (
        (anchored.scenario.gossip_compute, base.scenario.gossip_compute),
        (anchored.tuned_ddp_scenario.compute, base.tuned_ddp_scenario.compute),
    ):
        assert measured.compute_s == pytest.approx(preset.compute_s * factor, rel=1e-9)
        assert measured.optimizer_s == preset.optimizer_s


def test_a_profile_and_an_nccl_tests_log_combine_with_one_line_of_precedence(tmp_path):
    profile = "tests/data/synthetic_profile_2x2.json"
    question = {"gpus": 16, "gpus_per_node": 2, "profile": profile}
    sc = resolve_inputs(question).scenario
    group = global_allreduce_shape(4, 2, sc.network.nics_per_node)
    log = tmp_path / "run.txt"
    log.write_text(nccl_tests_output({s: allreduce_s(group, s, sc.network) * 1e6 for s in SIZES}, 4, 2))
    both = resolve_inputs({**question, "nccl_tests": str(log)})
    assert both.sources == ("profile", "nccl-tests")
    assert both.scenario.network.intra == sc.network.intra  # the profile's measured link inside a node
    assert both.scenario.network.inter.source.startswith("nccl-tests")
    assert "precedence:" in both.provenance["network"]


def test_the_entry_point_and_the_command_give_one_answer():
    doc = json.loads(runner.invoke(app, ["advise", "--gpus", "32", "--format", "json"]).stdout)
    assert doc["recommendation"]["topology"] == advise(gpus=32).recommendation.topology


def test_the_entry_point_names_an_unknown_input():
    from runtime_model.core.errors import UserError

    with pytest.raises(UserError, match="unknown input.*gpu_count"):
        advise(gpu_count=8)


def test_a_step_on_a_profile_equal_to_its_own_prediction_changes_nothing():
    """--step-ms beside a profile scales what it measured, by the same rule as on presets."""
    question = {"gpus": 16, "gpus_per_node": 2, "profile": "tests/data/synthetic_profile_2x2.json"}
    own_ms = allreduce_prediction(resolve_inputs(question).scenario).mean_s * 1e3
    plain, stepped = advise(**question), advise(**question, step_ms=own_ms)
    assert _pick(stepped)[:2] == _pick(plain)[:2]
    assert _pick(stepped)[2] == pytest.approx(_pick(plain)[2], rel=0.01)
    anchored = resolve_inputs({**question, "step_ms": 2 * own_ms})
    assert anchored.sources == ("profile", "step-ms")
    assert allreduce_prediction(anchored.scenario).mean_s * 1e3 == pytest.approx(2 * own_ms, rel=1e-6)
    assert "your profile alone predicted" in anchored.provenance["step anchor"]


def test_a_step_count_without_its_step_is_one_line():
    res = runner.invoke(
        app, ["advise", "--profile", "tests/data/synthetic_profile_2x2.json", "--step-gpus", "4"]
    )
    assert res.exit_code == 2 and "give the step too" in res.output and "Traceback" not in res.output


def test_an_nccl_tests_warning_is_said_once_however_many_scenarios_take_the_run(tmp_path):
    """The log's shape differs from the question's (2 x 8 under 4 GPUs per node): the answer's, the tuned
    DDP's and the step's scenarios all take the run, and its note is said once."""
    log = tmp_path / "k8s_2x8.txt"
    log.write_text(nccl_tests_output({s: 60.0 + s / 45e3 for s in SIZES}, ranks=16, hosts=2))
    res = runner.invoke(
        app, ["advise", "--gpus", "64", "--nccl-tests", str(log), "--step-ms", "120", "--step-gpus", "32"]
    )
    assert res.exit_code == 0, res.output
    notes = [line for line in res.stderr.splitlines() if line.startswith("note: --nccl-tests")]
    assert notes and len(notes) == len(set(notes))

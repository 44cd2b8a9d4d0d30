"""The validation record read typed (rtmodel_validation.record_parts): every committed record loads, and a
record read then written is the record again; byte for byte where it already has today's header."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rtmodel_validation.errors import ValidationError
from rtmodel_validation.record_parts import (
    ComputeDrift,
    ConsensusDistance,
    LocalSgdBreakdown,
    LocalSgdRun,
    RankPlace,
    RecordWorkload,
)
from rtmodel_validation.results import FlatParityLine, ValidationResult, dumps, read_results

ROOT = Path(__file__).parent.parent
HEADER_KEYS = ("schema", "kind", "version")
# fields added to Measured and Verdict after the example records were written: they read with defaults
LATER_DEFAULTS = {"mean_se_s", "measured_speedup_rel_se", "settled"}


def _record_lines() -> list[tuple[str, str]]:
    files = [
        *sorted((ROOT / "benchmarks" / "results").rglob("*.jsonl")),
        ROOT / "notebooks/data/example_validations.jsonl",
    ]
    out = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if '"rtmodel-validation' in line:
                out.append((f"{path.relative_to(ROOT)}:{n}", line))
    return out


RECORDS = _record_lines()


def _without(doc, keys) -> object:
    if isinstance(doc, dict):
        return {k: _without(v, keys) for k, v in doc.items() if k not in keys}
    return doc


def test_there_are_committed_records_of_every_part():
    text = "\n".join(line for _, line in RECORDS)
    assert len(RECORDS) > 50 and '"drift": {' in text and '"local_sgd_run": {' in text


@pytest.mark.parametrize(("where", "line"), RECORDS, ids=[w for w, _ in RECORDS])
def test_a_committed_record_reads_typed_and_writes_itself_again(where, line):
    rec = json.loads(line)
    res = ValidationResult.from_record(rec)
    assert isinstance(res.workload, RecordWorkload) and isinstance(
        res.distance_to_consensus, ConsensusDistance
    )
    assert [r.rank for r in res.ranks] == list(range(res.shape.gpus)) and isinstance(res.ranks[0], RankPlace)
    assert res.drift is None or isinstance(res.drift, ComputeDrift)
    assert res.local_sgd_run is None or isinstance(res.local_sgd_run.predicted, LocalSgdBreakdown)
    written = dumps(res.to_record())
    if "schema" in rec:  # today's header: the very line
        assert written == line
    again = json.loads(written)
    assert _without(again, HEADER_KEYS + tuple(LATER_DEFAULTS)) == _without(
        rec, HEADER_KEYS + tuple(LATER_DEFAULTS)
    )
    assert ValidationResult.from_record(again).to_record() == res.to_record()  # and stays so


def test_a_record_from_before_the_recipe_keeps_its_workload_as_it_was():
    old = {"model": "synthetic", "model_args": {"param_mb": 8.0}, "batch_per_rank": 8, "bucket_cap_mb": 25.0}
    w = RecordWorkload.from_record(old)
    assert w.precision is None and w.optimizer is None and w.to_record() == old
    new = {**old, "precision": "bf16", "optimizer": "adamw"}
    assert RecordWorkload.from_record(new).to_record() == new


def test_local_sgd_options_written_before_an_option_existed_stay_without_it():
    from runtime_model.prediction.local_sgd import LocalSgd

    part = {"period_s": 0.4, "inner_step_s": 0.09, "wait_s": 0.01, "outer_comm_s": 0.05,
            "exposed_comm_s": 0.03, "outer_step_s": 0.002, "replicas": 2}  # fmt: skip
    doc = {"options": {"inner_steps": 4, "overlap_steps": 0, "fragments": 1, "bits": None, "replica": "node"},
           "warmup": 4, "iterations": 8, "predicted": part}  # fmt: skip
    run = LocalSgdRun.from_record(doc)
    assert run.options == LocalSgd(inner_steps=4) and run.to_record() == doc
    fresh = LocalSgdRun(LocalSgd(inner_steps=4), 4, 8, LocalSgdBreakdown(**part))
    assert fresh == run and set(fresh.to_record()["options"]) > set(doc["options"])  # a new run writes all
    with pytest.raises(ValidationError, match="local_sgd_run's options"):
        LocalSgdRun.from_record({**doc, "options": {"inner_steps": 0}})


def test_nulls_read_as_nan_and_are_written_as_null():
    d = ConsensusDistance.from_record({"max": None, "mean": 0.5, "per_rank": [None, 0.5]})
    assert math.isnan(d.max) and math.isnan(d.per_rank[0])
    assert json.loads(dumps(d.to_record())) == {"max": None, "mean": 0.5, "per_rank": [None, 0.5]}


@pytest.mark.parametrize(
    ("part", "doc", "message"),
    [
        (RankPlace, {"rank": 0, "host": "a"}, "lacks local_rank"),
        (ConsensusDistance, {"max": "far", "mean": 0.0, "per_rank": []}, "max must be a number, got 'far'"),
        (ConsensusDistance, {"max": 0.0, "mean": 0.0, "per_rank": 3}, "per_rank must be a JSON array"),
        (ComputeDrift, {"profile_compute_s": 1.0, "now_compute_s": 1.0, "drift": 0.0, "load_avg_1m": [],
                        "allreduce_error_today": 0.0, "topology_error_today": 0.0, "beyond": False},
         "load_avg_1m must be a JSON object"),
        (RecordWorkload, ["mlp"], "must be a JSON object, got list"),
    ],
)  # fmt: skip
def test_a_part_that_is_not_what_the_record_writes_is_one_line(part, doc, message):
    with pytest.raises(ValidationError, match=message):
        part.from_record(doc)


def test_the_flat_form_is_read_typed():
    line = {
        "method": "ring",
        "predicted_mean_s": 0.05,
        "measured_mean_s": 0.04,
        "label": "16 GPUs",
        "source": "paper",
    }
    flat = FlatParityLine.from_record(line)
    assert flat == FlatParityLine("ring", pytest.approx(50.0), pytest.approx(40.0), "16 GPUs", "paper")
    assert (
        FlatParityLine.from_record(
            {"topology": "ring", "predicted_mean_s": 0.05, "measured": {"mean_s": 0.04}}
        ).method
        == "ring"
    )
    assert (
        FlatParityLine.from_record({"method": "ring", "predicted_mean_s": 0.05}) is None
    )  # no pair: not the form


def test_read_results_types_every_record_and_counts_the_other_lines(tmp_path):
    lines = [line for where, line in RECORDS if where.startswith("notebooks")]
    path = tmp_path / "r.jsonl"
    path.write_text(
        "\n".join([*lines, json.dumps({"method": "ring", "predicted_mean_s": 1, "measured_mean_s": 1})])
        + "\n"
    )
    results, skipped = read_results(path)
    assert [r.topology for r in results] == ["ring", "one-peer-exp", "alternating-exp-ring"] and skipped == 1


def test_the_plan_keeps_its_model_inputs_typed():
    from calibration.profile_view import load_profile
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.plan import PlanInputs, make_plan, run_shape

    plan = make_plan(
        load_profile(ROOT / "tests/data/synthetic_profile_2x2.json"), run_shape(4, 2), ValidateOptions("ring")
    )
    assert isinstance(plan.model_inputs, PlanInputs) and plan.model_inputs.scenario.shape == plan.shape
    c = plan.model_inputs.scenario.compute
    assert plan.profile_compute_s == c.compute_s + c.optimizer_s
    assert "model_inputs" not in plan.to_dict()

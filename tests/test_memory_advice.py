"""The advisor never recommends what does not fit, and compares against the sharded baselines (issue 66).

Invariants, not quoted figures: the option a verdict names fits on the GPU; where every row fits the
memory check changes nothing; more memory never fits fewer rows; the JSON, the table marks and the
verdict name one option; the sharded rows are there whether or not DDP fits.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtmodel_inputs import advise
from rtmodel_inputs.answer import Question, advise_from
from rtmodel_inputs.sources import resolve_inputs
from runtime_model.advice.report import advice_to_dict

SHARDED = {"fsdp", "zero2", "zero1", "hsdp"}
BIG = {"gpus": 64, "params": 7e9, "compute_ms": 2000.0, "local_sgd_h": 0}


def _entries(doc: dict) -> dict[str, dict]:
    return {e["topology"]: e for e in doc["predictions"]}


def _named_entry(adv, doc: dict) -> dict:
    """The entry of the option the verdict names: a topology's, or the All-Reduce-family baseline's."""
    named = adv.recommendation.named
    return _entries(doc)[doc["baseline"] if named == "allreduce" else named]


def _fitting(doc: dict) -> set[str]:
    return {e["topology"] for e in doc["predictions"] if e.get("memory") and e["memory"]["fits"] is not False}


def test_a_7b_model_on_40_gb_never_gets_a_row_that_does_not_fit():
    adv = advise(**BIG)
    doc = advice_to_dict(adv)
    entries = _entries(doc)
    assert SHARDED <= set(entries)
    assert entries["allreduce"]["memory"]["fits"] is False  # 7e9 x 20 bytes before one activation
    assert doc["baseline"] in SHARDED
    assert _named_entry(adv, doc)["memory"]["fits"] is not False
    assert "does not fit" in adv.recommendation.verdict
    assert (
        "fully_shard" in adv.recommendation.code_line
        or "ZeroRedundancyOptimizer" in adv.recommendation.code_line
    )
    for name, entry in entries.items():
        if entry["family"] == "gossip" and entry["applicable"]:
            assert entry["memory"]["fits"] is False, name  # gossip keeps a full replica per rank


def test_more_memory_fits_more_rows_and_the_answer_follows():
    small = advice_to_dict(advise(**BIG))
    large = advice_to_dict(advise(**{**BIG, "gpu": "A100-80GB"}))
    assert _fitting(small) <= _fitting(large)
    mid = {**BIG, "params": 5e9}
    on_40, on_80 = advice_to_dict(advise(**mid)), advice_to_dict(advise(**{**mid, "gpu": "A100-80GB"}))
    assert _fitting(on_40) < _fitting(on_80)  # ZeRO-1's full gradients fit on 80 GB only


def test_gpu_memory_gib_is_the_capacity_every_row_is_judged_against():
    doc = advice_to_dict(advise(**{**BIG, "gpu_memory_gib": 500.0}))
    assert all(e["memory"]["capacity_bytes"] == 500 * 2**30 for e in doc["predictions"] if e.get("memory"))
    assert doc["baseline"] == "allreduce"  # DDP fits in 500 GiB: the verdict is against DDP again


def test_activations_given_are_a_part_of_every_row():
    doc = advice_to_dict(advise(gpus=16, activation_gib=3.0, local_sgd_h=0))
    for entry in doc["predictions"]:
        if entry.get("memory"):
            assert entry["memory"]["parts"]["activations"] == 3 * 2**30
            assert entry["memory"]["activations_known"] is True
    assert doc["memory"]["activation_source"].endswith("(--activation-gib)")


def _answers(options: dict):
    """The answer with memory judged, and the same inputs' answer without it."""
    inputs = resolve_inputs(options)
    question = Question()
    return advise_from(inputs, question), advise_from(replace(inputs, memory=None), question)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    params=st.sampled_from([1e7, 3e8, 2e9, 6e9, 2e10]),
    gpus=st.sampled_from([8, 32, 64]),
    gpu=st.sampled_from(["A100", "A100-80GB", "T4"]),
)
@pytest.mark.slow
def test_the_named_option_fits_and_memory_changes_nothing_where_all_fit(params, gpus, gpu):
    with_memory, without = _answers({"gpus": gpus, "params": params, "compute_ms": 500.0, "gpu": gpu})
    doc = advice_to_dict(with_memory)
    named = _named_entry(with_memory, doc)
    every_row_fails = not _fitting(doc)
    if not every_row_fails:
        assert named["memory"]["fits"] is not False
    marked = [e["topology"] for e in doc["predictions"] if e.get("vs_best") == "best"]
    assert marked == [named["topology"]]  # one option named by the marks and the verdict
    rows = [e for e in doc["predictions"] if e.get("memory")]
    if all(e["memory"]["fits"] is not False for e in rows):
        assert with_memory.recommendation.named == without.recommendation.named
        assert with_memory.recommendation.too_close_to_call == without.recommendation.too_close_to_call


@pytest.mark.slow
def test_nothing_fits_says_so_and_names_what_would():
    adv = advise(gpus=8, params=9e10, compute_ms=2000.0, gpu="T4", local_sgd_h=0)
    verdict = adv.recommendation.verdict
    assert verdict.startswith("Nothing fits on T4")
    assert "What would:" in verdict and "a GPU with more than" in verdict


@pytest.mark.parametrize("fmt", ["csv"])
def test_the_csv_carries_memory_and_fits(fmt):
    from runtime_model.advice.report import to_csv

    text = to_csv(advise(**BIG))
    header = text.splitlines()[0].split(",")
    assert "memory_gib" in header and "memory_fits" in header


# ---------------------------------------------------------------- a trace's own memory

TRACE = Path(__file__).parent / "data" / "traces" / "hta-a100x2-rank0.json.gz"


def _trace_with_peak(tmp_path: Path, totals: list) -> Path:
    """The real A100 trace with Kineto's `[memory]` events added (profile_memory=True records one per
    allocation, each with the allocator's running total)."""
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    t0 = min(e["ts"] for e in doc["traceEvents"] if "ts" in e)
    for i, total in enumerate(totals):
        doc["traceEvents"].append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": 1,
                "tid": 1,
                "ts": t0 + i,
                "s": "t",
                "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1, "Total Allocated": total},
            }
        )
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_trace_names_its_gpu_for_the_memory_check(tmp_path):
    inputs = resolve_inputs({"gpus": 16, "trace": [str(TRACE)]})
    doc = advice_to_dict(advise_from(inputs, Question()), inputs.document)
    capacity = doc["memory"]["capacity_bytes"]
    assert capacity == doc["inputs"]["trace_gpu_memory_bytes"] > 0
    assert doc["memory"]["activation_bytes"] is None  # recorded without profile_memory


def test_a_traced_peak_gives_the_activations_and_ddp_matches_it(tmp_path):
    peak = 30 * 2**30
    path = _trace_with_peak(tmp_path, [1e9, peak, 2e9])
    doc = advice_to_dict(advise(gpus=2, trace=[str(path)], local_sgd_h=0))
    assert "your trace's peak allocated" in doc["memory"]["activation_source"]
    ddp = _entries(doc)["allreduce"]["memory"]
    # at the traced shape DDP's predicted peak is the peak the trace recorded (an invariant: the measured
    # value equals the model's own where it was measured), unless the step's phase was higher
    assert ddp["bytes"] == pytest.approx(peak, rel=1e-9) or ddp["bytes"] > peak


@pytest.mark.parametrize("bad", [-1, float("nan"), 1e15])
def test_a_traced_total_outside_the_gpu_is_one_line(tmp_path, bad):
    from typer.testing import CliRunner

    from rtmodel_cli.app import app

    path = _trace_with_peak(tmp_path, [1e9, bad])
    res = CliRunner().invoke(app, ["advise", "--gpus", "2", "--trace", str(path)])
    assert res.exit_code == 2, res.output
    assert "Total Allocated" in res.output and "Traceback" not in res.output


def test_a_profiles_model_gives_its_activations_where_the_gpu_is_named():
    profile = Path(__file__).parent / "data" / "real_profile_2x1.json"
    unjudged = resolve_inputs({"gpus": 8, "profile": str(profile)})
    assert unjudged.memory is None and "not judged" in unjudged.provenance["memory"]
    inputs = resolve_inputs({"gpus": 8, "profile": str(profile), "gpu_memory_gib": 40.0})
    assert inputs.memory.capacity_bytes == 40 * 2**30
    # rtmodel's synthetic model reads its batch (no FakeTensor run): small, so measured on real CPU tensors
    assert inputs.memory.activation_source.startswith("the profile's model (synthetic, 8 per rank")
    assert inputs.memory.activation_bytes >= 0


def test_a_profiled_model_that_runs_on_fake_tensors_is_estimated(tmp_path):
    doc = json.loads((Path(__file__).parent / "data" / "real_profile_2x1.json").read_text())
    doc["workload"].update(model="mlp", model_args={})
    profile = tmp_path / "mlp-profile.json"
    profile.write_text(json.dumps(doc))
    inputs = resolve_inputs({"gpus": 8, "profile": str(profile), "gpu_memory_gib": 40.0})
    assert inputs.memory.activation_source.startswith("the profile's model (mlp, 8 per rank")
    assert inputs.memory.activation_bytes > 0
    assert inputs.memory.activation_grad_bytes >= inputs.memory.activation_bytes


def test_local_sgd_gets_fsdp_inside_its_replica_where_ddp_inside_does_not_fit():
    doc = advice_to_dict(advise(gpus=64, params=7e9, compute_ms=2000.0))
    entries = _entries(doc)
    plain, sharded = entries["local-sgd H=30"], entries["local-sgd H=30 fsdp"]
    assert plain["memory"]["fits"] is False and sharded["memory"]["fits"] is not False
    assert sharded["library"] == "torchft DiLoCo"
    # the node's FSDP shards the replica over its 4 GPUs: states, gradients and outer momentum by 4
    assert sharded["memory"]["bytes"] < plain["memory"]["bytes"] / 3
    small = _entries(advice_to_dict(advise(gpus=64)))
    assert "local-sgd H=30 fsdp" not in small  # added only where DDP's replica does not fit


def test_fsdp_inside_a_replica_shards_its_optimizer_and_needs_a_node():
    from runtime_model.core.errors import InvalidCombination
    from runtime_model.prediction.local_sgd import LocalSgd, local_sgd_prediction
    from tests.helpers import scenario

    sc = scenario(16, 4)
    ddp, fsdp = (local_sgd_prediction(sc, LocalSgd(inner=inner)) for inner in ("ddp", "fsdp"))
    assert fsdp.outer_step_s == pytest.approx(ddp.outer_step_s / 4)
    assert fsdp.options.inner == "fsdp" and fsdp.name.endswith(" fsdp")
    with pytest.raises(InvalidCombination):
        LocalSgd(inner="fsdp", replica="gpu")


def test_a_profiles_measured_peak_gives_the_activations_and_ddp_matches_it(tmp_path):
    doc = json.loads((Path(__file__).parent / "data" / "real_profile_2x1.json").read_text())
    peak = 3 * 2**30
    doc["compute"].update(
        peak_memory_bytes=[peak, peak - 2**20],
        peak_memory_source="mem_tracker",
        device_memory_bytes=[64 * 2**30, 64 * 2**30],
        ddp_bucket_view=False,
    )
    profile = tmp_path / "measured-profile.json"
    profile.write_text(json.dumps(doc))
    inputs = resolve_inputs({"gpus": 2, "gpus_per_node": 1, "profile": str(profile), "gpu_memory_gib": 40.0})
    assert inputs.memory.activation_source.startswith("your profile's DDP peak allocated (3 GiB)")
    adv = advise_from(inputs, Question())
    ddp = next(r for r in adv.baselines if r.method == "ddp").memory
    # the measured peak, at the shape it was measured at, is DDP's predicted peak (or the step's above it)
    assert ddp.peak_bytes == pytest.approx(peak, rel=1e-9) or ddp.peak_bytes > peak

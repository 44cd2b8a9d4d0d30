"""One header for every document rtmodel writes, `{"schema": "rtmodel-<kind>/<n>"}`
(runtime_model.core.document_header): writers write it, readers also take the forms before it, and a
document newer than this rtmodel reads is refused in one line that says so."""

from __future__ import annotations

import json

import pytest

from runtime_model.core.document_header import HeaderError, check_header, document_header, header_of

OLD = {
    "profile": {"tool": "rtmodel-profile", "schema_version": 1},
    "calibration": {"format": "rtmodel-calibration", "version": 1},
    "validation": {"kind": "rtmodel-validation", "version": 1},
}


def test_the_header_and_its_older_forms_name_the_same_kind_and_version():
    assert document_header("profile", 1) == {"schema": "rtmodel-profile/1"}
    for kind, old in OLD.items():
        assert check_header(document_header(kind, 1), kind, 1, f"rtmodel {kind}") == 1
        assert check_header(old, kind, 1, f"rtmodel {kind}") == 1
        assert header_of(old).kind == header_of(document_header(kind, 1)).kind == kind
    assert header_of([1]).kind is None and header_of({"schema": 3}).kind is None


@pytest.mark.parametrize("doc, message", [
    ({"schema": "rtmodel-profile/2"},
     "has schema 'rtmodel-profile/2', newer than this rtmodel reads (rtmodel-profile/1); update rtmodel to read it"),
    ({"tool": "rtmodel-profile", "schema_version": 2}, "has schema_version 2, newer than this rtmodel reads"),
    ({"tool": "rtmodel-profile", "schema_version": True}, "has schema_version True; this rtmodel reads rtmodel-profile/1"),
    ({"schema": "rtmodel-profile/0"}, "has schema 'rtmodel-profile/0'; this rtmodel reads rtmodel-profile/1"),
    ({"schema": "rtmodel-advice/1"}, "is not an rtmodel profile (schema='rtmodel-advice/1', expected 'rtmodel-profile/1')"),
    ({"format": "rtmodel-calibration", "version": 1}, "is not an rtmodel profile (format='rtmodel-calibration'"),
    ({"tool": "nccl-tests"}, "is not an rtmodel profile (tool='nccl-tests', expected 'rtmodel-profile/1')"),
    ({"cluster": 1}, "is not an rtmodel profile (schema=None"),
    ([1, 2], "is not an rtmodel profile (a JSON object was expected)"),
])  # fmt: skip
def test_other_or_newer_documents_are_one_line(doc, message):
    with pytest.raises(HeaderError) as err:
        check_header(doc, "profile", 1, "rtmodel profile")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_advice_writes_the_header():
    from runtime_model.advice.advisor import advise
    from runtime_model.advice.report import advice_to_dict
    from runtime_model.presets import to_model as presets

    doc = advice_to_dict(advise(presets.scenario_from_choice(presets.resolve(presets.PresetRequest(16)))))
    assert check_header(doc, "advice", 1, "rtmodel advice") == 1 and doc["schema"] == "rtmodel-advice/1"


def test_validation_records_are_read_in_either_header_and_refused_when_newer(tmp_path):
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.results import read_records

    body = {"topology": "ring", "allreduce": {"error": 0.1}, "decentralized": {"error": -0.1}}
    lines = [{**document_header("validation", 1), **body}, {**OLD["validation"], **body},
             {"kind": "rtmodel-validation", **body}, {**document_header("profile", 1)}]  # fmt: skip
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    records, skipped = read_records(path)
    assert len(records) == 3 and skipped == 1
    path.write_text(json.dumps({**document_header("validation", 2), **body}) + "\n")
    with pytest.raises(
        ValidationError, match=r"r.jsonl:1: the line has schema 'rtmodel-validation/2', newer than"
    ):
        read_records(path)


def test_a_committed_validation_record_reads_back_typed_and_writes_the_same_line():
    from pathlib import Path

    from rtmodel_validation.plan import AdvisorSummary
    from rtmodel_validation.results import ValidationResult, dumps

    path = Path(__file__).parent.parent / "benchmarks/results/gpu-accuracy/h200-2026-11-27-b/runs/runs.jsonl"
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        res = ValidationResult.from_record(rec)
        assert res.shape.gpus == rec["shape"]["world_size"] and res.allreduce.measured.mean_s > 0
        assert res.advisor is None or isinstance(res.advisor, AdvisorSummary)
        again = json.loads(dumps(res.to_record()))
        assert again.pop("schema") == "rtmodel-validation/1"
        assert again == {k: v for k, v in rec.items() if k not in ("kind", "version")}
    with pytest.raises(Exception, match="is not an rtmodel validation record"):
        ValidationResult.from_record(document_header("profile", 1))

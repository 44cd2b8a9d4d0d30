"""The launcher-to-rank boundary of validation is typed: a job and a report survive their JSON trip
exactly, and one that lacks a field fails at once, naming it."""

from __future__ import annotations

import json

import pytest

from rtmodel_validation.errors import ValidationError
from rtmodel_validation.job import RankJob, RankReport, RunWorkload

JOB = RankJob(
    world_size=4,
    ranks_per_node=2,
    topology="base-2",
    decent_dp_topology="base-2",
    registered_by_rtmodel=True,
    workload=RunWorkload("mlp", {"hidden": 64, "layers": 2}, 8, 25.0),
    iterations=5,
    warmup=4,
    timeout_s=60.0,
)
REPORT = RankReport(
    rank=3,
    local_rank=1,
    host="node1",
    device="cuda:1",
    backend="nccl",
    allreduce_s=(0.11, 0.12),
    decentralized_s=(0.09, 0.1),
    distance_to_consensus=1e-6,
)


@pytest.mark.parametrize("value", [JOB, REPORT], ids=["job", "report"])
def test_json_round_trip_is_exact(value):
    text = json.dumps(value.to_json())  # what crosses the process boundary
    assert type(value).from_json(json.loads(text)) == value


@pytest.mark.parametrize(
    "cls, doc, missing",
    [
        (RankJob, {k: v for k, v in JOB.to_json().items() if k != "warmup"}, "the rank job lacks warmup"),
        (
            RankJob,
            {**JOB.to_json(), "workload": {"model": "mlp"}},
            "workload lacks model_args, batch_per_rank",
        ),
        (RankReport, {k: v for k, v in REPORT.to_json().items() if k != "host"}, "a rank report lacks host"),
        (RankReport, [1, 2], "a rank report must be a JSON object"),
    ],
)
def test_a_document_without_a_field_is_refused_naming_it(cls, doc, missing):
    with pytest.raises(ValidationError, match=missing):
        cls.from_json(doc)

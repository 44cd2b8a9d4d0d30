"""What the launcher hands each validation rank, and what each rank hands back: typed, with JSON
round-trips, torch-free.

Why types at this boundary: the job crosses a process (a JSON file torchrun's workers read) and the
reports cross back (all_gather, a JSON file rank 0 writes). As dicts, a key renamed on one side failed
only inside a training run; as frozen dataclasses built by `from_json`, a job or report that does not
have every field fails at once, naming the field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from validation.errors import ValidationError


def _fields_of(cls, doc: Any, what: str) -> dict:
    """The document's values for every field of `cls`; ValidationError naming what is missing."""
    if not isinstance(doc, dict):
        raise ValidationError(f"{what} must be a JSON object, got {type(doc).__name__}")
    names = [f.name for f in fields(cls)]
    missing = [n for n in names if n not in doc]
    if missing:
        raise ValidationError(f"{what} lacks {', '.join(missing)}")
    return {n: doc[n] for n in names}


@dataclass(frozen=True)
class RunWorkload:
    """What both trainings train: the model, its arguments, the batch per rank and the bucket cap."""

    model: str
    model_args: dict
    batch_per_rank: int
    bucket_cap_mb: float

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Any) -> RunWorkload:
        return cls(**_fields_of(cls, doc, "the job's workload"))


@dataclass(frozen=True)
class RankJob:
    """One validation job as every rank runs it (validation.plan.Plan.rank_job makes it)."""

    world_size: int
    ranks_per_node: int
    topology: str  # rtmodel's name
    decent_dp_topology: str  # the name in decent_dp.topo.TopologyReg
    registered_by_rtmodel: bool  # True: rtmodel_decentdp must be imported first
    workload: RunWorkload
    iterations: int
    warmup: int
    timeout_s: float

    def to_json(self) -> dict:
        return {**asdict(self), "workload": self.workload.to_json()}

    @classmethod
    def from_json(cls, doc: Any) -> RankJob:
        values = _fields_of(cls, doc, "the rank job")
        return cls(**{**values, "workload": RunWorkload.from_json(values["workload"])})


@dataclass(frozen=True)
class RankReport:
    """One rank's measurements: per-iteration times of both trainings and its distance to consensus."""

    rank: int
    local_rank: int
    host: str
    device: str  # "cuda:0", "cpu"
    backend: str
    allreduce_s: tuple[float, ...]
    decentralized_s: tuple[float, ...]
    distance_to_consensus: float

    def to_json(self) -> dict:
        return {**asdict(self), "allreduce_s": list(self.allreduce_s), "decentralized_s": list(self.decentralized_s)}

    @classmethod
    def from_json(cls, doc: Any) -> RankReport:
        values = _fields_of(cls, doc, "a rank report")
        return cls(
            **{
                **values,
                "allreduce_s": tuple(float(t) for t in values["allreduce_s"]),
                "decentralized_s": tuple(float(t) for t in values["decentralized_s"]),
                "distance_to_consensus": float(values["distance_to_consensus"]),
            }
        )

"""The typed parts of a validation record (rtmodel_validation.results.ValidationResult): what was trained,
where each rank ran, how far the replicas ended apart, the local-SGD run, and the compute's drift.

Why typed: as dicts, every reader indexed them by key (`rec["drift"]["beyond"]`, `.get("ranks")`), so a key
renamed on the writing side failed only in some reader, later. Each part is a frozen dataclass whose
`from_record` reads exactly what its `to_record` writes, byte for byte, also for records written before a
key existed (benchmarks/results/**/*.validations.jsonl): a missing key stays missing on the way back out.
Numbers the file holds as null (JSON has no NaN) read back as NaN, and are written as null again.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from rtmodel_validation.errors import ValidationError

if TYPE_CHECKING:
    from rtmodel_validation.job import RunWorkload
    from runtime_model.prediction.local_sgd import LocalSgd, LocalSgdPrediction


def typed_fields(cls, doc: Any, what: str, skip: tuple[str, ...] = ()) -> dict:
    """`doc`'s values for the fields of `cls` (those with a default may be absent), floats and tuples as
    the dataclass holds them (null -> NaN); ValidationError naming the first field missing."""
    if not isinstance(doc, dict):
        raise ValidationError(f"{what} must be a JSON object, got {type(doc).__name__}")
    out = {}
    for f in fields(cls):
        if f.name in skip:
            continue
        if f.name not in doc:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValidationError(f"{what} lacks {f.name}")
            continue
        value = doc[f.name]
        if f.type == "float":
            value = _number(value, f"{what}'s {f.name}")
        elif f.type.startswith("tuple[float") and value is not None:
            value = tuple(_number(v, f"{what}'s {f.name}") for v in _list(value, f"{what}'s {f.name}"))
        elif f.type.startswith("tuple[int") and value is not None:
            value = tuple(None if v is None else int(v) for v in _list(value, f"{what}'s {f.name}"))
        out[f.name] = value
    return out


def _number(value: Any, what: str) -> float:
    """A JSON number as the record held it (an int stays an int: written back the same), null as NaN."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{what} must be a number, got {value!r}")
    return value


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list | tuple):
        raise ValidationError(f"{what} must be a JSON array, got {type(value).__name__}")
    return list(value)


@dataclass(frozen=True)
class RecordWorkload:
    """What both trainings trained (rtmodel_validation.job.RunWorkload, as the record keeps it). precision
    and optimizer are None in records from before the recipe was recorded (those runs trained fp32 with
    Adam, RunWorkload's defaults); they stay absent when such a record is written again."""

    model: str
    model_args: dict
    batch_per_rank: int
    bucket_cap_mb: float
    precision: str | None = None
    optimizer: str | None = None

    @classmethod
    def from_run(cls, workload: RunWorkload) -> RecordWorkload:
        return cls(**workload.to_json())

    @classmethod
    def from_record(cls, doc: Any, what: str = "the record's workload") -> RecordWorkload:
        return cls(**typed_fields(cls, doc, what))

    def to_record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None or k not in ("precision", "optimizer")}


@dataclass(frozen=True)
class RankPlace:
    """Where one rank ran: its global rank, its index on its (possibly pretend) node, its host."""

    rank: int
    local_rank: int
    host: str

    @classmethod
    def from_record(cls, doc: Any, what: str = "a rank of the record") -> RankPlace:
        return cls(**typed_fields(cls, doc, what))

    def to_record(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ConsensusDistance:
    """||x_i - mean x|| over the ranks' parameters after the Decent-DP run (decent_dp's
    global_avg(return_d2c)): the largest, the mean, and each rank's, in rank order."""

    max: float
    mean: float
    per_rank: tuple[float, ...]

    @classmethod
    def of(cls, per_rank: list[float]) -> ConsensusDistance:
        return cls(max(per_rank), sum(per_rank) / len(per_rank), tuple(per_rank))

    @classmethod
    def from_record(cls, doc: Any, what: str = "the record's distance_to_consensus") -> ConsensusDistance:
        return cls(**typed_fields(cls, doc, what))

    def to_record(self) -> dict:
        return {"max": self.max, "mean": self.mean, "per_rank": list(self.per_rank)}


@dataclass(frozen=True)
class ComputeDrift:
    """The bare step now against the profile's, and the model's errors with today's compute beside
    those as profiled (rtmodel_validation/drift.py says how each is measured)."""

    profile_compute_s: float
    now_compute_s: float
    drift: float  # now / profile - 1
    load_avg_1m: dict[str, float]  # host -> its 1-minute load average before the runs
    allreduce_error_today: float
    topology_error_today: float
    beyond: bool  # the change exceeds what a fresh profile errs by (drift.drift_threshold)

    @classmethod
    def from_record(cls, doc: Any, what: str = "the record's drift") -> ComputeDrift:
        values = typed_fields(cls, doc, what)
        loads = values["load_avg_1m"]
        if not isinstance(loads, dict):
            raise ValidationError(f"{what}'s load_avg_1m must be a JSON object, got {type(loads).__name__}")
        loads = {str(h): _number(v, f"{what}'s load_avg_1m[{h!r}]") for h, v in loads.items()}
        return cls(**{**values, "load_avg_1m": loads})

    def to_record(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LocalSgdBreakdown:
    """What goes into the local-SGD prediction, per period (s) unless named otherwise
    (runtime_model.prediction.local_sgd.LocalSgdPrediction's fields of the same names)."""

    period_s: float
    inner_step_s: float  # one replica's mean inner step
    wait_s: float
    outer_comm_s: float
    exposed_comm_s: float
    outer_step_s: float
    replicas: int

    @classmethod
    def of(cls, predicted: LocalSgdPrediction) -> LocalSgdBreakdown:
        return cls(**{f.name: getattr(predicted, f.name) for f in fields(cls)})

    @classmethod
    def from_record(cls, doc: Any, what: str = "the record's local-SGD prediction") -> LocalSgdBreakdown:
        return cls(**typed_fields(cls, doc, what))

    def to_record(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LocalSgdRun:
    """The local-SGD run of a validation (validate --local-sgd-h): its options, its warm-up and timed
    inner steps (whole periods, rtmodel_validation.local_sgd.local_sgd_counts), the prediction's parts.

    option_keys: the option keys the record held (empty: all of LocalSgd's); a record written before an
    option existed reads with its default and is written back without it."""

    options: LocalSgd
    warmup: int
    iterations: int
    predicted: LocalSgdBreakdown
    option_keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_record(cls, doc: Any, what: str = "the record's local_sgd_run") -> LocalSgdRun:
        from rtmodel_validation.job import local_sgd_from_json

        values = typed_fields(cls, doc, what, skip=("option_keys",))
        options = values["options"]
        return cls(
            options=local_sgd_from_json(options, f"{what}'s options"),
            warmup=values["warmup"],
            iterations=values["iterations"],
            predicted=LocalSgdBreakdown.from_record(values["predicted"], f"{what}'s predicted"),
            option_keys=tuple(options),
        )

    def to_record(self) -> dict:
        options = asdict(self.options)
        if self.option_keys:
            options = {k: options[k] for k in self.option_keys if k in options}
        return {
            "options": options,
            "warmup": self.warmup,
            "iterations": self.iterations,
            "predicted": self.predicted.to_record(),
        }

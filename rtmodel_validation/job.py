"""What the launcher hands each validation rank, and what each rank hands back: typed, with JSON
round-trips, torch-free.

Why types at this boundary: the job crosses a process (a JSON file torchrun's workers read) and the
reports cross back (all_gather, a JSON file rank 0 writes). As dicts, a key renamed on one side failed
only inside a training run; as frozen dataclasses built by `from_json`, a job or report that does not
have every field fails at once, naming the field.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from rtmodel_validation.errors import ValidationError

if TYPE_CHECKING:
    from runtime_model.prediction.local_sgd import LocalSgd


def fields_of(cls, doc: Any, what: str) -> dict:
    """The document's values for every field of `cls`; ValidationError naming what is missing.

    A field with a default (one added later, e.g. local SGD's) may be absent: a document written before
    it existed still loads, with the default."""
    if not isinstance(doc, dict):
        raise ValidationError(f"{what} must be a JSON object, got {type(doc).__name__}")
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [n for n in required if n not in doc]
    if missing:
        raise ValidationError(f"{what} lacks {', '.join(missing)}")
    return {f.name: doc[f.name] for f in fields(cls) if f.name in doc}


@dataclass(frozen=True)
class RunWorkload:
    """What both trainings train: the model, its arguments, the batch per rank, the bucket cap and the recipe
    (rtmodel_harness.recipe: precision and optimizer; jobs and reports from before them load as fp32, Adam)."""

    model: str
    model_args: dict
    batch_per_rank: int
    bucket_cap_mb: float
    precision: str = "fp32"
    optimizer: str = "adam"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Any) -> RunWorkload:
        return cls(**fields_of(cls, doc, "the job's workload"))


@dataclass(frozen=True)
class RankJob:
    """One validation job as every rank runs it (rtmodel_validation.plan.Plan.rank_job makes it)."""

    world_size: int
    ranks_per_node: int
    topology: str  # rtmodel's name
    decent_dp_topology: str  # the name in decent_dp.topo.TopologyReg
    registered_by_rtmodel: bool  # True: rtmodel_decentdp must be imported first
    workload: RunWorkload
    iterations: int
    warmup: int
    timeout_s: float
    local_sgd: LocalSgd | None = None  # None: no local-SGD run
    backend: str = "auto"  # --backend (rtmodel_util.backend_choice decides auto on each host)
    baseline: str | None = None  # --baseline: "fsdp" adds a sharded training (FSDP2, ZeRO-3); None: none

    def to_json(self) -> dict:
        return {**asdict(self), "workload": self.workload.to_json()}

    @classmethod
    def from_json(cls, doc: Any) -> RankJob:
        values = fields_of(cls, doc, "the rank job")
        local = values.get("local_sgd")
        return cls(**{**values, "workload": RunWorkload.from_json(values["workload"]),
                      "local_sgd": None if local is None else local_sgd_from_json(local, "the rank job's local_sgd")})


def local_sgd_from_json(doc: Any, what: str) -> LocalSgd:
    """LocalSgd from its fields as asdict wrote them; ValidationError naming what is missing or wrong."""
    from runtime_model.core.errors import UserError
    from runtime_model.prediction.local_sgd import LocalSgd

    try:
        return LocalSgd(**fields_of(LocalSgd, doc, what))
    except UserError as exc:
        raise ValidationError(f"{what}: {exc}") from None


@dataclass(frozen=True)
class RankReport:
    """One rank's measurements: per-iteration times of each training and its distance to consensus."""

    rank: int
    local_rank: int
    host: str
    device: str  # "cuda:0", "cpu"
    backend: str
    allreduce_s: tuple[float, ...]
    decentralized_s: tuple[float, ...]
    distance_to_consensus: float
    local_sgd_s: tuple[float, ...] = ()  # per inner step of the local-SGD run; empty when it did not run
    # the bare step (no DDP, nothing sent) timed at validate time, and the host's 1-minute load average
    # before the runs: drift since the profile, told apart from the model's error (rtmodel_validation/drift.py)
    bare_compute_s: tuple[float, ...] = ()
    load_avg_1m: float | None = None
    fsdp_s: tuple[float, ...] = ()  # per iteration of the FSDP2 run (--baseline fsdp); empty: not run
    # run ("allreduce", "decentralized", "local_sgd", "fsdp") -> this rank's peak bytes (None: not measured),
    # and how they were measured or why not (rtmodel_harness.peak_memory); reports from before them load empty
    peak_memory_bytes: dict = field(default_factory=dict)
    peak_memory_source: str | None = None

    def to_json(self) -> dict:
        times = {k: list(getattr(self, k)) for k in TIMES}
        return {**asdict(self), **times}

    @classmethod
    def from_json(cls, doc: Any) -> RankReport:
        values = fields_of(cls, doc, "a rank report")
        times = {k: tuple(float(t) for t in values[k]) for k in TIMES if k in values}
        return cls(**{**values, **times, "distance_to_consensus": float(values["distance_to_consensus"])})


# a report's per-iteration times
TIMES = ("allreduce_s", "decentralized_s", "local_sgd_s", "bare_compute_s", "fsdp_s")

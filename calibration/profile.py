"""The profile as typed, frozen data: what `rtmodel profile` measured, ready for fitting and validation.

Why a type and not the JSON dict: calibration and validation used to index the document by strings in
several places, each with its own idea of defaults. The document is parsed and checked once
(calibration.profile_io builds a Profile); everything downstream reads named fields, with the cluster
shape as the runtime model's own ClusterShape and every timing as a Measurement that keeps its samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calibration.measurement import Measurement
from runtime_model.core.scenario import ClusterShape, GroupShape

PHASES = ("forward", "backward", "optimizer")
BucketReadyTimes = tuple[tuple[tuple[float, ...], ...], ...]  # rank -> measured iteration -> bucket (s)


@dataclass(frozen=True)
class Workload:
    """What was trained while profiling: enough to train the same thing again, and its gradient buckets."""

    model: str | None
    model_args: dict[str, Any]  # a private copy; treat as read-only
    batch_per_rank: int | None  # None in profiles from before it was recorded
    bucket_cap_mb: float | None
    ddp_buckets_bytes: tuple[int, ...]
    gossip_buckets_bytes: tuple[int, ...]
    precision: str | None = None  # rtmodel_harness.recipe's; None in profiles from before it was recorded (fp32)
    optimizer: str | None = None  # adam | accum-adam; None: before it was recorded (adam)


@dataclass(frozen=True)
class ComputeProfile:
    """Per-rank compute timings: one Measurement per phase and rank, and bucket ready times.

    Ready times (seconds from the start of backward until each gradient bucket is ready) are a vector
    per iteration, not repeated samples of one quantity, so they stay raw.
    """

    forward: tuple[Measurement, ...]  # index = rank
    backward: tuple[Measurement, ...]
    optimizer: tuple[Measurement, ...]
    ddp_bucket_ready_s: BucketReadyTimes
    gossip_bucket_ready_s: BucketReadyTimes
    # Decent-DP's per-bucket work after its exchanges, per wrapped iteration (profiler/wrapped.py);
    # None in a profile made before it was measured, or where Decent-DP could not run
    gossip_step: tuple[Measurement, ...] | None = None
    # the phases under DDP with its exchanges skipped (profiler/wrapped.py measure_ddp_work): DDP's own
    # host work; None in a profile made before it was measured
    ddp_wrapped: tuple[tuple[Measurement, ...], ...] | None = None  # (forward, backward, optimizer)

    @property
    def ranks(self) -> int:
        return len(self.forward)

    def phase(self, name: str) -> tuple[Measurement, ...]:
        """The per-rank measurements of "forward", "backward" or "optimizer"."""
        if name not in PHASES:
            raise KeyError(f"no compute phase {name!r}; have: {', '.join(PHASES)}")
        return getattr(self, name)


@dataclass(frozen=True)
class AllReduceMeasurement:
    """All-reduce timings of one profiler pattern at one message size."""

    pattern: str  # profiler pattern name (rtmodel_util.profile_patterns.PATTERN_NAMES)
    group: GroupShape  # where the pattern's ranks sit (what the cost depends on)
    message_bytes: int
    timing: Measurement  # per repetition, the max over every rank of every group
    group_timing: Measurement | None = None  # per repetition and group, the max over that group's ranks

    @property
    def own_group(self) -> Measurement:
        """What one rank waits for: its own group's time while the other groups run (older profiles
        recorded only the max over all groups, an upper bound)."""
        return self.group_timing or self.timing


@dataclass(frozen=True)
class Profile:
    """A checked schema-v1 profile; calibration.profile_io builds it (load_profile, profile_from_document).

    `document` is the parsed JSON as read. No rtmodel stage reads it: everything calibration and
    validation use is typed above. It is there for a notebook or script that needs a field not typed
    here (e.g. shape.device_name, workload.param_bytes, communication.sizes_bytes / reps, a
    pattern's concurrent_groups or groups); type such a field here before a stage depends on it.
    """

    origin: str  # the file it was read from, or the caller's name for an in-memory document
    shape: ClusterShape
    backend: str | None
    device: str | None
    torch_version: str | None
    nccl_version: str | None
    node_names: tuple[str, ...]
    created_utc: str | None
    workload: Workload
    compute: ComputeProfile
    allreduce: tuple[AllReduceMeasurement, ...]  # every pattern x size, in the document's order
    document: dict = field(repr=False, compare=False, default_factory=dict)
    nccl_algo_env: str | None = None  # NCCL_ALGO as the profiled ranks saw it (None: unset or not recorded)
    # link class -> why the profile measured no real link of it (ranks sharing a GPU, pretend nodes);
    # empty for profiles from before it was recorded
    unmeasured_links: dict[str, str] = field(default_factory=dict, compare=False)
    # the training's buckets one at a time and all in flight (InFlightResult); empty before it was measured
    in_flight: tuple = field(default=(), compare=False)

    @property
    def nccl_algo(self) -> str | None:
        """How the profiled backend ran its all-reduces, in Network.nccl_algo's terms: None off NCCL (gloo's
        flat ring), else what NCCL_ALGO left NCCL ("ring", "tree", or "auto": NCCL's own choice per call)."""
        return nccl_algo_from_env(self.nccl_algo_env) if self.backend == "nccl" else None

    @property
    def patterns(self) -> tuple[str, ...]:
        """Pattern names measured, in order, each once."""
        return tuple(dict.fromkeys(m.pattern for m in self.allreduce))

    def noise_warnings(self) -> list[str]:
        """Every measurement's noise warning (compute phases per rank, all-reduce per pattern and size)."""
        timings = [m for name in PHASES for m in self.compute.phase(name)]
        timings += [m.timing for m in self.allreduce]
        return [w for w in (t.noise_warning() for t in timings) if w]


def nccl_algo_from_env(value: str | None) -> str:
    """NCCL_ALGO's value -> "ring", "tree" or "auto" (the two algorithms the model knows).

    NCCL reads a comma-separated list of algorithms to allow (case-insensitive), with a leading ^ the ones
    to exclude, and since 2.24 also per collective ("allreduce:tree;allgather:ring"). When exactly one of
    ring and tree stays allowed for all-reduce, that one ran; otherwise NCCL chose per call ("auto").
    """
    if not value or not value.strip():
        return "auto"
    entries = [e.strip().lower() for e in value.split(";") if e.strip()]
    chosen = next((e.split(":", 1)[1] for e in entries if e.startswith("allreduce:")), None)
    if chosen is None:
        chosen = next((e for e in entries if ":" not in e), "")
    exclude = chosen.startswith("^")
    names = {n.strip() for n in chosen.removeprefix("^").split(",") if n.strip()}
    allowed = {"ring", "tree"} - names if exclude else {"ring", "tree"} & names
    return allowed.pop() if len(allowed) == 1 else "auto"

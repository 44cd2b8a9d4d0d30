"""The profile as calibration and validation read it: a checked, complete ProfileDocument
(rtmodel_documents.profile_document) and the file it came from, seen in the model's terms.

Why a view and not a second set of dataclasses: the profile's fields are typed once, by the schema the
profiler writes through; what calibration needs beyond them (the cluster shape as a ClusterShape, the
algorithm NCCL_ALGO left, a workload with its defaults filled) is derived here on access, so no copy
can drift from the document.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from calibration.measurement import Measurement
from calibration.units import fmt_bytes
from rtmodel_documents.profile_communication import InFlightResult, ProfileCommunication
from rtmodel_documents.profile_document import ProfileCompute, ProfileDocument, ProfileWorkload
from rtmodel_documents.profile_file import checked_profile, read_profile
from rtmodel_documents.profile_schema import nccl_algo_from_env
from runtime_model.core.scenario import ClusterShape

PHASES = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class Profile:
    """A checked, complete profile (load_profile, profile_from_document build it) and its origin: the file
    it was read from, or the caller's name for an in-memory document."""

    document: ProfileDocument
    origin: str = "profile"

    @property
    def shape(self) -> ClusterShape:
        return ClusterShape(
            gpus=self.document.shape.world_size, gpus_per_node=self.document.shape.ranks_per_node
        )

    @property
    def backend(self) -> str | None:
        return self.document.shape.backend

    @property
    def device(self) -> str | None:
        return self.document.shape.device

    @property
    def torch_version(self) -> str | None:
        return self.document.shape.torch_version

    @property
    def nccl_version(self) -> str | None:
        return self.document.shape.nccl_version

    @property
    def node_names(self) -> tuple[str, ...]:
        return self.document.shape.node_names or ()

    @property
    def created_utc(self) -> str | None:
        return self.document.created_utc

    @property
    def unmeasured_links(self) -> dict[str, str]:
        """Link class -> why the profile measured no real link of it (ranks sharing a GPU, pretend nodes);
        empty for profiles from before it was recorded."""
        return dict(self.document.shape.unmeasured_links or {})

    @property
    def nccl_algo_env(self) -> str | None:
        """NCCL_ALGO as the profiled ranks saw it (None: unset or not recorded)."""
        return self.document.shape.nccl_algo_env

    @property
    def nccl_algo(self) -> str | None:
        """How the profiled backend ran its all-reduces, in Network.nccl_algo's terms: None off NCCL (gloo's
        flat ring), else what NCCL_ALGO left NCCL ("ring", "tree", or "auto": NCCL's own choice per call)."""
        return nccl_algo_from_env(self.document.shape.nccl_algo_env) if self.backend == "nccl" else None

    @property
    def workload(self) -> ProfileWorkload:
        """The workload with what older profiles lack as None (batch_per_rank, bucket_cap_mb written 0 or
        absent) and model_args as a private dict (absent: none)."""
        wl = self.document.workload
        return replace(
            wl,
            model_args=dict(wl.model_args or {}),
            batch_per_rank=int(wl.batch_per_rank) if wl.batch_per_rank else None,
            bucket_cap_mb=float(wl.bucket_cap_mb) if wl.bucket_cap_mb else None,
        )

    @property
    def compute(self) -> ProfileCompute:
        return self.document.compute

    @property
    def communication(self) -> ProfileCommunication:
        return self.document.communication

    @property
    def in_flight(self) -> tuple[InFlightResult, ...]:
        """The training's buckets one at a time and all in flight; empty before it was measured."""
        return self.document.communication.in_flight or ()

    @property
    def patterns(self) -> tuple[str, ...]:
        """Pattern names measured, in order, each once."""
        return tuple(dict.fromkeys(p.pattern for p in self.communication.patterns))

    def phase(self, name: str) -> tuple[Measurement, ...]:
        """The per-rank measurements of "forward", "backward" or "optimizer"."""
        if name not in PHASES:
            raise KeyError(f"no compute phase {name!r}; have: {', '.join(PHASES)}")
        rows = getattr(self.compute, f"{name}_s")
        return tuple(Measurement(t, f"{name} rank {r}") for r, t in enumerate(rows))

    def noise_warnings(self) -> list[str]:
        """Every measurement's noise warning (compute phases per rank, all-reduce per pattern and size)."""
        timings = [m for name in PHASES for m in self.phase(name)]
        timings += [
            Measurement(res.samples_s, f"{pat.pattern} {fmt_bytes(res.bytes)}")
            for pat in self.communication.patterns
            for res in pat.results
        ]
        return [w for w in (t.noise_warning() for t in timings) if w]


def load_profile(path: str | Path) -> Profile:
    """Read, check and view a profile file; ProfileError with one clear line when it is unusable."""
    return Profile(read_profile(path), str(Path(path)))


def profile_from_document(doc: Any, origin: str = "profile") -> Profile:
    """Check a parsed profile document as a whole profile and view it (ProfileError when unusable)."""
    return Profile(checked_profile(doc, origin), origin)

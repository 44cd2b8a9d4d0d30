"""What makes a file an rtmodel profile, defined once for its writer (the profiler) and its readers
(calibration, resume, synthetic profiles): its header (`{"schema": "rtmodel-profile/1"}`; profiles
written before it say `{"tool": "rtmodel-profile", "schema_version": 1}`), the sections, and the keys
that must match for a resume to reuse measurements.

Why one module: the version and the section lists were defined by the writer and the reader apart,
free to drift. The document's dataclasses, both ways, are `rtmodel_documents.profile_document`; the group
patterns a profile measures are in `rtmodel_documents.profile_patterns`.
"""

from __future__ import annotations

from datetime import UTC, datetime

KIND = "profile"  # the header names it "rtmodel-profile/<SCHEMA_VERSION>" (runtime_model.core.document_header)
SCHEMA_VERSION = 1
# Every complete profile holds these; the profiler checkpoints all but the workload, which it writes
# together with the shape.
REQUIRED_SECTIONS = ("shape", "workload", "compute", "communication")
CHECKPOINT_SECTIONS = ("shape", "compute", "communication")
# A resume reuses measurements only when these are the same as the earlier run's.
# (nccl_algo_env: measurements NCCL took with another NCCL_ALGO ran other algorithms)
SHAPE_KEYS = ("world_size", "ranks_per_node", "nodes", "node_names", "backend", "device", "nccl_algo_env")
WORKLOAD_KEYS = (
    "model", "model_args", "batch_per_rank", "bucket_cap_mb", "ddp_first_bucket_mb", "precision", "optimizer"
)
# shape.unmeasured_links: link class -> why the profile's patterns on it measured no real link of that
# class (ranks sharing one GPU, pretend nodes on one machine); calibration then fills it like a link the
# profile has no pattern for. Profiles from before it was recorded lack it: every link measured.
UNMEASURED_LINKS = "unmeasured_links"
# compute's phases under DDP with its exchanges skipped (optional; profiler.wrapped.measure_ddp_work)
DDP_WRAPPED_KEYS = ("ddp_forward_s", "ddp_backward_s", "ddp_optimizer_s")
LINK_CLASSES = ("intra", "inter")
# Set (to "1") by the local launcher for ranks of the nodes it pretends on one machine (--ranks-per-node):
# their "inter-node" exchange is no network. The emulated cluster's nodes (network namespaces joined by
# shaped veth links) do not set it: that link is real.
PRETEND_NODES_ENV = "RTMODEL_PRETEND_NODES"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def nccl_algo_from_env(value: str | None) -> str:
    """shape.nccl_algo_env (NCCL_ALGO's value) -> "ring", "tree" or "auto" (the two algorithms the model knows).

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

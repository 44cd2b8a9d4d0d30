"""What makes a file an rtmodel profile, defined once for its writer (the profiler) and its readers
(calibration, resume, synthetic profiles): the tool name, the schema version, the sections, and the
keys that must match for a resume to reuse measurements.

Why one module: the version and the section lists were defined by the writer and the reader apart,
free to drift; the group patterns a profile measures are in `rtmodel_util.profile_patterns`.
"""

from __future__ import annotations

from datetime import UTC, datetime

TOOL = "rtmodel-profile"
SCHEMA_VERSION = 1
# Every complete profile holds these; the profiler checkpoints all but the workload, which it writes
# together with the shape.
REQUIRED_SECTIONS = ("shape", "workload", "compute", "communication")
CHECKPOINT_SECTIONS = ("shape", "compute", "communication")
# A resume reuses measurements only when these are the same as the earlier run's.
# (nccl_algo_env: measurements NCCL took with another NCCL_ALGO ran other algorithms)
SHAPE_KEYS = ("world_size", "ranks_per_node", "nodes", "node_names", "backend", "device", "nccl_algo_env")
WORKLOAD_KEYS = ("model", "model_args", "batch_per_rank", "bucket_cap_mb", "ddp_first_bucket_mb")


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_document(created_utc: str | None = None) -> dict:
    """A profile's header, before any section: every writer (the profiler, synthetic profiles) starts here."""
    return {
        "tool": TOOL,
        "schema_version": SCHEMA_VERSION,
        "created_utc": created_utc or utc_now(),
        "complete": False,
        "sections_done": [],
    }

"""What makes a trace unusable, said in one line each (exit 2): the file, what it recorded, the run.

Why a module of its own: every check names the file and what to record instead, in the words of
torch.profiler's own options, so a user can fix the recording rather than read a traceback.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from runtime_model.core.errors import UserError

MAX_FILE_BYTES = 4 << 30  # larger than any trace a workstation parses in memory


class TraceError(UserError):
    """A trace file (or set of them) the model cannot use; the message says why, in one line."""


def check_file(path: Path) -> None:
    """A regular file named .json or .json.gz, as torch.profiler's exporters write them."""
    if not path.is_file():
        raise TraceError(
            f"--trace {path}: "
            + ("is not a regular file" if path.exists() else "cannot read it (no such file)")
        )
    if not (path.name.endswith(".json") or path.name.endswith(".json.gz")):
        raise TraceError(
            f"--trace {path}: expected a .json or .json.gz trace, as torch.profiler's "
            "tensorboard_trace_handler or export_chrome_trace writes"
        )
    if path.stat().st_size > MAX_FILE_BYTES:
        raise TraceError(
            f"--trace {path}: {path.stat().st_size:,} bytes is too large to read (profile fewer steps)"
        )


def check_document(path: Path, meta: dict, cpu_ranks: bool = False) -> tuple[int, int, str, int, str]:
    """(rank, world size, GPU name, GPU memory bytes, NCCL version) from the trace's header; CPU ranks
    (host_events.is_cpu_ranks) are named "CPU"; a GPU run traced without its GPU is refused."""
    if not isinstance(meta, dict):
        raise TraceError(f"--trace {path}: not a torch.profiler trace (no header)")
    devices = [d for d in meta.get("deviceProperties") or [] if isinstance(d, dict) and d.get("name")]
    if not devices and not cpu_ranks:
        raise TraceError(
            f"--trace {path}: recorded no GPU (CPU-only) of ranks that ran on GPUs (NCCL, CUDA launches): profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on the GPUs you train on"
        )
    if devices:
        name, _ = Counter(str(d["name"]) for d in devices).most_common(1)[0]
        memory = next(int(d.get("totalGlobalMem", 0)) for d in devices if str(d["name"]) == name)
    else:
        name, memory = "CPU", 0
    info = meta.get("distributedInfo") or {}
    rank, world = info.get("rank", 0), info.get("world_size", 1)
    if not isinstance(rank, int) or not isinstance(world, int) or not 0 <= rank < max(world, 1):
        raise TraceError(f"--trace {path}: its distributedInfo says rank {rank!r} of {world!r}")
    return rank, world, name, memory, str(info.get("nccl_version", ""))


def check_steps(path: Path, steps, frame, cpu_ranks: bool = False) -> None:
    """ProfilerStep spans from one process, each number once, with GPU work (CPU ranks: ops) launched
    inside them."""
    if steps.empty:
        raise TraceError(
            f"--trace {path}: no ProfilerStep#N spans: profile with schedule=torch.profiler.schedule(...) "
            "and call prof.step() once per iteration"
        )
    if steps["pid"].nunique() > 1 or steps["name_s"].duplicated().any():
        raise TraceError(
            f"--trace {path}: holds several processes' steps (ProfilerStep spans from {steps['pid'].nunique()} "
            "processes or repeated numbers): give one file per rank"
        )
    if cpu_ranks:
        if not ((frame["cat_s"] == "cpu_op") & (frame["iteration"] >= 0)).any():
            raise TraceError(f"--trace {path}: no ops inside its ProfilerStep spans (CPU ranks)")
        return
    on_gpu = frame["stream"] > 0
    launched = frame[on_gpu & (frame["iteration"] >= 0)]
    if launched.empty and on_gpu.any():
        raise TraceError(
            f"--trace {path}: its GPU work is not linked to the steps that launched it (no CUDA correlation "
            "ids): record it with torch.profiler, whose CUDA activity links each kernel to its launch"
        )
    if launched.empty:
        raise TraceError(
            f"--trace {path}: no GPU work inside its ProfilerStep spans (CPU-only): profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )


def check_same_run(traces) -> None:
    """Several ranks' traces: one each, of one world, recorded over the same time (one run)."""
    ranks = Counter(t.rank for t in traces)
    if twice := [r for r, k in ranks.items() if k > 1]:
        same = [t.path for t in traces if t.rank == twice[0]]
        raise TraceError(
            f"--trace: {' and '.join(same[:2])} are both rank {twice[0]}: give one file per rank"
        )
    worlds = {t.world_size for t in traces}
    if len(worlds) > 1:
        raise TraceError(f"--trace: the files come from different runs (world sizes {sorted(worlds)})")
    first = min(traces, key=lambda t: t.step_start_us[0] + t.clock_offset_us)
    for t in traces:
        if not _overlap(first, t):
            raise TraceError(
                f"--trace: {first.path} and {t.path} come from different runs (their steps do not overlap in time)"
            )


def _overlap(a, b) -> bool:
    """Do the two ranks' profiled spans overlap (with a step's slack for clocks between hosts)?"""
    slack = max(a.step_dur_us.max(), b.step_dur_us.max())
    a0, b0 = a.step_start_us[0] + a.clock_offset_us, b.step_start_us[0] + b.clock_offset_us
    a1 = a0 + a.step_start_us[-1] - a.step_start_us[0] + a.step_dur_us[-1]
    b1 = b0 + b.step_start_us[-1] - b.step_start_us[0] + b.step_dur_us[-1]
    return a0 <= b1 + slack and b0 <= a1 + slack

"""What makes a trace unusable, said in one line each (exit 2): the file, what it recorded, the run.

Why a module of its own: every check names the file and what to record instead, in the words of
torch.profiler's own options, so a user can fix the recording rather than read a traceback.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from runtime_model.core.errors import UserError

# 2 GiB of JSON, a plain file's size or a .gz's inflated size (trace_document counts it as it inflates): a
# torch.profiler trace of the few steps a schedule records is megabytes to hundreds of megabytes (HTA's
# 2-rank A100 DDP trace of 3 steps is 9.8 MB), and Python holds parsed JSON in about ten times its text.
MAX_DOCUMENT_BYTES = 2 << 30
# Files one --trace reads: one per rank of a run. Each costs seconds to parse; a sample of the ranks
# measures their spread as well as all of them (the spread is fitted, calibration/variation_fit).
MAX_TRACE_FILES = 1024


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
    if path.stat().st_size > MAX_DOCUMENT_BYTES:
        raise TraceError(
            f"--trace {path}: {path.stat().st_size:,} bytes is more than a trace reader holds (at most "
            f"{MAX_DOCUMENT_BYTES:,} bytes of JSON: profile fewer steps)"
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
        memory = next(int(d.get("totalGlobalMem") or 0) for d in devices if str(d["name"]) == name)
    else:
        name, memory = "CPU", 0
    # the header's types and bounds are trace_document's (checked before HTA parsed the file)
    info = meta.get("distributedInfo") or {}
    rank, world = info.get("rank", 0), info.get("world_size", 1)
    return rank, world, name, memory, str(info.get("nccl_version") or "")


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
    numbers = [int(re.search(r"\d+", name).group()) for name in steps["name_s"]]
    if backwards := next((i for i in range(1, len(numbers)) if numbers[i] <= numbers[i - 1]), None):
        raise TraceError(
            f"--trace {path}: its ProfilerStep spans run backwards in time (#{numbers[backwards]} starts after "
            f"#{numbers[backwards - 1]}): a reordered or time-reversed file, not a recording"
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


def check_distinct(files: list[Path]) -> None:
    """At most MAX_TRACE_FILES files, each another file: not the same path, the same file under another
    name (its device and inode) nor a copy (the same size and SHA-256), checked before any is parsed."""
    if len(files) > MAX_TRACE_FILES:
        raise TraceError(
            f"--trace: {len(files):,} files are more than one reading takes (at most {MAX_TRACE_FILES:,}: "
            "a sample of the ranks measures their spread)"
        )
    seen: dict = {}
    for f in files:
        check_file(f)
        try:
            st = f.stat()
            keys = [("inode", st.st_dev, st.st_ino), ("content", st.st_size, _digest(f))]
        except OSError as exc:
            raise TraceError(f"--trace {f}: cannot read it ({exc.strerror or exc})") from None
        for key in keys:
            if key in seen:
                how = "the same file" if key[0] == "inode" else "copies of one file"
                raise TraceError(f"--trace: {seen[key]} and {f} are {how}: give one file per rank, once")
            seen[key] = f


def _digest(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check_ranks(traces) -> None:
    """The traces read so far: one per rank, of one world (checked as each is read, before the next)."""
    last = traces[-1]
    for t in traces[:-1]:
        if t.rank == last.rank:
            raise TraceError(
                f"--trace: {t.path} and {last.path} are both rank {t.rank}: give one file per rank"
            )
        if t.world_size != last.world_size:
            raise TraceError(
                f"--trace: the files come from different runs (world sizes {sorted({t.world_size, last.world_size})})"
            )


def check_same_run(traces) -> None:
    """Several ranks' traces, one each of one world (check_ranks, as each was read), recorded over the same
    time (one run)."""
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

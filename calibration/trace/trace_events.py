"""One rank's torch.profiler (Kineto) trace, read with Holistic Trace Analysis into the few columns the
model needs: the steps, the GPU's work with the thread that launched it, and each collective's kind and
bytes.

Why HTA (the `[trace]` extra): Meta's maintained reader of exactly these files. It decodes the JSON (and
.gz), joins each GPU kernel to the runtime call that launched it (`index_correlation`) and reads the
communication arguments NCCL's kernels carry (`Collective name`, `In msg nelems`, `dtype`); walking the
JSON by hand would redo that. It stays out of the model: only this module imports it, lazily.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calibration.trace.gpu_work import GpuWork, dims_of, elements
from calibration.trace.trace_errors import TraceError
from runtime_model.core.physical_bounds import MAX_BUFFER_BYTES

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
STEP_NAME = re.compile(r"ProfilerStep\s*#\s*(\d+)")
# bytes of one element by the dtype names PyTorch writes into the trace (c10 ScalarType names)
DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "char": 1, "byte": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
}  # fmt: skip
ALL_REDUCE = "allreduce"
ANNOTATED_ALL_REDUCE = "nccl:all_reduce"  # older traces: the collective's size sits on this annotation
MAX_MESSAGE_BYTES = float(MAX_BUFFER_BYTES)  # a larger message is an overflowed count


@dataclass(frozen=True)
class RankTrace:
    """One rank's trace: where it came from, the run it belongs to, its steps and its GPU work."""

    path: str
    rank: int
    world_size: int
    gpu_name: str
    gpu_memory_bytes: int
    gpus_on_host: int  # the GPUs the trace's header lists (deviceProperties)
    host_name: str  # the header's host_name ("" in traces before it was written)
    nccl_version: str
    clock_offset_us: float  # what puts this file's times on the wall clock (Kineto's baseTimeNanoseconds)
    steps: tuple[int, ...]
    step_start_us: np.ndarray  # the host's ProfilerStep spans
    step_dur_us: np.ndarray
    gpu: GpuWork
    optimizer_us: tuple[tuple[float, float], ...]  # host spans of `Optimizer.step#...` annotations
    host_all_reduce: HostCalls  # DDP's all-reduce calls on autograd's thread, as the host recorded them
    on_cpu: bool = False  # CPU ranks (gloo, no GPU): `gpu` holds the host's ops (host_events)
    backend: str = ""  # distributedInfo's backend: nccl, gloo ("" where the header does not say)
    # the allocator's peak total over the trace (profile_memory=True: trace_memory.py); None: not recorded
    peak_allocated_bytes: float | None = None


@dataclass(frozen=True)
class HostCalls:
    """Collective calls as the host recorded them (`record_param_comms`): where one rank sends nothing
    (a world of one) they still say DDP's buckets and their bytes."""

    step: np.ndarray
    at_us: np.ndarray
    nbytes: np.ndarray


def read_rank_trace(path: Path) -> RankTrace:
    """Read one trace file; TraceError (one line) for anything the model cannot use (trace_errors)."""
    from calibration.trace.host_events import host_work, is_cpu_ranks
    from calibration.trace.trace_errors import check_document, check_steps

    meta, frame, names, peak = _parse(path)
    on_cpu = isinstance(meta, dict) and is_cpu_ranks(meta, frame, names)
    rank, world, gpu_name, memory, nccl = check_document(path, meta, on_cpu)
    on_host = len(meta.get("deviceProperties") or [])
    frame["name_s"] = frame["name"].map(names.__getitem__)
    frame["cat_s"] = frame["cat"].map(names.__getitem__)
    # the host's spans: on a GPU Kineto may repeat each step on the device's timeline (gpu_user_annotation)
    host_side = ~frame["cat_s"].str.startswith("gpu_")
    steps = frame[frame["name_s"].str.match(STEP_NAME) & host_side].sort_values("ts")
    check_steps(path, steps, frame, on_cpu)
    main = int(steps["tid"].iloc[0])
    gpu = host_work(frame, main) if on_cpu else _gpu_work(frame, main)
    numbers = tuple(int(STEP_NAME.match(n).group(1)) for n in steps["name_s"])
    if not on_cpu:
        _check_causal(path, gpu)
    host_calls = _host_all_reduce(frame, main)
    _check_message_bytes(path, np.r_[gpu.nbytes, host_calls.nbytes], memory, on_cpu)
    optimizer = frame[
        (frame["cat_s"] == "user_annotation") & frame["name_s"].str.startswith("Optimizer.step")
    ]
    return RankTrace(
        str(path),
        rank,
        world,
        gpu_name,
        memory,
        on_host,
        str(meta.get("host_name") or ""),
        nccl,
        float(meta.get("baseTimeNanoseconds") or 0) / 1e3,
        numbers,
        steps["ts"].to_numpy(dtype=float),
        steps["dur"].to_numpy(dtype=float),
        gpu,
        tuple(
            zip(
                optimizer["ts"].astype(float), (optimizer["ts"] + optimizer["dur"]).astype(float), strict=True
            )
        ),
        host_calls,
        on_cpu,
        str((meta.get("distributedInfo") or {}).get("backend") or ""),
        peak(memory, on_cpu),
    )


def _check_causal(path: Path, gpu: GpuWork) -> None:
    """A kernel runs after the host launched it (Kineto puts both on one clock): where most linked kernels
    start before their launch, the file's times were reversed or rewritten."""
    linked = ~np.isnan(gpu.launch_us)
    early = int((gpu.start_us[linked] < gpu.launch_us[linked]).sum())
    if early * 2 > int(linked.sum()):
        raise TraceError(
            f"--trace {path}: {early:,} of its {int(linked.sum()):,} GPU kernels start before the host launched "
            "them: a time-reversed or re-timed file, not a recording"
        )


def _check_message_bytes(path: Path, nbytes: np.ndarray, memory: int, on_cpu: bool) -> None:
    """A collective's message lives in the device's memory: at most the GPU's (its header's
    totalGlobalMem), and at most 2^40 bytes anywhere (MAX_MESSAGE_BYTES); NaN is a size not recorded."""
    bound = min(memory, MAX_MESSAGE_BYTES) if memory > 0 and not on_cpu else MAX_MESSAGE_BYTES
    said = np.nan_to_num(nbytes, nan=0.0)
    if said.size and said.max() > bound:
        whose = (
            f"the GPU's memory ({bound:,.0f} bytes)" if bound < MAX_MESSAGE_BYTES else f"{bound:,.0f} bytes"
        )
        raise TraceError(
            f"--trace {path}: a collective of {said.max():,.0f} bytes (In msg nelems x dtype, or Input Dims) is more "
            f"than {whose} can hold: not a recording"
        )


def _host_all_reduce(frame, main_tid: int) -> HostCalls:
    """`record_param_comms` all-reduces that autograd's thread issued (DDP's bucket hooks), with bytes."""
    if "collective_name" not in frame:
        calls = frame.iloc[0:0]
    else:
        calls = frame[
            (frame["name_s"] == "record_param_comms")
            & (frame["collective_name"].astype(str).str.lower() == ALL_REDUCE)
            & (frame["tid"] != main_tid)
        ]
    return HostCalls(
        calls["iteration"].to_numpy(dtype=int),
        calls["ts"].to_numpy(dtype=float),
        _message_bytes(calls),
    )


def _parse(path: Path):
    """HTA's parse of one file, read and checked first (trace_document: its size, its JSON, every field
    the reader uses), its chatter silenced; every way a file can fail becomes a TraceError. Last: the
    allocator's peak, as a function of the device's memory (trace_memory; known once the header is checked)."""
    from calibration.trace.trace_document import hta_parse, read_document
    from calibration.trace.trace_errors import check_file

    check_file(path)
    try:
        import hta.common.trace  # noqa: F401
    except ImportError:
        raise TraceError(
            "--trace needs Holistic Trace Analysis: pip install 'rtmodel-advisor[trace]'"
        ) from None
    doc = read_document(path)
    logging.getLogger("hta").setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # HTA's own deprecation notices from pandas: not the user's
            meta, frame, symbols = hta_parse(path, doc)
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, IndexError, ArithmeticError,
            RecursionError) as exc:  # fmt: skip
        raise TraceError(
            f"--trace {path}: not a readable torch.profiler trace ({_first_line(exc)})"
        ) from None
    from calibration.trace.trace_memory import peak_allocated_bytes

    def peak(memory: int, on_cpu: bool) -> float | None:
        return peak_allocated_bytes(path, doc, memory, on_cpu)

    return meta, frame, symbols.get_sym_table(), peak


def _gpu_work(frame, main_tid: int) -> GpuWork:
    """The GPU events with the thread that launched each and, for NCCL's kernels, the collective's kind
    and bytes (the kernel's own arguments; older traces put them on the `nccl:all_reduce` annotation
    that encloses the launch)."""
    gpu = frame[frame["cat_s"].isin(GPU_CATEGORIES) & (frame["stream"] > 0)]
    launch = gpu["index_correlation"].to_numpy()
    has_launch = launch > 0
    tids = np.full(len(gpu), -1)
    tids[has_launch] = frame.loc[launch[has_launch], "tid"].to_numpy()
    launched = np.full(len(gpu), np.nan)
    launched[has_launch] = frame.loc[launch[has_launch], "ts"].to_numpy(dtype=float)
    names = gpu["name_s"].str.lower()
    is_nccl = names.str.contains("nccl").to_numpy()
    collective = np.where(is_nccl, _collective_names(gpu, names), "")
    nbytes = np.where(is_nccl, _message_bytes(gpu), np.nan)
    missing = is_nccl & (collective == ALL_REDUCE) & np.isnan(nbytes)
    if missing.any():
        nbytes[missing] = _annotated_bytes(frame, launch[missing])
    return GpuWork(
        gpu["iteration"].to_numpy(dtype=int),
        gpu["ts"].to_numpy(dtype=float),
        (gpu["ts"] + gpu["dur"]).to_numpy(dtype=float),
        gpu["correlation"].to_numpy(dtype=np.int64),
        launched,
        tids == main_tid,
        collective,
        nbytes,
        gpu["stream"].to_numpy(dtype=int),
    )


def _collective_names(gpu, names) -> np.ndarray:
    """NCCL's `Collective name` argument, else the kernel's name (ncclKernel_AllReduce_RING_LL_...)."""
    given = gpu["collective_name"].astype(str).str.lower() if "collective_name" in gpu else None
    from_name = names.str.extract(r"nccl(?:dev)?kernel_([a-z]+)", expand=False).fillna("nccl")
    if given is None:
        return from_name.to_numpy()
    return np.where(given.isin(["", "-1", "nan", "none"]), from_name, given).astype(str)


def _message_bytes(gpu) -> np.ndarray:
    """`In msg nelems` x the dtype's bytes; NaN where either is missing."""
    if "in_msg_nelems" not in gpu or "msg_dtype" not in gpu:
        return np.full(len(gpu), np.nan)
    nelems = gpu["in_msg_nelems"].to_numpy(dtype=float)
    size = gpu["msg_dtype"].astype(str).str.lower().map(DTYPE_BYTES).to_numpy(dtype=float)
    out = nelems * size
    out[~(nelems > 0)] = np.nan
    return out


def _annotated_bytes(frame, launch_rows: np.ndarray) -> np.ndarray:
    """For each launch (a runtime call's row), the bytes of the `nccl:all_reduce` annotation on its thread
    that encloses it: the product of its `Input Dims` times the element's bytes."""
    notes = frame[frame["name_s"] == ANNOTATED_ALL_REDUCE]
    out = np.full(len(launch_rows), np.nan)
    if notes.empty or "input_dims" not in frame:
        return out
    for i, row in enumerate(launch_rows):
        if row <= 0:
            continue
        ts, tid = frame.at[row, "ts"], frame.at[row, "tid"]
        around = notes[(notes["tid"] == tid) & (notes["ts"] <= ts) & (notes["ts"] + notes["dur"] >= ts)]
        if len(around):
            out[i] = _dims_bytes(around["input_dims"].iloc[-1], around.get("input_type", None), around)
    return out


def _dims_bytes(dims, _types, around) -> float:
    """Elements of the first input (its dims' product) times its element's bytes (fp32 when unsaid)."""
    text = str(dims)
    numbers = dims_of(text.split("]")[0]) if text.startswith("[") else []
    if not numbers:
        return math.nan
    kind = str(around["input_type"].iloc[-1]) if "input_type" in around else "float"
    element = next((b for name, b in DTYPE_BYTES.items() if name in kind.lower()), 4)
    return elements(numbers) * element


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__

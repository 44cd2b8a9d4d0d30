"""A trace file read as data from anywhere: its bytes bounded, its JSON decoded, and every field the
reader uses checked for its type and for what a recording can hold, before Holistic Trace Analysis
sees it; each refusal is one line naming the file, the field and the bound (TraceError, exit 2).

Why before HTA: HTA trusts its input. A header field of the wrong type, a NaN duration, a string where
an integer belongs or nesting deep enough to exhaust the recursion limit end inside it (or inside
pandas, or inside the model's fits) in a traceback or a confident answer from nonsense; a small .gz can
inflate to gigabytes. Read here once, the document is handed to HTA as it is (`hta_parse`), so the
file is decompressed and decoded once.

The bounds, and why:
- trace_errors.MAX_DOCUMENT_BYTES, 2 GiB of JSON (a plain file's size, a .gz's inflated size, counted
  while it inflates, so a bomb is refused after inflating the cap, never held whole);
- timestamps within 2^53 us of the epoch (a float64 holds every microsecond exactly there: Kineto
  writes them as microseconds since the epoch or since the trace's base time, ~1.7e15 today);
- durations finite, >= 0 and at most a day (MAX_DURATION_US): an event of a profiled step, however
  slow, is not longer; the whole profiling window of a few steps is minutes;
- integer arguments (CUDA correlation ids, streams, `In msg nelems`) whole numbers that fit int64;
  `In msg nelems` at most 2^40 (no GPU holds 2^40 elements; the bytes are checked against the
  device's memory once the dtype is known: trace_events);
- the header's world size 1 .. 2^24 (the most GPUs rtmodel answers for, runtime_model.core.defaults),
  rank 0 .. world size - 1, a GPU's memory at most 1 TiB (the largest accelerators hold 288 GB),
  at most 1,024 GPUs listed on one host, the base time a non-negative int64 of nanoseconds;
- argument lists (`Input Dims`) nested at most MAX_ARG_DEPTH levels (a tensor list's dims are 3);
- a ProfilerStep's number at most 2^53, and at most MAX_STEPS (1,000) ProfilerStep spans in a file.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from pathlib import Path

from calibration.trace import trace_errors
from calibration.trace.trace_errors import TraceError
from rtmodel_documents.profile_checks import brief_value
from runtime_model.core.defaults import MAX_GPUS
from runtime_model.core.physical_bounds import (
    MAX_BUFFER_BYTES,
    MAX_EXACT_COUNT,
    MAX_GPUS_PER_NODE,
    MAX_STEP_S,
)

MAX_TIMESTAMP_US = float(MAX_EXACT_COUNT)
MAX_DURATION_US = MAX_STEP_S * 1e6
MAX_INT64 = (1 << 63) - 1
MAX_NELEMS = MAX_BUFFER_BYTES
MAX_GPU_MEMORY_BYTES = MAX_BUFFER_BYTES
MAX_DEVICES_PER_HOST = MAX_GPUS_PER_NODE
MAX_ARG_DEPTH = 8
MAX_STEP_NUMBER = MAX_EXACT_COUNT  # prof.step() counts a loop's steps from 0; HTA keeps them in float columns
# ProfilerStep spans in one file: a schedule records a few active steps (docs/trace.md: 3), and HTA matches
# every host event against every step in Python, so 10^5 steps of 10^5 events would run for hours
MAX_STEPS = 1000
_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")
_CHUNK = 1 << 20

# The event arguments the reader asks HTA for (ParserConfig with communication args), by their name in
# the trace, and the type each must have: HTA's own ValueType for them (Int, Float, String).
INT_ARGS = ("stream", "correlation", "bytes", "wait_on_stream", "wait_on_cuda_event_record_corr_id",
            "External id", "In msg nelems", "Out msg nelems", "Group size", "Rank")  # fmt: skip
FLOAT_ARGS = ("memory bandwidth (GB/s)",)
STRING_ARGS = ("Collective name", "dtype")
OBJECT_ARGS = ("Input Dims", "Input type", "Input Strides", "In split size", "Out split size")
ARG_BOUNDS = {"In msg nelems": (0, MAX_NELEMS), "Out msg nelems": (0, MAX_NELEMS)}


def read_document(path: Path, max_bytes: int | None = None) -> dict:
    """The trace's JSON document, bounded and checked (the header's and the timed events' fields)."""
    cap = trace_errors.MAX_DOCUMENT_BYTES if max_bytes is None else max_bytes
    doc = _decoded(path, _bytes(path, cap))
    if not isinstance(doc, dict):
        raise TraceError(
            f"--trace {path}: not a torch.profiler trace (its top level is {_kind(doc)}, not an object "
            "with traceEvents)"
        )
    check_header(path, doc)
    check_events(path, doc.get("traceEvents"))
    return doc


def _bytes(path: Path, cap: int) -> bytes:
    """The file's JSON text, at most `cap` bytes of it (inflated, for a .gz): a .gz is inflated once to
    count, in chunks and without keeping them, and then read, so a bomb costs time up to the cap and
    never its memory; every read stops one byte past the cap (a file that grew between them too)."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as stream:
                inflated = 0
                while chunk := stream.read(_CHUNK):
                    inflated += len(chunk)
                    if inflated > cap:
                        raise TraceError(_too_large(path, "inflates past the cap", cap))
        elif path.stat().st_size > cap:
            raise TraceError(_too_large(path, f"{path.stat().st_size:,} bytes", cap))
        with gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb") as stream:
            data = stream.read(cap + 1)
        if len(data) > cap:
            raise TraceError(_too_large(path, "grew past the cap while read", cap))
        return data
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(
            f"--trace {path}: not a readable torch.profiler trace (cannot read it: {_first_line(exc)})"
        ) from None


def _too_large(path: Path, what: str, cap: int) -> str:
    return (
        f"--trace {path}: {what}: more JSON than a trace reader holds (at most {cap:,} bytes; profile "
        "fewer steps, e.g. schedule(wait=1, warmup=2, active=3))"
    )


def _decoded(path: Path, data: bytes):
    try:
        return json.loads(data)
    except RecursionError:
        raise TraceError(
            f"--trace {path}: not a torch.profiler trace (nested too deeply for JSON to read)"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TraceError(
            f"--trace {path}: not a readable torch.profiler trace ({_first_line(exc)})"
        ) from None


def check_header(path: Path, doc: dict) -> None:
    """The header fields the reader uses, each of its type and within its bound where present."""
    info = doc.get("distributedInfo")
    if info is not None:
        if not isinstance(info, dict):
            _refuse(path, "distributedInfo", "an object", info)
        world = info.get("world_size", 1)
        _integer(path, "distributedInfo.world_size", world, 1, MAX_GPUS)
        _integer(path, "distributedInfo.rank", info.get("rank", 0), 0, world - 1)
        for key in ("backend", "nccl_version"):
            if info.get(key) is not None and not isinstance(info[key], str):
                _refuse(path, f"distributedInfo.{key}", "a string", info[key])
    devices = doc.get("deviceProperties")
    if devices is not None:
        if not isinstance(devices, list) or len(devices) > MAX_DEVICES_PER_HOST:
            _refuse(path, "deviceProperties", f"a list of at most {MAX_DEVICES_PER_HOST:,} GPUs", devices)
        for i, device in enumerate(devices):
            where = f"deviceProperties[{i}]"
            if not isinstance(device, dict):
                _refuse(path, where, "an object", device)
            if device.get("name") is not None and not isinstance(device["name"], str):
                _refuse(path, f"{where}.name", "a string", device["name"])
            if device.get("totalGlobalMem") is not None:
                _integer(path, f"{where}.totalGlobalMem", device["totalGlobalMem"], 0, MAX_GPU_MEMORY_BYTES)
    if doc.get("baseTimeNanoseconds") is not None:
        _number(
            path,
            "baseTimeNanoseconds",
            doc["baseTimeNanoseconds"],
            0,
            MAX_INT64,
            "a number of ns in [0, 2^63)",
        )
    if doc.get("host_name") is not None and not isinstance(doc["host_name"], str):
        _refuse(path, "host_name", "a string", doc["host_name"])


def check_events(path: Path, events) -> None:
    """Every event HTA keeps (one with a `dur` and a `cat`) has a string name and category, an integer
    or string pid and tid, a timestamp and a duration within their bounds, and the arguments the reader
    asks for of their types."""
    if not isinstance(events, list):
        what = "no traceEvents list" if events is None else f"traceEvents is {_kind(events)}, not a list"
        raise TraceError(f"--trace {path}: not a torch.profiler trace ({what})")
    timed = steps = 0
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            _refuse(path, f"traceEvents[{i}]", "an object (an event)", e)
        if e.get("dur") is None or e.get("cat") is None:
            continue  # flows, metadata and instants: HTA drops them
        timed += 1
        _event(path, i, e)
        steps += bool(_STEP.match(e["name"])) and not e["cat"].startswith("gpu_")
    if steps > MAX_STEPS:
        raise TraceError(
            f"--trace {path}: {steps:,} ProfilerStep spans are more than a trace reader matches its events "
            f"against (at most {MAX_STEPS:,}: profile a few steps, e.g. schedule(wait=1, warmup=2, active=3))"
        )
    if not timed:
        raise TraceError(
            f"--trace {path}: not a torch.profiler trace (none of its {len(events):,} events has a duration)"
        )


def _event(path: Path, i: int, e: dict) -> None:
    where = f"traceEvents[{i}]"
    for key in ("cat", "name"):
        if not isinstance(e.get(key), str):
            _refuse(path, f"{where}.{key}", "a string", e.get(key))
    for key in ("pid", "tid"):
        if not isinstance(e.get(key), int | str) or isinstance(e.get(key), bool):
            _refuse(path, f"{where}.{key}", "an integer or a string", e.get(key))
    step = _STEP.match(e["name"])
    if step and (len(step.group(1)) > 16 or int(step.group(1)) > MAX_STEP_NUMBER):
        _refuse(path, f"{where}.name", "ProfilerStep#N with N at most 2^53", e["name"])
    _number(
        path, f"{where}.ts", e.get("ts"), -MAX_TIMESTAMP_US, MAX_TIMESTAMP_US, "a number of us within 2^53"
    )
    _number(
        path, f"{where}.dur", e["dur"], 0, MAX_DURATION_US, "a number of us in [0, 86,400,000,000] (a day)"
    )
    args = e.get("args")
    if args is None:
        return
    if not isinstance(args, dict):
        _refuse(path, f"{where}.args", "an object", args)
    for key in INT_ARGS:
        if args.get(key) is not None:
            low, high = ARG_BOUNDS.get(key, (-MAX_INT64 - 1, MAX_INT64))
            _integer(path, f"{where}.args['{key}']", args[key], low, high)
    for key in FLOAT_ARGS:
        if args.get(key) is not None:
            _number(path, f"{where}.args['{key}']", args[key], -math.inf, math.inf)
    for key in STRING_ARGS:
        if args.get(key) is not None and not isinstance(args[key], str):
            _refuse(path, f"{where}.args['{key}']", "a string", args[key])
    for key in OBJECT_ARGS:
        if key in args and _depth(args[key]) > MAX_ARG_DEPTH:
            _refuse(path, f"{where}.args['{key}']", f"nested at most {MAX_ARG_DEPTH} levels", args[key])


def _depth(value) -> int:
    """How deep lists and objects nest in `value` (0 for a scalar), walked without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, list | dict):
            depth += 1
            if depth > MAX_ARG_DEPTH:
                return depth
            deepest = max(deepest, depth)
            stack.extend((v, depth) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def _integer(path: Path, field: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        if (low, high) == (-MAX_INT64 - 1, MAX_INT64):
            bound = "an integer (int64)"
        else:
            bound = f"an integer in [{low:,}, {high:,}]" if high >= low else "an integer"
        _refuse(path, field, bound, value)


def _number(path: Path, field: str, value, low: float, high: float, bound: str = "a finite number") -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        ok = ok and math.isfinite(value) and low <= value <= high
    except OverflowError:  # an integer beyond a float
        ok = False
    if not ok:
        _refuse(path, field, bound, value)


def _refuse(path: Path, field: str, requirement: str, value) -> None:
    raise TraceError(f"--trace {path}: {field} must be {requirement}, got {_shown(value)}")


def _shown(value) -> str:
    """A value as the refusal shows it: a container by its kind, a scalar as a profile's refusal does."""
    return _kind(value) if isinstance(value, list | dict) else brief_value(value, width=40)


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


def hta_parse(path: Path, doc: dict):
    """HTA's parse (meta, frame, symbols) of the document already read and checked: HTA 0.5 reads the
    file itself (trace_parser.parse_trace_dict, its JSON backend); within this call it is handed `doc`
    instead, so the bounds above hold for what it parses and the file is read once."""
    from unittest import mock

    from hta.common import trace_parser
    from hta.common.trace import parse_trace_file
    from hta.configs.parser_config import ParserBackend, ParserConfig

    config = ParserConfig.enable_communication_args(ParserConfig.get_default_cfg())
    config.set_parser_backend(ParserBackend.JSON)
    with mock.patch.object(trace_parser, "parse_trace_dict", lambda _path: doc):
        return parse_trace_file(str(path), config)

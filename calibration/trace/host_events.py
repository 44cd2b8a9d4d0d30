"""A trace of CPU ranks (DDP over gloo, no GPU): the host's own ops as the device's timeline.

Why: `rtmodel profile --trace-out` on a machine without GPUs, or a team's CPU training, records no
kernels; the ranks' compute is the ops their main thread ran (autograd runs a CPU backward on the thread
that called it, inside `autograd::engine::evaluate_function` spans) and their all-reduce is gloo's:
`gloo:all_reduce` spans on gloo's worker threads, each issued by a `c10d::allreduce_` call. Read that
way a CPU trace gives what a GPU trace gives (GpuWork), so the steps, buckets and checks are the same
code, as profile and validate treat CPU ranks as a cluster of their own.
"""

from __future__ import annotations

import re

import numpy as np

from calibration.trace.gpu_work import GpuWork, dims_of, elements

GLOO_PREFIX = "gloo:"
BACKWARD_OP = "autograd::engine::evaluate_function"
CALL = re.compile(r"c10d::([a-z_]+?)_?$")  # c10d::allreduce_ -> allreduce: the call that issued a gloo span
# bytes of one element by the `Input type` names PyTorch writes on the gloo span (c10 ScalarType names)
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::half": 2, "c10::bfloat16": 2, "long int": 8, "int": 4}


def is_cpu_ranks(meta: dict, frame, names) -> bool:
    """No GPU in the header, no CUDA launch and not NCCL: the ranks ran on CPUs (a GPU run traced without
    ProfilerActivity.CUDA still launched kernels, and is refused as such)."""
    if [d for d in meta.get("deviceProperties") or [] if isinstance(d, dict) and d.get("name")]:
        return False
    if str((meta.get("distributedInfo") or {}).get("backend", "")).lower() == "nccl":
        return False
    cats = {names[c] for c in frame["cat"].unique()}
    return not any(c.startswith(("cuda_", "kernel", "gpu_")) for c in cats)


def host_work(frame, main_tid: int):
    """GpuWork of a CPU rank: its ops (the main thread's and autograd's) as compute, gloo's spans as the
    collectives, each launched when its c10d call issued it (the compute before that call has run)."""
    gloo = frame["name_s"].str.startswith(GLOO_PREFIX)
    gloo_tids = set(frame.loc[gloo, "tid"])
    ops = frame[(frame["cat_s"] == "cpu_op") & ~frame["tid"].isin(gloo_tids) & (frame["iteration"] >= 0)]
    spans = frame[gloo & (frame["iteration"] >= 0)].sort_values("ts")
    backward = ops["name_s"].str.startswith(BACKWARD_OP).to_numpy()
    kinds = spans["name_s"].str.slice(len(GLOO_PREFIX)).str.replace("_", "").to_numpy(dtype=str)
    launch, by_backward = _issued(ops, spans, kinds)
    start = np.r_[ops["ts"].to_numpy(dtype=float), spans["ts"].to_numpy(dtype=float)]
    launch_us = np.r_[start[: len(ops)], launch]
    return GpuWork(
        np.r_[ops["iteration"].to_numpy(dtype=int), spans["iteration"].to_numpy(dtype=int)],
        start,
        start + np.r_[ops["dur"].to_numpy(dtype=float), spans["dur"].to_numpy(dtype=float)],
        np.argsort(np.argsort(launch_us, kind="stable"), kind="stable").astype(np.int64),
        launch_us,
        np.r_[(ops["tid"].to_numpy() == main_tid) & ~backward, ~by_backward],
        np.r_[np.full(len(ops), "", dtype=object), kinds].astype(str),
        np.r_[np.full(len(ops), np.nan), _span_bytes(spans)],
        np.zeros(len(ops) + len(spans), dtype=int),
    )


def _issued(ops, spans, kinds) -> tuple[np.ndarray, np.ndarray]:
    """For each gloo span (in start order): when its c10d call issued it (the earliest unmatched call of
    its kind at or before its start; else its start) and whether backward issued it (DDP's hooks)."""
    names = ops["name_s"].to_numpy(dtype=str)
    ts = ops["ts"].to_numpy(dtype=float)
    back = ops[ops["name_s"].str.startswith(BACKWARD_OP)]
    b0 = back["ts"].to_numpy(dtype=float)
    b1 = b0 + back["dur"].to_numpy(dtype=float)
    calls: dict[str, list[float]] = {}
    for name, t in sorted(zip(names, ts, strict=True), key=lambda x: x[1]):
        match = CALL.match(name)
        if match:
            calls.setdefault(match.group(1).replace("_", ""), []).append(t)
    launch = spans["ts"].to_numpy(dtype=float).copy()
    taken = dict.fromkeys(calls, 0)
    for i, kind in enumerate(kinds):
        queue, k = calls.get(kind, []), taken.get(kind, 0)
        if k < len(queue) and queue[k] <= launch[i]:
            launch[i], taken[kind] = queue[k], k + 1
    inside = np.array([bool(((b0 <= t) & (t <= b1)).any()) for t in launch], dtype=bool)
    return launch, inside


def _span_bytes(spans) -> np.ndarray:
    """A gloo span's bytes: its first input's dims' product times the element's bytes (NaN unsaid)."""
    out = np.full(len(spans), np.nan)
    if "input_dims" not in spans:
        return out
    types = spans["input_type"] if "input_type" in spans else [""] * len(spans)
    for i, (dims, kind) in enumerate(zip(spans["input_dims"], types, strict=True)):
        numbers = dims_of(str(dims).split("]")[0])
        element = ELEMENT_BYTES.get(_first(kind).lower())
        if numbers and element:
            out[i] = elements(numbers) * element
    return out


def _first(value) -> str:
    """The first name in an `Input type` cell (a list, or its text as HTA keeps it)."""
    if isinstance(value, list | tuple | np.ndarray):
        return str(value[0]) if len(value) else ""
    found = re.findall(r"'([^']*)'|\"([^\"]*)\"", str(value))
    return next((a or b for a, b in found), str(value))

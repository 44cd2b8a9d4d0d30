"""Small torch.profiler (Kineto) trace documents for the bad-trace cases: each a minimal real-shaped trace
with one thing wrong (no GPU, no steps, two processes, an unknown GPU, another run's clock).

Why synthetic: the failures need traces that are otherwise well-formed; the real traces under
tests/data/traces serve the cases that must succeed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

REAL_A100 = Path(__file__).parent / "data" / "traces" / "hta-a100x2-rank0.json.gz"
DAY_NS = 86_400 * 10**9


def kineto_trace(
    gpu: str | None = "NVIDIA A100-SXM4-80GB",
    rank: int = 0,
    world: int = 1,
    base_ns: int = 1_700_000_000 * 10**9,
    steps: int = 2,
    pids: tuple[int, ...] = (1,),
    step_spans: bool = True,
    linked: bool = True,
) -> str:
    """A trace of `steps` ProfilerSteps per process in `pids`, each launching one kernel (none when `gpu`
    is None: a CPU-only recording); without `step_spans` the same work with no ProfilerStep around it;
    without `linked` no CUDA correlation ids join a kernel to its launch."""
    events = []
    for pid in pids:
        for i in range(steps):
            t0, corr = 1000.0 * i, (100 * pid + i) if linked else None
            if step_spans:
                events.append(_x("user_annotation", f"ProfilerStep#{i + 1}", pid, pid, t0, 900.0))
            events.append(_x("cpu_op", "aten::mm", pid, pid, t0 + 10, 50.0))
            if gpu is not None:
                events.append(
                    _x("cuda_runtime", "cudaLaunchKernel", pid, pid, t0 + 20, 5.0, correlation=corr)
                )
                events.append(
                    _x("kernel", "gemm", 0, 7, t0 + 30, 400.0, correlation=corr, stream=7, device=0)
                )
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "traceEvents": events}
    if gpu is not None:
        doc["deviceProperties"] = [{"id": 0, "name": gpu, "totalGlobalMem": 85_000_000_000}]
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return json.dumps(doc)


def _x(cat, name, pid, tid, ts, dur, **args) -> dict:
    args = {k: v for k, v in args.items() if v is not None}
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def truncated_real_trace() -> bytes:
    """The real A100 trace cut at 40 % of its bytes (a copy interrupted mid-transfer)."""
    data = REAL_A100.read_bytes()
    return data[: len(data) * 2 // 5]


def gzipped(text: str) -> bytes:
    return gzip.compress(text.encode())


SIZE_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "In msg size", "Out msg size", "dtype",
             "Group size", "Input Dims", "Input type", "Input Strides")  # fmt: skip


def without_collective_sizes(data: bytes) -> bytes:
    """A gzipped trace as PyTorch before 2.0 wrote it without record_shapes: no collective's name or
    size on NCCL's kernels, record_param_comms or the nccl:all_reduce annotations (the same events)."""
    doc = json.loads(gzip.decompress(data))
    for event in doc["traceEvents"]:
        for key in SIZE_ARGS:
            (event.get("args") or {}).pop(key, None)
    return gzipped(json.dumps(doc))


def ddp_trace(allreduce_us: list[tuple[float, float]], gap_us: float = 1500.0, sizes: bool = True) -> str:
    """A rank-0-of-2 A100 DDP trace, one step per row of `allreduce_us` (two buckets' NCCL all-reduce
    times), each step laid end to end on the GPU: `gap_us` with nothing on it (the loop waiting for
    data), forward, a backward kernel, a second one under which bucket 1's all-reduce runs (no longer
    than it), bucket 2's all-reduce alone, the optimizer. So a step's idle share is gap / its length and
    its all-reduce the row's sum. Without `sizes` the kernels carry no collective name or size."""
    fwd, bwd, opt = 2000.0, 1500.0, 800.0
    main, autograd, events, t, corr = 1, 2, [], 0.0, 1000
    for step, (ar1, ar2) in enumerate(allreduce_us, start=1):
        assert ar1 <= bwd, "bucket 1 must hide under the second backward kernel"
        length = gap_us + fwd + 2 * bwd + ar2 + opt
        events.append(_x("user_annotation", f"ProfilerStep#{step}", main, main, t, length - 1.0))
        plan = [  # (launching thread, kernel name, stream, start, duration, bucket bytes or None)
            (main, "gemm_fwd", 7, t + gap_us, fwd, None),
            (autograd, "gemm_bwd", 7, t + gap_us + fwd, bwd, None),
            (autograd, NCCL_ALL_REDUCE, 20, t + gap_us + fwd + bwd, ar1, 4 * 3_000_000),
            (autograd, "gemm_bwd", 7, t + gap_us + fwd + bwd, bwd, None),
            (autograd, NCCL_ALL_REDUCE, 20, t + gap_us + fwd + 2 * bwd, ar2, 4 * 5_000_000),
            (main, "adam", 7, t + gap_us + fwd + 2 * bwd + ar2, opt, None),
        ]
        for tid, name, stream, start, dur, nbytes in plan:
            corr += 1
            launch = t + 1.0 + (corr % 100) * 0.01 if tid == main else t + gap_us + fwd + (corr % 100) * 0.01
            events.append(_x("cuda_runtime", "cudaLaunchKernel", 1, tid, launch, 0.5, correlation=corr))
            args = {"correlation": corr, "stream": stream, "device": 0}
            if nbytes is not None and sizes:
                args |= {"Collective name": "allreduce", "In msg nelems": nbytes // 4, "dtype": "Float"}
            events.append(_x("kernel", name, 0, stream, start, dur, **args))
        t += length
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000 * 10**9, "traceEvents": events,
           "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_000_000_000}],
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}}  # fmt: skip
    return json.dumps(doc)


NCCL_ALL_REDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"

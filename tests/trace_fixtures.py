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

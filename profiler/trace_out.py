"""`rtmodel profile --trace-out DIR`: a torch.profiler trace of this rank's DDP training, as a team would
record its own loop, written where `rtmodel advise --trace DIR` reads it.

Why record it from the profile run: the same workload, recipe and buckets the profile measured, traced
the way the user's own loop is (docs/trace.md), so the trace path can be checked against the profile on
the same cluster. DDP here exchanges for real (its default hooks, unlike measure_ddp_work's noop one).

DIR is an output like any other (rtmodel_util.files): checked before any rank starts
(`check_trace_out`), locked by the process that writes the profile, each rank's trace written whole or
not at all (`write_trace`: on a full disk no truncated trace remains). A rerun into the same DIR
replaces what an earlier run of rtmodel left there: each rank writes `rank<i>.pt.trace.json.gz`, and
every earlier rtmodel trace (`rank<i>[.<ms>].pt.trace.json[.gz]`, however many ranks that run had) is
removed just before this run traces, by every rank before a barrier, so DIR never mixes two runs (which
`rtmodel advise --trace DIR` refuses: "both rank 0"). Why replace rather than refuse: `--trace-out DIR`
names the traces of this profile, as `--out FILE` names its profile, and `--out` replaces its file; a
job script rerun or requeued must not stop at a DIR its own earlier run filled. Only rtmodel's own
trace names are ever removed; a DIR holding other .json traces (which advise would read beside ours)
is refused before the run. A resumed profile whose compute was already measured traces nothing and
leaves DIR as its earlier run wrote it.
"""

from __future__ import annotations

import gzip
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from rtmodel_util.files import OutputPathError, check_output_dir, write_atomic

WAIT, WARMUP, ACTIVE = 1, 2, 3  # the schedule docs/trace.md shows a user
TRACE_SUFFIX = ".pt.trace.json.gz"
FLAG = "--trace-out"
# rtmodel's own trace files: rank<i>.pt.trace.json.gz now, rank<i>.<ms>.pt.trace.json.gz before (torch's
# tensorboard_trace_handler names); what `advise --trace DIR` reads: every .json or .json.gz in DIR
OURS = re.compile(r"rank[0-9]+(\.[0-9]+)?\.pt\.trace\.json(\.gz)?")
READ_BY_ADVISE = (".json", ".json.gz")


def trace_path(out_dir: str | os.PathLike, rank: int) -> Path:
    """Where `rank` writes its trace in DIR."""
    return Path(out_dir) / f"rank{rank}{TRACE_SUFFIX}"


def check_trace_out(trace_out: str | os.PathLike, out: str | os.PathLike, inputs: dict | None = None) -> Path:
    """`--trace-out DIR` checked before any rank starts (rtmodel_util.files.check_output_dir: not empty, not
    an existing file or device, writable, not --out nor another input); and, since `rtmodel advise --trace
    DIR` reads every .json there, neither the profile (--out) inside DIR nor other .json traces in it.
    OutputPathError (one line, exit 2) otherwise."""
    d = check_output_dir(trace_out, FLAG, {"--out": out, **(inputs or {})})
    label = f"{FLAG} {os.fspath(trace_out)}"
    if Path(os.path.realpath(out)).parent == Path(os.path.realpath(d)):
        raise OutputPathError(
            f"{label} holds the profile --out {os.fspath(out)}; `rtmodel advise --trace DIR` reads every .json "
            "there: give the traces a directory of their own"
        )
    if d.is_dir():
        other = sorted(
            f.name for f in d.iterdir() if f.name.endswith(READ_BY_ADVISE) and not OURS.fullmatch(f.name)
        )
        if other:
            shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
            raise OutputPathError(
                f"{label} holds other traces ({shown}) that `rtmodel advise --trace DIR` would read beside "
                "this run's: give an empty or new directory"
            )
    return d


def remove_earlier_traces(out_dir: str | os.PathLike) -> list[str]:
    """Remove rtmodel's own traces an earlier run left in DIR (never another file); their names."""
    gone = []
    for f in Path(out_dir).iterdir():
        if OURS.fullmatch(f.name) and not f.is_dir():
            f.unlink(missing_ok=True)  # another rank (a shared DIR) may have removed it first
            gone.append(f.name)
    return gone


def write_trace(prof, path: Path) -> None:
    """`prof`'s trace at `path` as gzipped Chrome JSON (what torch's tensorboard_trace_handler writes), whole
    or not at all: exported to a hidden temp file beside it (not a .json name: advise never reads it),
    removed whatever happens, then written through rtmodel_util.files.write_atomic."""
    fd, raw = tempfile.mkstemp(dir=path.parent, prefix=".rtmodel-", suffix=".tmp")
    os.close(fd)
    try:
        prof.export_chrome_trace(raw)
        data = gzip.compress(Path(raw).read_bytes())
    finally:
        Path(raw).unlink(missing_ok=True)
    write_atomic(path, data)


# Kineto (torch.profiler's C++ side) prints `USDT: ... profiler_start/stop` (and `STAGE:` lines) on stdout at
# every trace; its Logger drops messages below KINETO_LOG_LEVEL, read once, at the process's first profiler
# use. USDT is its highest level (5 in torch 2.13's kineto), so 6 silences them all: set under --quiet only,
# before the profiler starts, unless the user set it.
KINETO_QUIET_LEVEL = "6"


def record_ddp_trace(
    make_workload: Callable[[], object], recipe, bucket_cap_mb: float, out_dir: str, rank: int,
    say: Callable[[str], None] | None = None, quiet: bool = False,
) -> Path:  # fmt: skip
    """Trace ACTIVE DDP iterations after WAIT + WARMUP into `out_dir` (trace_path: one per rank), once
    every rank has removed the traces an earlier run left there (the module's doc). quiet: Kineto's own
    lines silenced too (KINETO_QUIET_LEVEL)."""
    if quiet:
        os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET_LEVEL)
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule

    from rtmodel_harness.buckets import trainable_params
    from rtmodel_harness.ddp_args import ddp_kwargs
    from rtmodel_harness.distributed import barrier
    from rtmodel_harness.recipe import backward, optimizer_step

    workload = make_workload()
    device = workload.device
    model = DistributedDataParallel(workload.model, **ddp_kwargs(device, bucket_cap_mb))
    scaler = recipe.prepare(device)
    optimizer = workload.make_optimizer(trainable_params(model), lr=1e-4, recipe=recipe)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)  # checked on rank 0's machine; another node's may need it made
    remove_earlier_traces(out)
    barrier(device)  # every rank's removal before any rank writes: DIR never mixes two runs
    path = trace_path(out, rank)
    with profile(
        activities=activities,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        on_trace_ready=lambda p: write_trace(p, path),
        record_shapes=True,
    ) as prof:
        for it in range(WAIT + WARMUP + ACTIVE):
            batch = workload.make_batch(it)
            with recipe.autocast(device):
                loss = workload.loss(model, batch)
            backward(loss, scaler)
            optimizer_step(optimizer, scaler)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            prof.step()
    if say:
        say(f"trace: {ACTIVE} DDP iterations traced into {out}")
    return out

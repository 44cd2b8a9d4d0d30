"""GPU compute benchmark (issue 24): eager training iterations of the reference models on one GPU, measured
against the runtime model's compute prediction (runtime_model/prediction/gpu_compute.py, presets.iteration_work).

    python -m benchmarks.gpu_compute                          # one GPU, ~2 min, benchmarks/results/gpu-compute
    python -m benchmarks.gpu_compute --device cpu --tiny --out-dir /tmp/g   # the CPU smoke run (seconds)
    python -m benchmarks.gpu_compute --points transformer-base:3125:fp16:ddp,resnet50:64:tf32:bare
    python -m benchmarks.gpu_compute --repeats 2 --budget-s 300   # two passes, the second reversed

Per point (model, units per GPU, precision fp16|bf16|tf32, wrapper bare|ddp; the paper's recipe, see
benchmarks/gpu_compute_point.py):
- wall_ms: median over timed iterations (after warm-up) of one iteration, synchronized at its ends;
- host_ms per phase (forward, backward, scaler, optimizer; `wait` = the recipe's own syncs): perf_counter
  between phase switches, no synchronization inside the iteration other than the recipe's, so each
  issue phase is the host's time to issue it (a device-bound point adds launch-queue back-pressure:
  read its device_busy_share);
- ops per phase: kernel-launching aten ops as the presets count them (profiler.op_tally under a
  TorchDispatchMode, one extra iteration); host_us_per_op = host time / ops, the figure gpus.toml's
  dispatch_us stands for. Clean at host-bound points (small batches), an upper bound at device-bound ones;
- launches per phase and device_busy_ms (union of kernel/memcpy/memset intervals per iteration) from
  torch.profiler over 1-2 more iterations (null on CPU);
- prediction: the preset GPU named by torch.cuda.get_device_name (H100 on CPU, to exercise the path) with
  its dispatch_us replaced by this host's `python -m profiler.opcount --dispatch` figure (measured once);
  bare = max(host, device) of forward+backward, plus the optimizer's segment when a GradScaler syncs
  before it (else one segment); ddp = ddp_compute's forward+backward+optimizer. error = (pred - meas) / meas.
torch.backends.cudnn.benchmark stays at its default (False), as in the paper's scripts. Results are written
after every point (JSON + README.md table), so a killed run keeps what it measured; --budget-s skips the
points that would not finish in time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.gpu_compute_passes import passes
from benchmarks.gpu_compute_predict import derive, gpu_preset_for, predict
from benchmarks.gpu_compute_report import render_readme, render_table

RESULTS = Path(__file__).resolve().parent / "results" / "gpu-compute"
PRECISIONS = ("fp16", "bf16", "tf32")
WRAPPERS = ("bare", "ddp")
TINY_WIDTH_DIV = 16
DEFAULT_BUDGET_S = 135.0  # the lent machine's 150 s, less interpreter start and teardown
DEFAULT_POINTS = [
    *(("transformer-base", u, p, w) for u in (391, 3125, 25000) for p in ("fp16", "tf32") for w in WRAPPERS),
    ("transformer-big", 25000, "fp16", "bare"),
    ("gpt2-small", 30 * 1024, "fp16", "bare"),
    ("gpt2-small", 30 * 1024, "bf16", "bare"),
    *(("resnet50", u, p, "bare") for u in (64, 256) for p in ("fp16", "tf32")),
    ("transformer-xl-base", 6144, "fp16", "bare"),
]
TINY_POINTS = [  # every model (but -big, the same code as -base), precision and wrapper once
    ("transformer-base", 64, "fp16", "bare"),
    ("transformer-base", 64, "fp16", "ddp"),
    ("transformer-base", 64, "tf32", "ddp"),
    ("gpt2-small", 64, "bf16", "bare"),
    ("resnet50", 2, "tf32", "bare"),
    ("transformer-xl-base", 192, "tf32", "bare"),  # CPU fp16 matmuls are slow
]


def parse_points(spec: str) -> list[tuple[str, int, str, str]]:
    """'model:units:precision:wrapper,...' -> points; ValueError with a one-line reason."""
    from rtmodel_harness.reference_models import UNITS

    points = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        parts = item.split(":")
        if len(parts) != 4:
            raise ValueError(f"--points {item!r}: want model:units:precision:wrapper")
        model, units, precision, wrapper = parts
        if model not in UNITS:
            raise ValueError(f"--points {item!r}: unknown model {model!r}; choose from {', '.join(UNITS)}")
        if not units.isdigit() or int(units) < 1:
            raise ValueError(f"--points {item!r}: units must be a positive integer")
        if precision not in PRECISIONS or wrapper not in WRAPPERS:
            raise ValueError(
                f"--points {item!r}: precision is one of {PRECISIONS}, wrapper one of {WRAPPERS}"
            )
        points.append((model, int(units), precision, wrapper))
    if not points:
        raise ValueError("--points is empty")
    return points


def host_cpu_model() -> str | None:
    """The host CPU's model name (/proc/cpuinfo), as every committed GPU result names it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def header(device, argv: list[str], tiny: bool, budget_s: float) -> dict:
    import torch

    from rtmodel_harness.distributed import nccl_version

    cuda = device.type == "cuda"
    props = torch.cuda.get_device_properties(device) if cuda else None
    return {
        "gpu": props.name if props else None,
        "gpu_memory_gib": props.total_memory / 2**30 if props else None,
        "gpu_preset": gpu_preset_for(
            props.name if props else None, props.total_memory / 2**30 if props else 0
        ),
        "host_cpu": host_cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": nccl_version() if cuda else None,
        "python": sys.version.split()[0],
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(["python -m benchmarks.gpu_compute", *argv]),
        "device": str(device),
        "tiny": tiny,
        "width_div": TINY_WIDTH_DIV if tiny else 1,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "tf32_matmul": True,
        "budget_s": budget_s,
        "torch_threads": torch.get_num_threads(),
    }


@contextmanager
def process_group(device):
    """A world-size-1 process group for DDP (nccl on CUDA, gloo on CPU), on a FileStore in a temp dir.
    Yields None, or why it could not start (then the DDP points fail and the bare ones still run)."""
    import torch.distributed as dist

    with tempfile.TemporaryDirectory(prefix="gpu-compute-") as tmp:
        try:
            store = dist.FileStore(str(Path(tmp) / "store"), 1)
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo", store=store, rank=0, world_size=1
            )
        except Exception as exc:  # noqa: BLE001 - the run on a lent GPU is once: keep the bare points
            yield f"process group: {type(exc).__name__}: {exc}"
            return
        try:
            yield None
        finally:
            try:
                dist.destroy_process_group()
            except Exception as exc:  # noqa: BLE001 - every result is written already
                print(f"warning: destroy_process_group: {exc}", file=sys.stderr)


def _dispatch(tiny: bool) -> dict:
    """This host's dispatch cost per op as gpus.toml measures it (profiler.opcount --dispatch)."""
    from profiler.opcount import dispatch_us_per_op

    start = time.perf_counter()
    us, ops = dispatch_us_per_op("transformer-base", amp=True, repeats=5 if tiny else 30)
    return {"model": "transformer-base", "amp": True, "us_per_op": us, "timed_ops": ops,
            "seconds": time.perf_counter() - start}  # fmt: skip


def _dispatch_again(doc: dict, tiny: bool) -> None:
    """Re-measure the dispatch figure at the start of a later pass (doc["dispatch"]["passes_us_per_op"]);
    predictions keep the first pass's, as a user measures once."""
    if "us_per_op" not in doc["dispatch"]:  # the first measurement failed: nothing to compare with
        return
    try:
        again = _dispatch(tiny)["us_per_op"]
    except Exception:  # noqa: BLE001 - a diagnostic only
        again = None
    doc["dispatch"].setdefault("passes_us_per_op", [doc["dispatch"]["us_per_op"]]).append(again)


def _write(doc: dict, out_dir: Path) -> None:
    from rtmodel_util.files import write_atomic, write_json_atomic

    write_json_atomic(out_dir / "gpu-compute.json", doc)
    write_atomic(out_dir / "README.md", render_readme(doc))


def _progress(i: int, n: int, p: dict) -> str:
    def f(x, spec=".1f"):
        return "-" if x is None else format(x, spec)

    what = f"[{i}/{n}] {p['model']} {p['units']} {p['precision']} {p['wrapper']}"
    if "wall_ms" not in p:
        return f"{what}: failed ({next(iter(p.get('errors', {}).values()), '?')}) in {p['seconds']:.1f} s"
    return (f"{what}: wall {f(p['wall_ms'])} ms, device {f(p.get('device_busy_ms'))} ms, "
            f"issue {f(p.get('host_issue_ms'))} ms, predicted {f(p.get('predicted_ms'))} ms "
            f"({f(p.get('error_pct'), '+.0f')} %) in {p['seconds']:.1f} s")  # fmt: skip


def _measure(spec: dict, device, tiny: bool, gpu: str, dispatch_us: float | None, group_error) -> dict:
    """One point measured, predicted and derived; a DDP point fails at once without a process group."""
    from benchmarks.gpu_compute_point import measure_point

    t0 = time.monotonic()
    if spec["wrapper"] == "ddp" and group_error:
        point = {**spec, "errors": {"point": group_error}}
    else:
        width_div = TINY_WIDTH_DIV if tiny else 1
        args = (spec["model"], spec["units"], spec["precision"], spec["wrapper"], device, width_div, tiny)
        point = {**spec, **measure_point(*args)}
    try:
        us = dispatch_us if dispatch_us is not None else _preset_dispatch_us(gpu)
        prediction = predict(spec["model"], spec["units"], spec["precision"], gpu, us)
    except Exception as exc:  # noqa: BLE001 - keep the measurement
        point.setdefault("errors", {})["prediction"] = f"{type(exc).__name__}: {exc}"
        prediction = None
    derive(point, prediction)
    point["seconds"] = time.monotonic() - t0
    return point


def run(
    points,
    device,
    tiny: bool,
    out_dir: Path,
    budget_s: float,
    argv: list[str],
    started: float,
    repeats: int = 1,
) -> dict:
    """Measure the points in order, `repeats` passes (gpu_compute_passes), writing results after each;
    skip what the budget cannot fit."""
    import torch

    from benchmarks.gpu_compute_point import units_run

    torch.backends.cuda.matmul.allow_tf32 = True  # the paper's scripts, for every precision
    torch.backends.cudnn.allow_tf32 = True
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:  # a smoke run: one thread stays fast on a shared or small machine (threads oversubscribe)
        torch.set_num_threads(1)
    doc = {"header": header(device, argv, tiny, budget_s) | {"repeats": repeats}, "dispatch": None, "points": [],
           "skipped": []}  # fmt: skip
    try:
        doc["dispatch"] = _dispatch(tiny)
        dispatch_us = doc["dispatch"]["us_per_op"]
    except Exception as exc:  # noqa: BLE001 - keep measuring; predict with the preset's own figure
        doc["dispatch"], dispatch_us = {"error": f"{type(exc).__name__}: {exc}"}, None
    print(f"dispatch on this CPU: {dispatch_us} us/op", flush=True)
    needs_group = any(w == "ddp" for *_, w in points)
    with process_group(device) if needs_group else _nothing() as group_error:
        took: dict[str, list[float]] = {}
        schedule = passes(points, repeats)
        for i, (pass_index, (model, units, precision, wrapper)) in enumerate(schedule, 1):
            if pass_index and schedule[i - 2][0] != pass_index:  # the host's CPU again: did it move?
                _dispatch_again(doc, tiny)
            spec = {"model": model, "units_requested": units, "units": units_run(model, units),
                    "precision": precision, "wrapper": wrapper, "pass": pass_index}  # fmt: skip
            # median: the first point also pays one-time costs (CUDA context, CUPTI, NCCL)
            done_s = took.get(model) or [s for v in took.values() for s in v] or [0.0]
            if time.monotonic() - started + 1.5 * statistics.median(done_s) > budget_s:
                doc["skipped"].append({**spec, "reason": f"budget {budget_s:g} s"})
                print(
                    f"[{i}/{len(schedule)}] {model} {units} {precision} {wrapper}: skipped (budget)",
                    flush=True,
                )
                continue
            point = _measure(spec, device, tiny, doc["header"]["gpu_preset"], dispatch_us, group_error)
            took.setdefault(model, []).append(point["seconds"])
            doc["points"].append(point)
            _write(doc, out_dir)
            print(_progress(i, len(schedule), point), flush=True)
    doc["header"]["total_s"] = time.monotonic() - started
    _write(doc, out_dir)
    return doc


@contextmanager
def _nothing():
    yield None


def _preset_dispatch_us(gpu: str) -> float:
    from runtime_model.presets import to_model as presets
    return presets.builtin_library().gpus[gpu].dispatch_us


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, as every rtmodel command
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    argv = sys.argv[1:] if argv is None else argv
    parser = _Parser(prog="python -m benchmarks.gpu_compute", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device", choices=("cuda", "cpu"), default="cuda", help="where to train (default cuda)"
    )
    parser.add_argument("--tiny", action="store_true", help=f"width/{TINY_WIDTH_DIV} models, small batches")
    parser.add_argument(
        "--out-dir", help=f"results directory (default {RESULTS}; required with --device cpu)"
    )
    parser.add_argument("--points", help="model:units:precision:wrapper,... (default: the issue's list)")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help=f"skip points that would end past this many seconds (default {DEFAULT_BUDGET_S:g})",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="passes over the points, every other one in reverse order (default 1; gpu_compute_passes)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    try:
        points = parse_points(args.points) if args.points else (TINY_POINTS if args.tiny else DEFAULT_POINTS)
    except ValueError as exc:
        parser.error(str(exc))
    if args.budget_s <= 0:
        parser.error("--budget-s must be positive")
    if args.device == "cpu" and args.out_dir is None:
        parser.error(f"give --out-dir for a CPU run ({RESULTS} holds GPU results)")
    out_dir = Path(args.out_dir) if args.out_dir else RESULTS
    if out_dir.exists() and not out_dir.is_dir():
        parser.error(f"--out-dir {out_dir} is not a directory")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (use --device cpu --tiny for the smoke run)")
    device = (
        torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = run(points, device, args.tiny, out_dir, args.budget_s, argv, started, args.repeats)
    print(render_table(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

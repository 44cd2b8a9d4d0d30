"""benchmarks.gpu_compute: the GPU compute benchmark's CPU smoke run, its trace summary and its CLI.

The figures themselves are only meaningful on a GPU; on any machine the results must be consistent:
positive times, op counts, derived figures computed from the stored ones, and null device figures
where the profiler saw no device.
"""

import json
import statistics
import subprocess
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")

from benchmarks import gpu_compute, gpu_compute_predict  # noqa: E402
from benchmarks.gpu_compute_trace import rows, summarize_trace, union_ns  # noqa: E402

PHASES = ("forward", "backward", "scaler", "optimizer", "wait")


def _run(tmp_path, *args):
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.gpu_compute",
        "--device",
        "cpu",
        "--tiny",
        "--out-dir",
        str(tmp_path),
    ]
    done = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((tmp_path / "gpu-compute.json").read_text()), done.stdout


def _check_point(p):
    assert p["wall_ms"] > 0 and all(w > 0 for w in p["wall_ms_all"])
    assert p["wall_ms"] == pytest.approx(statistics.median(p["wall_ms_all"]))
    assert all(v >= 0 for v in p["host_ms"].values()) and p["host_issue_ms"] > 0
    assert p["ops"]["forward"] > 0 and p["ops"]["backward"] > 0 and p["ops"]["optimizer"] > 0
    assert (p["ops"]["scaler"] > 0) == (p["precision"] == "fp16")  # only fp16 has a GradScaler
    for phase, n in p["ops"].items():
        if n:
            assert p["host_us_per_op"][phase] == pytest.approx(p["host_ms"][phase] * 1e3 / n)
    assert p["device_busy_ms"] is None and p["device_busy_share"] is None  # CPU: no device timeline
    if p["model"] == "transformer-xl-base":  # no preset: nothing predicted
        assert p["prediction"] is None and p["predicted_ms"] is None and p["error_pct"] is None
    else:
        assert p["predicted_ms"] == p["prediction"][f"{p['wrapper']}_ms"] > 0
        assert p["error_pct"] == pytest.approx((p["predicted_ms"] - p["wall_ms"]) / p["wall_ms"] * 100)
    assert not p.get("errors"), p.get("errors")


@pytest.mark.slow
def test_cpu_smoke_run_of_the_richest_point(tmp_path):
    """fp16 + GradScaler + DDP (gloo, world size 1): every phase and part of the measurement runs."""
    doc, stdout = _run(tmp_path, "--points", "transformer-base:64:fp16:ddp")
    h = doc["header"]
    assert h["device"] == "cpu" and h["gpu"] is None and h["tiny"] and h["gpu_preset"] == "H100"
    assert {"host_cpu", "cpu_count", "torch", "cuda", "cudnn", "nccl", "date_utc", "command"} <= set(h)
    assert doc["dispatch"]["us_per_op"] > 0 and doc["dispatch"]["timed_ops"] > 0
    [p] = doc["points"]
    _check_point(p)
    assert p["iterations"]["timed"] >= 1 and p["prediction"]["dispatch_us"] == doc["dispatch"]["us_per_op"]
    readme = (tmp_path / "README.md").read_text()
    assert "| transformer-base | 64 | fp16 | ddp |" in readme
    assert stdout.rstrip().splitlines()[-1].startswith("| transformer-base | 64 | fp16 | ddp |")


@pytest.mark.slow
def test_cpu_smoke_run_of_every_tiny_point(tmp_path):
    doc, _ = _run(tmp_path)
    assert len(doc["points"]) + len(doc["skipped"]) == len(gpu_compute.TINY_POINTS) and not doc["skipped"]
    for p in doc["points"]:
        _check_point(p)
    by = {(p["model"], p["precision"], p["wrapper"]): p for p in doc["points"]}
    # DDP copies gradients into its buckets during backward: more ops than the bare model's backward
    bare, ddp = by["transformer-base", "fp16", "bare"], by["transformer-base", "fp16", "ddp"]
    assert ddp["ops"]["backward"] > bare["ops"]["backward"]
    assert ddp["prediction"]["ddp_ms"] >= ddp["prediction"]["bare_ms"]


def _event(name, start, end, device=False, activity=None):
    return SimpleNamespace(
        name=lambda: name,
        device_type=lambda: SimpleNamespace(name="CUDA" if device else "CPU"),
        activity_type=lambda: activity,
        start_ns=lambda: start,
        end_ns=lambda: end,
    )


def test_trace_summary_takes_the_union_of_device_work_and_launches_by_phase_window():
    events = [
        _event("gpu_compute::forward", 0, 100),
        _event("gpu_compute::backward", 100, 300),
        _event("cudaLaunchKernel", 10, 12),
        _event("cudaLaunchKernel", 20, 22),
        _event("cuLaunchKernelEx", 150, 151),  # the autograd thread, inside the backward window
        _event("cudaMemcpyAsync", 320, 321),  # outside every window: counted nowhere
        _event("aten::mm", 10, 30),
        _event("gemm", 50, 150, device=True, activity="kernel"),
        _event("nccl", 100, 200, device=True, activity="kernel"),  # overlaps gemm: busy counts it once
        _event("Memset (Device)", 400, 410, device=True, activity="gpu_memset"),
        _event("Stream Sync", 0, 500, device=True, activity="cuda_sync"),  # a wait, not work
        _event("gpu_compute::forward", 0, 100, device=True, activity="gpu_user_annotation"),
    ]
    s = summarize_trace(events, 2, PHASES)
    assert s["device_busy_ms"] == pytest.approx((150 + 10) / 2 / 1e6)
    assert s["device_kernel_sum_ms"] == pytest.approx((100 + 100 + 10) / 2 / 1e6)
    assert s["device_kernels"] == 1.0
    assert s["launches"] == {"forward": 1.0, "backward": 0.5, "scaler": 0.0, "optimizer": 0.0, "wait": 0.0}


def test_trace_summary_without_a_device_is_null():
    s = summarize_trace([_event("gpu_compute::forward", 0, 10), _event("aten::add", 1, 2)], 1, PHASES)
    assert s["device_busy_ms"] is None and s["launches"] is None


def test_union_counts_overlaps_once():
    assert union_ns([(0, 10), (5, 15), (20, 30), (21, 22)]) == 25
    assert union_ns([]) == 0


def test_rows_read_a_real_profiler_trace():
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function("gpu_compute::forward"):
            (x @ x).sum()
    found = [r for r in rows(prof.profiler.kineto_results.events()) if r.name == "gpu_compute::forward"]
    assert found and found[0].end_ns > found[0].start_ns and not found[0].device


@pytest.mark.parametrize(
    ("name", "memory_gib", "preset"),
    [("NVIDIA H100 80GB HBM3", 79.1, "H100"), ("NVIDIA H200", 139.8, "H200"),
     ("NVIDIA A100-SXM4-80GB", 79.2, "A100-80GB"), ("NVIDIA A100-SXM4-40GB", 39.4, "A100"),
     ("Tesla V100-SXM2-32GB", 31.7, "V100-32GB"), ("Tesla T4", 14.6, "T4"), (None, 0, "H100")],
)  # fmt: skip
def test_gpu_preset_follows_the_device_name(name, memory_gib, preset):
    assert gpu_compute_predict.gpu_preset_for(name, memory_gib) == preset


def test_prediction_grows_with_dispatch_cost_and_ddp_adds_its_copies():
    low = gpu_compute_predict.predict("transformer-base", 3125, "fp16", "H100", 10.0)
    high = gpu_compute_predict.predict("transformer-base", 3125, "fp16", "H100", 40.0)
    assert 0 < low["bare_ms"] <= high["bare_ms"] and low["ddp_ms"] <= high["ddp_ms"]
    assert low["ddp_ms"] >= low["bare_ms"]
    assert gpu_compute_predict.predict("transformer-xl-base", 6144, "fp16", "H100", 10.0) is None


def test_points_spec_parses_and_refuses_mistakes():
    assert gpu_compute.parse_points("resnet50:64:tf32:bare, gpt2-small:1024:bf16:ddp") == [
        ("resnet50", 64, "tf32", "bare"), ("gpt2-small", 1024, "bf16", "ddp")]  # fmt: skip
    for bad in ("resnet50:64:tf32", "vgg:64:tf32:bare", "resnet50:0:tf32:bare", "resnet50:64:fp8:bare", ""):
        with pytest.raises(ValueError):
            gpu_compute.parse_points(bad)


@pytest.mark.parametrize(
    "argv",
    [["--device", "cpu", "--points", "resnet50:x:tf32:bare", "--out-dir", "."], ["--device", "cpu"],
     ["--device", "cpu", "--out-dir", ".", "--budget-s", "0"], ["--device", "tpu"]],
)  # fmt: skip
def test_cli_mistakes_are_one_line_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        gpu_compute.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_cuda_without_a_gpu_is_a_one_line_error(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    with pytest.raises(SystemExit) as exc:
        gpu_compute.main(["--out-dir", str(tmp_path)])
    assert exc.value.code == 2 and "no CUDA device" in capsys.readouterr().err


def test_a_point_without_its_process_group_fails_alone_and_keeps_its_prediction():
    import torch

    spec = {
        "model": "transformer-base",
        "units_requested": 64,
        "units": 64,
        "precision": "fp16",
        "wrapper": "ddp",
    }
    p = gpu_compute._measure(spec, torch.device("cpu"), True, "H100", 20.0, "process group: no store")
    assert p["errors"] == {"point": "process group: no store"} and "wall_ms" not in p
    assert p["predicted_ms"] > 0 and p["error_pct"] is None
    doc = {"header": {}, "points": [p]}
    assert "| transformer-base | 64 | fp16 | ddp | - |" in gpu_compute.render_table(doc)


@pytest.mark.slow
def test_a_spent_budget_skips_every_point(tmp_path):
    doc, _ = _run(tmp_path, "--points", "resnet50:2:tf32:bare,resnet50:2:bf16:bare", "--budget-s", "0.01")
    assert doc["points"] == [] and [s["precision"] for s in doc["skipped"]] == ["tf32", "bf16"]
    assert (
        "Skipped (budget): resnet50 2 tf32 bare, resnet50 2 bf16 bare" in (tmp_path / "README.md").read_text()
    )


def test_passes_alternate_their_order_so_a_drifting_host_shows_as_disagreement():
    from benchmarks.gpu_compute_passes import passes

    assert passes(["a", "b", "c"], 1) == [(0, "a"), (0, "b"), (0, "c")]
    assert passes(["a", "b"], 3) == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]
    with pytest.raises(ValueError, match="at least 1"):
        passes(["a"], 0)


def test_by_point_takes_the_median_over_passes_and_their_spread():
    from benchmarks.gpu_compute_passes import by_point

    def point(wall, pass_index, units=64):
        spec = {"model": "m", "units": units, "precision": "fp16", "wrapper": "bare", "pass": pass_index}
        return spec | ({"wall_ms": wall} if wall else {"errors": {"point": "x"}})

    groups = by_point([point(30.0, 0), point(40.0, 0, units=128), point(50.0, 1), point(None, 1, 128)])
    assert [g["point"]["units"] for g in groups] == [64, 128]  # first-measured order; a failure adds nothing
    assert groups[0]["walls_ms"] == [30.0, 50.0] and groups[0]["wall_ms"] == 40.0
    assert groups[0]["spread"] == pytest.approx(0.5)
    assert groups[1]["walls_ms"] == [40.0] and groups[1]["spread"] == 0.0


@pytest.mark.slow
def test_two_passes_measure_each_point_twice_and_the_host_again(tmp_path):
    doc, stdout = _run(tmp_path, "--points", "resnet50:2:tf32:bare,resnet50:2:bf16:bare", "--repeats", "2")
    assert doc["header"]["repeats"] == 2
    order = [(p["precision"], p["pass"]) for p in doc["points"]]
    assert order == [("tf32", 0), ("bf16", 0), ("bf16", 1), ("tf32", 1)]
    for p in doc["points"]:
        _check_point(p)
    again = doc["dispatch"]["passes_us_per_op"]
    assert len(again) == 2 and again[0] == doc["dispatch"]["us_per_op"] and again[1] > 0
    assert stdout.rstrip().splitlines()[-1].endswith("| 2 |")  # the table names each row's pass


def test_repeats_below_one_is_a_one_line_error(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        gpu_compute.main(["--device", "cpu", "--out-dir", str(tmp_path), "--repeats", "0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "--repeats" in err

"""The profile's peak memory: each rank's peak in its DDP iterations (profiler/compute_memory.py), bounded
on read (rtmodel_documents/profile_bounds.py) and read for the advisor (profiled_peak_bytes)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.cli_helpers import run

ROOT = Path(__file__).resolve().parents[1]
OLD_PROFILES = [ROOT / "tests/data/real_profile_2x1.json", ROOT / "tests/data/synthetic_profile_2x2.json"]
REAL = ROOT / "tests/data/real_profile_2x1.json"
SYNTH = {"param_mb": 4, "layers": 4, "forward_ms": 4, "backward_ms": 8}
GIB = 2**30


def _with_memory(**compute) -> dict:
    """The 2-rank CPU profile with the memory fields the profiler writes, `compute` overriding them."""
    doc = json.loads(REAL.read_text())
    doc["compute"].update(
        peak_memory_bytes=[24_117_284, 24_117_300],
        peak_memory_source="mem_tracker",
        device_memory_bytes=[25 * GIB, 25 * GIB],
        ddp_bucket_view=False,
    )
    doc["compute"].update(compute)
    return doc


# ----------------------------------------------------------------------------- reading


@pytest.mark.parametrize("path", OLD_PROFILES, ids=lambda p: p.name)
def test_a_profile_from_before_the_peak_loads_and_has_none(path):
    from calibration.profile_view import load_profile
    from rtmodel_documents.profile_bounds import profiled_peak_bytes
    from rtmodel_documents.profile_document import ProfileDocument

    doc = json.loads(path.read_text())
    assert "peak_memory_bytes" not in doc["compute"]
    load_profile(path)
    assert profiled_peak_bytes(doc) is None
    typed = ProfileDocument.from_json(doc)
    assert typed.to_json()["compute"] == doc["compute"]  # read back as written: nothing added
    assert profiled_peak_bytes(typed) is None


def test_the_reader_gives_the_largest_ranks_peak_and_the_fields_round_trip(tmp_path):
    from calibration.profile_view import load_profile
    from rtmodel_documents.profile_bounds import profiled_peak_bytes
    from rtmodel_documents.profile_document import ProfileDocument

    doc = _with_memory()
    assert profiled_peak_bytes(doc) == 24_117_300.0
    assert ProfileDocument.from_json(doc).to_json()["compute"] == doc["compute"]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert profiled_peak_bytes(load_profile(path).document) == 24_117_300.0
    # not measured (a torch without MemTracker): no peak, the source says why, and the profile still loads
    unmeasured = _with_memory(peak_memory_source="not measured: no MemTracker")
    del unmeasured["compute"]["peak_memory_bytes"]
    assert profiled_peak_bytes(unmeasured) is None
    # the device bound is optional: a profile without device_memory_bytes is bounded by any GPU's
    no_device = _with_memory()
    del no_device["compute"]["device_memory_bytes"]
    assert profiled_peak_bytes(no_device) == 24_117_300.0


BAD = {
    "negative": (dict(peak_memory_bytes=[-5, 24_117_300]), "compute.peak_memory_bytes[0]"),
    "nan": (dict(peak_memory_bytes=[24_117_284, math.nan]), "compute.peak_memory_bytes[1]"),
    "1e30": (dict(peak_memory_bytes=[1e30, 24_117_300]), "compute.peak_memory_bytes[0]"),
    "above-the-device": (dict(peak_memory_bytes=[24_117_284, 26 * GIB]), "compute.peak_memory_bytes[1]"),
    "above-any-gpu": (
        dict(peak_memory_bytes=[2 * 2**40, 24_117_300], device_memory_bytes=None),
        "compute.peak_memory_bytes[0]",
    ),
    "one-rank": (dict(peak_memory_bytes=[24_117_284]), "compute.peak_memory_bytes"),
    "text-view": (dict(ddp_bucket_view="no"), "compute.ddp_bucket_view"),
    "nan-device": (dict(device_memory_bytes=[math.nan, 25 * GIB]), "compute.device_memory_bytes[0]"),
}


@pytest.mark.parametrize("case", list(BAD), ids=str)
def test_a_bad_peak_is_one_line_naming_the_field(case):
    from rtmodel_documents.profile_bounds import profiled_peak_bytes
    from rtmodel_documents.profile_checks import ProfileError

    change, field = BAD[case]
    with pytest.raises(ProfileError) as err:
        profiled_peak_bytes(_with_memory(**change), "p.json")
    assert f"p.json: {field} " in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("command", ["calibrate", "advise"])
@pytest.mark.parametrize("case", ["negative", "nan", "1e30", "above-the-device"])
def test_the_commands_refuse_a_bad_peak_in_one_line_exit_2(case, command, tmp_path):
    change, field = BAD[case]
    path = tmp_path / "bad.json"
    # NaN as the profiler's JSON writer would spell it (json.dumps: NaN), read with nan_ok
    path.write_text(json.dumps(_with_memory(**change)))
    argv = [command, path] if command == "calibrate" else [command, "--profile", path]
    res = run(*argv)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], res.stderr


# ----------------------------------------------------------------------------- recording


def test_one_rank_without_a_peak_leaves_the_profile_without_one():
    from profiler.compute_memory import compute_fields

    ranks = [
        {"peak_bytes": 100, "source": "mem_tracker", "device_bytes": 10**9, "ddp_bucket_view": False},
        {"peak_bytes": None, "source": "not measured: x", "device_bytes": None, "ddp_bucket_view": False},
    ]
    fields = compute_fields(ranks)
    assert fields == {
        "peak_memory_bytes": None,
        "peak_memory_source": "not measured: x",
        "device_memory_bytes": None,
        "ddp_bucket_view": False,
    }
    both = compute_fields([ranks[0], ranks[0]])
    assert both["peak_memory_bytes"] == (100, 100) and both["device_memory_bytes"] == (10**9, 10**9)


def test_the_probe_is_off_for_every_timed_iteration():
    """measure_compute tells the probe when the timed iterations start and end, and its own iterations
    come after them (batches past the timed ones)."""
    torch = pytest.importorskip("torch")
    from profiler.compute import measure_compute
    from rtmodel_harness.workloads import build_workload

    events = []

    class Probe:
        def between_iterations(self):
            events.append("between")

        def timed_start(self):
            events.append("start")

        def timed_end(self):
            events.append("end")

        def measure(self, step_fn, workload, first_step, iterations=2):
            for step in range(first_step, first_step + iterations):
                events.append(f"tracked {step}")
                step_fn(workload.make_batch(step))

    wl = build_workload("synthetic", {"param_mb": 1, "layers": 2, "forward_ms": 0, "backward_ms": 0}, 2,
                        torch.device("cpu"))  # fmt: skip
    batches = []
    make_batch = wl.make_batch

    def logged_batch(step):
        batches.append((events.count("start"), events.count("end"), step))
        return make_batch(step)

    wl.make_batch = logged_batch
    out = measure_compute(wl, wl.bucket_layout(1.0, 1.0), 2, 3, memory=Probe())
    assert len(out["forward_s"]) == 3
    timed = [step for started, ended, step in batches if started and not ended]
    assert timed == [2, 3, 4]  # exactly the timed iterations ran between start and end
    assert events[-2:] == ["tracked 5", "tracked 6"] and events.index("end") < events.index("tracked 5")


def test_the_cpu_probe_sees_the_ddp_runs_states():
    """The probe around the DDP run (profiler.wrapped.measure_ddp_work) on one gloo rank: at least the
    parameters, gradients, DDP's buckets and Adam's two states (docs/memory.md, the optimizer step's
    phase), at most what the host holds."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    from profiler.launch import _free_port
    from profiler.wrapped import measure_ddp_work
    from rtmodel_harness.recipe import Recipe
    from rtmodel_harness.workloads import build_workload

    dev = torch.device("cpu")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        make = lambda: build_workload("synthetic", SYNTH, 2, dev)  # noqa: E731
        out = measure_ddp_work(make, make().bucket_layout(1.0, 1.0), Recipe(), 1.0, device=dev)
    finally:
        dist.destroy_process_group()
    mem = out["peak_memory"]
    assert mem["source"] == "mem_tracker" and mem["ddp_bucket_view"] is False
    assert 5 * 4 * 2**20 <= mem["peak_bytes"] <= mem["device_bytes"], mem


@pytest.mark.cluster
@pytest.mark.slow
def test_a_quick_profile_records_a_positive_peak_per_rank(tmp_path):
    pytest.importorskip("torch")
    from calibration.profile_view import load_profile
    from profiler.launch import run_profile
    from profiler.options import ProfileOptions
    from rtmodel_documents.profile_bounds import profiled_peak_bytes
    from tests.host_device import expected_device_and_backend

    path = tmp_path / "p.json"
    opts = ProfileOptions(path, "synthetic", SYNTH, 2, quick=True, nproc_per_node=2, bucket_cap_mb=1.0, reps=2,
                          timeout_s=60, progress=False)  # fmt: skip
    doc = run_profile(opts)
    compute = doc["compute"]
    device, _ = expected_device_and_backend(2)
    assert compute["peak_memory_source"] == (
        "cuda max_memory_allocated" if device == "cuda" else "mem_tracker"
    )
    assert compute["ddp_bucket_view"] is False  # as the profiler's DDP runs (rtmodel_harness.ddp_args)
    peaks, devices = compute["peak_memory_bytes"], compute["device_memory_bytes"]
    assert len(peaks) == len(devices) == 2
    param_bytes = doc["workload"]["param_bytes"]
    for peak, held in zip(peaks, devices, strict=True):
        # parameters, gradients, DDP's buckets and Adam's two states at the step, within the device
        assert isinstance(peak, int) and 5 * param_bytes <= peak <= held
    load_profile(path)  # the calibration's bounds pass what the profiler wrote
    assert profiled_peak_bytes(doc) == max(peaks)

"""`--trace`: real torch.profiler traces as the model's compute, buckets and All-Reduce (issue 49).

The traces are real recordings by others (tests/data/traces/README.md): rank 0 of a 2-rank DDP run on
A100s (Holistic Trace Analysis' test data) and all 8 ranks of a DLRM run on V100s (PARAM's).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app

pytest.importorskip("hta", reason="the [trace] extra (holistictraceanalysis)")

TRACES = Path(__file__).parent / "data" / "traces"
A100 = TRACES / "hta-a100x2-rank0.json.gz"
DLRM = TRACES / "param-dlrm-v100x8"
runner = CliRunner()


def _advise(*argv) -> dict:
    res = runner.invoke(app, ["advise", *argv, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def a100():
    from calibration.trace.trace_events import read_rank_trace

    return read_rank_trace(A100)


def test_the_a100_trace_reads_as_recorded(a100):
    """Its header and DDP's five buckets as NCCL's kernels recorded them (In msg nelems x 4 bytes)."""
    from calibration.trace.step_breakdown import traced_steps

    assert (a100.rank, a100.world_size, a100.gpu_name, a100.nccl_version) == (
        0,
        2,
        "NVIDIA A100-PG509-200",
        "2.17.1",
    )
    assert a100.steps == (4, 5, 6)
    steps = traced_steps(a100)
    assert [s.number for s in steps] == [5, 6]  # the first step only starts the second's period
    assert [len(s.buckets) for s in steps] == [5, 5]
    assert sum(b.nbytes for b in steps[0].buckets) == 4 * (6637568 + 2431040 + 2049000 + 7875584 + 6563840)
    for s in steps:
        ready = [b.ready_fraction for b in s.buckets]
        assert ready == sorted(ready) and 0 < ready[0] and ready[-1] <= 1
        assert s.forward_s > 0 and s.backward_s > 0 and s.optimizer_s > 0
        assert s.iteration_s == pytest.approx(s.forward_s + s.backward_s + s.optimizer_s + s.tail_s)


def test_the_gpu_names_map_to_their_presets():
    from calibration.trace.gpu_names import gpu_preset_of
    from runtime_model.presets.to_model import builtin_library

    gpus = builtin_library().gpus
    gib = 2**30
    assert gpu_preset_of("NVIDIA A100-PG509-200", 42_297_524_224, gpus) == "A100"
    assert gpu_preset_of("NVIDIA A100-SXM4-80GB", 80 * gib, gpus) == "A100-80GB"
    assert gpu_preset_of("Tesla V100-SXM2-16GB", 16 * gib, gpus) == "V100"
    assert gpu_preset_of("Tesla V100-SXM2-32GB", 32 * gib, gpus) == "V100-32GB"
    assert gpu_preset_of("NVIDIA H100 80GB HBM3", 80 * gib, gpus) == "H100"
    assert gpu_preset_of("AMD Instinct MI300X", 192 * gib, gpus) is None


def test_the_model_rebuilt_from_the_trace_reproduces_its_iteration():
    """At the trace's own shape (2 ranks) the rebuilt DDP step is the measured one, and so is what of the
    all-reduce shows past backward (nothing: NCCL's kernels ran under backward)."""
    doc = _advise("--trace", str(A100), "--gpus", "2", "--gpus-per-node", "2")
    check = doc["inputs"]["trace_check"]
    assert check["predicted_ms"] == pytest.approx(check["measured_ms"], rel=0.05)
    assert doc["inputs"]["traced_shape"] == {"gpus": 2, "gpus_per_node": 2}
    ddp = next(p for p in doc["predictions"] if p["topology"] == "allreduce")
    assert ddp["iteration_s"]["mean"] * 1e3 == pytest.approx(check["predicted_ms"], rel=1e-6)
    assert doc["provenance"]["compute"].startswith("measured: torch.profiler trace")


def test_other_n_change_only_what_n_changes():
    """At 16 GPUs the compute and buckets are the trace's; the all-reduce beyond its group is the links'."""
    at2 = _advise("--trace", str(A100), "--gpus", "2", "--gpus-per-node", "2")
    at16 = _advise("--trace", str(A100), "--gpus", "16", "--gpus-per-node", "2")
    assert at16["inputs"]["trace_check"] == at2["inputs"]["trace_check"]
    ddp2, ddp16 = (next(p for p in d["predictions"] if p["topology"] == "allreduce") for d in (at2, at16))
    assert ddp16["iteration_s"]["mean"] >= ddp2["iteration_s"]["mean"]


def test_every_rank_traced_reports_their_spread():
    """All 8 ranks of one run: each rank's compute, the spread, the slowest rank named."""
    doc = _advise("--trace", str(DLRM), "--gpus", "8", "--gpus-per-node", "8")
    spread = doc["inputs"]["rank_spread"]
    assert spread["ranks"] == list(range(8))
    assert len(spread["compute_ms"]) == 8 and spread["compute_spread"] > 0.1
    assert any("8 ranks traced" in n and "slowest rank" in n for n in doc["notes"])


def test_compute_ms_replaces_the_traced_compute():
    doc = _advise("--trace", str(A100), "--gpus", "16", "--compute-ms", "100")
    assert (
        "--compute-ms 100" in doc["provenance"]["compute"]
        or "your --compute-ms 100" in doc["provenance"]["compute"]
    )


def test_a_directory_is_its_traces():
    from calibration.trace.trace_scenario import read_traces

    assert [t.rank for t in read_traces([DLRM])] == list(range(8))


def test_another_batch_scales_the_traced_kernels_and_keeps_the_gaps():
    """At twice the traced batch the compute grows by the kernels' own time in forward and backward; the
    loop's gaps, the optimizer and the buckets stay as traced."""
    from calibration.trace.batch_scaling import scaled_to_batch
    from calibration.trace.trace_scenario import read_traces, scenario_from_traces
    from runtime_model.presets.to_model import network_preset

    traced = scenario_from_traces(read_traces([A100]), 16, 2, network_preset("ib-100", "nvlink3"), "A100")
    fb, bb = traced.busy_s
    assert 0 < fb < traced.scenario.compute.forward_s and 0 < bb < traced.scenario.compute.backward_s
    same, _ = scaled_to_batch(traced.scenario, traced.busy_s, 256, 256)
    assert same.compute.compute_s == pytest.approx(traced.scenario.compute.compute_s)
    double, line = scaled_to_batch(traced.scenario, traced.busy_s, 256, 512)
    assert double.compute.compute_s == pytest.approx(traced.scenario.compute.compute_s + fb + bb)
    assert double.compute.optimizer_s == traced.scenario.compute.optimizer_s
    assert double.buckets == traced.scenario.buckets
    assert "512 per GPU" in line


def test_steps_repeated_on_the_device_timeline_are_not_the_hosts(a100, tmp_path):
    """Kineto may repeat each ProfilerStep#N as a `gpu_user_annotation` on the GPU's timeline, spanning
    the step's kernels: the steps are still the host's, and the breakdown is the same."""
    import gzip

    from calibration.trace.step_breakdown import traced_steps
    from calibration.trace.trace_events import read_rank_trace

    doc = json.loads(gzip.decompress(A100.read_bytes()))
    events = doc["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    for number, start, dur in zip(a100.steps, a100.step_start_us, a100.step_dur_us, strict=True):
        inside = [k for k in kernels if start <= k["ts"] <= start + dur]
        first, last = min(k["ts"] for k in inside), max(k["ts"] + k["dur"] for k in inside)
        events.append(
            {
                "ph": "X",
                "cat": "gpu_user_annotation",
                "name": f"ProfilerStep#{number}",
                "pid": inside[0]["pid"],
                "tid": inside[0]["tid"],
                "ts": first,
                "dur": last - first,
            }
        )
    repeated = tmp_path / "repeated.json.gz"
    repeated.write_bytes(gzip.compress(json.dumps(doc).encode()))
    again = read_rank_trace(repeated)
    assert again.steps == a100.steps
    assert list(again.step_start_us) == list(a100.step_start_us)
    assert [s.iteration_s for s in traced_steps(again)] == [s.iteration_s for s in traced_steps(a100)]

"""`--trace` anywhere (issue 64): CPU ranks' traces, traces without collective sizes, and the steps' spread.

The CPU trace is this project's own `rtmodel profile --quick --trace-out` on a machine without a GPU
(tests/data/traces/README.md); the trace without sizes is the real A100 one with its sizes stripped; the
spread and idle share come from a synthetic trace whose steps are laid out to known values
(tests/trace_fixtures.ddp_trace).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from tests.trace_fixtures import REAL_A100, ddp_trace, gzipped, kineto_trace, without_collective_sizes

pytest.importorskip("hta", reason="the [trace] extra (holistictraceanalysis)")

CPU_RUN = REAL_A100.parent / "rtmodel-cpu-gloo-x2"
A100_PARAMS = 6637568 + 2431040 + 2049000 + 7875584 + 6563840  # its five buckets' fp32 elements
runner = CliRunner()


def _advise(*argv) -> dict:
    res = runner.invoke(app, ["advise", *argv, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _refused(*argv) -> str:
    res = runner.invoke(app, ["advise", *argv])
    assert res.exit_code == 2, res.output
    return res.output


def _ddp(doc: dict) -> float:
    return next(p for p in doc["predictions"] if p["topology"] == "allreduce")["iteration_s"]["mean"]


def test_a_cpu_ranks_trace_is_read_as_the_cpu_cluster_it_is():
    """Both ranks' traces of `profile --trace-out` on CPUs: accepted, labelled CPU ranks over gloo, its two
    buckets read from gloo's spans, the network named as theirs."""
    doc = _advise("--trace", str(CPU_RUN), "--gpus", "2")
    inputs = doc["inputs"]
    assert inputs["trace_device"] == "CPU ranks (gloo)" and inputs["trace_gpu"] is None
    assert inputs["traced_shape"] == {"gpus": 2, "gpus_per_node": 2}
    assert inputs["idle_share"]["device"] == "CPU"
    assert "CPU ranks over gloo" in doc["provenance"]["compute"]
    assert doc["provenance"]["buckets"].startswith("measured: 2 DDP buckets, 14.7 MB")  # 4 x 3,684,362
    assert any(n.startswith("CPU ranks:") for n in doc["notes"])
    assert inputs["network"]["name"].startswith("CPU ranks over gloo")
    assert _ddp(_advise("--trace", str(CPU_RUN), "--gpus", "8")) > 0


def test_a_cpu_ranks_buckets_are_gloos_issued_in_backward():
    """Each step's two buckets: their bytes from gloo's spans, ready when backward's call issued them."""
    from calibration.trace.step_breakdown import traced_steps
    from calibration.trace.trace_events import read_rank_trace

    trace = read_rank_trace(CPU_RUN / "rank0.pt.trace.json.gz")
    assert trace.on_cpu and trace.backend == "gloo" and trace.gpu_name == "CPU"
    for step in traced_steps(trace):
        assert [b.nbytes for b in step.buckets] == [4 * 1059850, 4 * 2624512]
        assert 0 < step.buckets[0].ready_fraction < step.buckets[1].ready_fraction <= 1
        assert step.backward_s > 0 and step.optimizer_s > 0


def test_a_gpu_run_traced_without_its_gpu_is_still_refused(tmp_path):
    """No GPU in the header but NCCL in it: a GPU run recorded without ProfilerActivity.CUDA."""
    path = tmp_path / "nccl-no-gpu.json"
    path.write_text(kineto_trace(gpu=None, world=2))
    assert "CPU-only" in _refused("--trace", str(path), "--gpus", "2")


@pytest.fixture(scope="module")
def unsized(tmp_path_factory):
    path = tmp_path_factory.mktemp("traces") / "a100-no-sizes.json.gz"
    path.write_bytes(without_collective_sizes(REAL_A100.read_bytes()))
    return path


@pytest.mark.slow
def test_a_trace_without_sizes_predicts_its_own_world_size_as_with_them(unsized):
    """The A100 trace stripped of its collective sizes, with --params: at its own 2 GPUs the same DDP step
    as the trace with sizes (its measured all-reduce times stand), and the provenance says the bytes are
    the --params'. Another --params leaves that step where it is."""
    own = ("--gpus", "2", "--gpus-per-node", "2")
    sized = _advise("--trace", str(REAL_A100), *own)
    doc = _advise("--trace", str(unsized), *own, "--params", str(A100_PARAMS))
    assert _ddp(doc) == pytest.approx(_ddp(sized), rel=1e-3)
    assert (
        "--params" in doc["provenance"]["buckets"]
        and "not recorded by the trace" in doc["provenance"]["buckets"]
    )
    assert doc["inputs"]["bucket_bytes"].startswith("not recorded by the trace: --params")
    assert sized["inputs"]["bucket_bytes"] == "measured"
    half = _advise("--trace", str(unsized), *own, "--params", str(A100_PARAMS // 2))
    assert _ddp(half) == pytest.approx(_ddp(sized), rel=1e-3)


def test_a_trace_without_sizes_takes_a_preset_models_bytes(unsized):
    doc = _advise("--trace", str(unsized), "--gpus", "16", "--gpus-per-node", "2", "--model", "resnet50")
    assert "--model resnet50's" in doc["provenance"]["buckets"]


def test_sizes_are_asked_for_only_where_the_trace_lacks_them(unsized):
    """No sizes and no --params/--model: one line naming them; sizes and --params: --params refused."""
    assert "--params N" in _refused("--trace", str(unsized), "--gpus", "2")
    assert "record their sizes" in _refused("--trace", str(REAL_A100), "--gpus", "2", "--params", "1000")
    both = _refused("--trace", str(unsized), "--gpus", "2", "--params", "1000", "--model", "resnet50")
    assert "give one" in both


STEPS_US = [(1000.0, 3000.0), (1200.0, 5000.0), (900.0, 4000.0), (1400.0, 2000.0), (800.0, 6000.0)]
GAP_US = 1500.0


@pytest.mark.parametrize("sizes", [True, False])
def test_the_steps_spread_and_idle_share_are_the_traces(tmp_path, sizes):
    """The synthetic trace's all-reduce per step (its buckets' kernels) and its idle gap per step, as
    the JSON inputs and the provenance report them; the first step only starts the second's period."""
    path = tmp_path / "steps.json.gz"
    path.write_bytes(gzipped(ddp_trace(STEPS_US, GAP_US, sizes=sizes)))
    extra = () if sizes else ("--params", "8000000")
    doc = _advise("--trace", str(path), "--gpus", "2", "--gpus-per-node", "2", *extra)
    allreduce = np.array([a + b for a, b in STEPS_US[1:]]) / 1e3
    lengths = np.array([GAP_US + 2000 + 2 * 1500 + b + 800 for _, b in STEPS_US[1:]])
    spread, idle = doc["inputs"]["allreduce_per_step"], doc["inputs"]["idle_share"]
    assert spread["per_step_ms"] == pytest.approx(allreduce.tolist())
    assert spread["cv"] == pytest.approx(allreduce.std(ddof=1) / allreduce.mean())
    assert [spread["p10_ms"], spread["p90_ms"]] == pytest.approx(np.percentile(allreduce, [10, 90]).tolist())
    assert idle["device"] == "GPU"
    assert idle["per_step"] == pytest.approx((GAP_US / lengths).tolist())
    assert idle["mean"] == pytest.approx(float(np.mean(GAP_US / lengths)))
    assert f"cv {spread['cv']:.1%}" in doc["provenance"]["allreduce per step"]
    assert f"GPU idle {idle['mean']:.1%}" in doc["provenance"]["idle"]

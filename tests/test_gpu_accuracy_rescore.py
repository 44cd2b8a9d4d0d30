"""`python -m benchmarks.gpu_accuracy_rescore`: a GPU accuracy run re-predicted from its own profiles, as
validate predicts, without a GPU."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_accuracy_rescore as rescore

DATA = Path(__file__).parent / "data"


def _kept_run(tmp_path, predicted_ms=(1.0, 2.0)):
    """A gpu-accuracy.json of one 2-rank configuration with its profile in runs/ (a CPU profile stands in)."""
    (tmp_path / "runs").mkdir()
    shutil.copy(DATA / "real_profile_2x1.json", tmp_path / "runs" / "profile-2r-64.json")
    runs = [
        {"config": "2r-64", "ranks": 2, "batch_per_rank": 64, "method": method, "recommended": False,
         "predicted_ms": pred, "measured_ms": meas, "backend": "gloo", "device": "cpu", "error": 0.0}
        for method, pred, meas in (("allreduce", predicted_ms[0], 180.0), ("ring", predicted_ms[1], 150.0))
    ]  # fmt: skip
    doc = {"environment": {"device": "cpu", "gpus": 0, "host_cpu": "x", "cpu_cores": 2, "torch": "2.13",
                           "cuda": None, "nccl": None, "date_utc": "2026-11-26", "command": "test"},
           "configs": [{"config": {"ranks": 2, "batch_per_rank": 64, "topologies": ["ring"]}, "runs": runs}]}  # fmt: skip
    (tmp_path / "gpu-accuracy.json").write_text(json.dumps(doc))
    return doc


def test_measurements_stay_and_predictions_errors_and_the_pick_are_made_again(tmp_path):
    doc = _kept_run(tmp_path)
    new = rescore.rescore(doc, tmp_path / "runs")
    [config] = new["configs"]
    assert [r["measured_ms"] for r in config["runs"]] == [180.0, 150.0]
    for r in config["runs"]:
        assert r["predicted_ms"] > 10  # not the placeholders: a 2-rank CPU run's tens of ms
        assert r["error"] == pytest.approx((r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"])
    assert config["pick"] in {"allreduce", "ring", "complete"} and config["measured_fastest"] == "ring"
    assert new["summary"]["runs"] == 2 and new["rescored"]


def test_the_command_refuses_a_missing_profile_in_one_line(tmp_path, capsys):
    _kept_run(tmp_path)
    (tmp_path / "runs" / "profile-2r-64.json").unlink()
    assert rescore.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "profile" in err


@pytest.mark.slow
def test_a_fresh_run_is_re_predicted_exactly_as_validate_predicted_it(tmp_path):
    """The tiny CPU pipeline (profile -> advise -> validate), then the rescore: the same model gives the same
    predictions and the same pick, so a later difference is the model's change alone."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.gpu_accuracy",
        "--tiny",
        "--iterations",
        "4",
        "--out-dir",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads((tmp_path / "gpu-accuracy.json").read_text())
    new = rescore.rescore(doc, tmp_path / "runs")
    for old_config, new_config in zip(doc["configs"], new["configs"], strict=True):
        assert new_config["pick"] == old_config["pick"]
        for old, again in zip(old_config["runs"], new_config["runs"], strict=True):
            assert again["predicted_ms"] == pytest.approx(old["predicted_ms"], rel=1e-9)


def test_the_shared_gpu_profiles_error_kept_as_data_is_the_kept_gpu_runs_re_predicted():
    """preset_data/accuracy.toml's [profile-shared-gpu] is what every kept GPU accuracy run (ranks sharing
    one GPU over gloo) gives re-predicted with today's model: change the model, re-run, update both."""
    from runtime_model.advice.confidence import SHARED_GPU_PROFILE, measured_errors

    kept, now = measured_errors()[SHARED_GPU_PROFILE], rescore.shared_gpu_evidence()
    assert (kept.predictions, kept.speedups) == (now["predictions"], now["speedups"])
    for key in (
        "mean_abs_error",
        "max_abs_error",
        "speedup_mean_abs_error",
        "speedup_max_abs_error",
        "speedup_interval",
        "speedup_held_out_coverage",
        "speedup_held_out_factor",
    ):
        assert abs(getattr(kept, key) - now[key]) < 5e-4, key
    assert kept.speedup_sources == now["speedup_sources"]


def test_speedup_errors_pair_each_topology_with_its_own_all_reduce_run():
    runs = [
        {"method": "allreduce", "predicted_ms": 120.0, "measured_ms": 150.0},
        {"method": "ring", "predicted_ms": 100.0, "measured_ms": 100.0},
        {"method": "allreduce", "predicted_ms": 120.0, "measured_ms": 120.0},
        {"method": "complete", "predicted_ms": 60.0, "measured_ms": 60.0},
    ]
    assert rescore.speedup_errors({"configs": [{"config": {}, "runs": runs}]}) == pytest.approx(
        [1.2 / 1.5 - 1, 0.0]
    )
    with pytest.raises(ValueError, match="pairs"):
        rescore.speedup_errors({"configs": [{"config": {}, "runs": runs[1:3]}]})

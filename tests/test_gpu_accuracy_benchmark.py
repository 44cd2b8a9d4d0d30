"""The GPU accuracy benchmark's scoring (its runs need a GPU: benchmarks/gpu_checks.sh)."""

from __future__ import annotations

import math

import pytest

from benchmarks.gpu_accuracy import PICK_TOLERANCE, Run, score_pick, summarise, to_markdown


def _run(method: str, measured_ms: float, predicted_ms: float = 100.0) -> Run:
    return Run("2r-3200", 2, 3200, method, method != "ring", predicted_ms, measured_ms, "gloo", "cuda")


def test_the_pick_is_scored_against_the_fastest_measured_method():
    runs = [_run("allreduce", 171.9), _run("complete", 132.9), _run("allreduce", 171.1), _run("ring", 125.9)]
    fastest, slower = score_pick(runs, "allreduce")
    assert fastest == "ring" and slower == pytest.approx(171.1 / 125.9 - 1)  # DDP's faster run stands for it
    assert slower > PICK_TOLERANCE
    fastest, slower = score_pick(runs, "complete")  # one schedule with ring on 2 ranks: noise apart
    assert slower == pytest.approx(132.9 / 125.9 - 1) and slower <= PICK_TOLERANCE
    assert math.isinf(score_pick(runs, "one-peer-exp")[1])  # a pick that never ran cannot be right


def test_the_summary_and_table_carry_every_run():
    runs = [_run("allreduce", 120.0, 126.0), _run("ring", 100.0, 90.0)]
    config = {"config": {"ranks": 2, "batch_per_rank": 3200}, "runs": [r.__dict__ | {"error": r.error} for r in runs],
              "pick": "ring", "measured_fastest": "ring", "pick_slower_than_fastest": 0.0, "pick_right": True}
    summary = summarise([config])
    assert summary["runs"] == 2 and summary["picks_right"] == 1
    assert summary["mean_abs_error"] == pytest.approx(0.075) and summary["max_abs_error"] == pytest.approx(0.1)
    env = {"device": "NVIDIA H100", "gpus": 1, "host_cpu": "Xeon", "cpu_cores": 16, "torch": "2.11", "cuda": "13.0",
           "nccl": "2.28.9", "date_utc": "2026-11-26", "command": "python -m benchmarks.gpu_accuracy"}
    text = to_markdown({"environment": env, "configs": [config], "summary": summary})
    assert "| 2r-3200 | ring |" in text and "+5.0%" in text and "-10.0%" in text

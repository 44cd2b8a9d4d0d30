"""The memory model against real training steps: benchmarks/memory_accuracy.py's quick subset (the MLP at
one batch, DDP and FSDP2 on two gloo ranks under MemTracker), every rank within the benchmark's 5 %."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow  # two gloo ranks train under MemTracker


@pytest.mark.cluster
def test_ddp_and_fsdp2_peaks_are_predicted_within_five_percent(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("decent_dp")
    from benchmarks.memory_accuracy import BOUND, QUICK, QUICK_METHODS, run

    rows = run(QUICK, QUICK_METHODS, tmp_path)
    assert {(r["method"], r["rank"]) for r in rows} == {(m, r) for m in QUICK_METHODS for r in range(2)}
    for row in rows:
        assert abs(row["error"]) <= BOUND, row
        assert row["measured_peak_bytes"] > 0 and row["predicted_phase"]
    (raw,) = tmp_path.glob("*.jsonl")
    first = json.loads(raw.read_text().splitlines()[0])
    assert {"device", "host", "torch", "decent_dp", "date"} <= set(first)

"""The accuracy benchmark's CI subset: the whole pipeline on an emulated 2-node cluster, for real.

Needs root and network namespaces (skips with the reason otherwise) and torch + Decent-DP.
"""

import math

import pytest

pytest.importorskip("torch")
pytest.importorskip("decent_dp")

from benchmarks import accuracy  # noqa: E402
from rtmodel_emulation import available  # noqa: E402

ok, why = available()
pytestmark = [pytest.mark.emulated, pytest.mark.skipif(not ok, reason=f"emulated cluster unavailable: {why}")]


@pytest.mark.slow
def test_ci_subset_predicts_within_bounds(tmp_path):
    rows, summary = accuracy.run("ci", out_dir=tmp_path)
    cfg = accuracy.CI[0]
    assert {r.topology for r in rows} == set(cfg.topologies)
    for r in rows:
        for pred, meas, err in ((r.allreduce_pred_ms, r.allreduce_meas_ms, r.allreduce_error),
                                (r.topology_pred_ms, r.topology_meas_ms, r.topology_error)):
            assert pred > 0 and meas > 0
            assert err == pytest.approx((pred - meas) / meas, rel=1e-6)
        # the emulated link is slow enough that gossip must win clearly, and the model must see it
        assert r.speedup_meas > 1.2 and r.speedup_pred > 1.2
    # a loose bound that still fails if a term of the model is wrong (CI machines are noisy)
    assert summary["max_abs_error"] < 0.30
    assert math.isfinite(summary["mean_abs_error"])
    assert (tmp_path / "accuracy-ci.csv").read_text().count("\n") == len(rows) + 1
    assert "mean |error|" in (tmp_path / "accuracy-ci.md").read_text()

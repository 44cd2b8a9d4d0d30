"""`python -m benchmarks.gpu_compute_rescore`: a committed GPU run re-predicted with today's model, given
only that host's dispatch figure, without a GPU."""

import json

import pytest

from benchmarks import gpu_compute_rescore as rescore
from benchmarks.gpu_compute import RESULTS
from benchmarks.gpu_compute_predict import predict

DOC = json.loads((RESULTS / "gpu-compute.json").read_text())


def test_every_measured_preset_point_is_re_predicted_with_the_hosts_dispatch():
    rows = rescore.rescore(DOC)
    with_preset = [p for p in DOC["points"] if p["model"] != "transformer-xl-base" and p.get("wall_ms")]
    assert len(rows) == len(with_preset)
    for row, p in zip(rows, with_preset, strict=True):
        want = predict(
            p["model"], p["units"], p["precision"], DOC["header"]["gpu_preset"], DOC["dispatch"]["us_per_op"]
        )
        assert row["predicted_ms"] == pytest.approx(want[f"{p['wrapper']}_ms"])
        assert row["error"] == pytest.approx((row["predicted_ms"] - p["wall_ms"]) / p["wall_ms"])
    s = rescore.summary(rows)
    assert s["max_abs_error"] >= s["mean_abs_error"] > 0


def test_the_command_writes_its_table_and_refuses_a_bad_file_in_one_line(tmp_path, capsys):
    md = tmp_path / "r.md"
    assert rescore.main([str(RESULTS / "gpu-compute.json"), "--md", str(md)]) == 0
    out = capsys.readouterr().out
    assert "mean |error|" in out and md.read_text() == out.rstrip("\n") + "\n"
    assert rescore.main([str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.json" in err


def test_repeated_passes_are_scored_once_at_their_median_with_their_spread():
    first = next(p for p in DOC["points"] if p["model"] == "transformer-base" and p.get("wall_ms"))
    again = first | {"pass": 1, "wall_ms": first["wall_ms"] * 1.5}
    doc = DOC | {"points": [first, again], "dispatch": DOC["dispatch"] | {"passes_us_per_op": [30.0, 33.0]}}
    [row] = rescore.rescore(doc)
    assert row["passes"] == 2 and row["measured_ms"] == pytest.approx(first["wall_ms"] * 1.25)
    assert row["spread"] == pytest.approx(0.5 / 1.25)
    assert row["error"] == pytest.approx((row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"])
    text = rescore.render(doc, [row])
    assert "passes of one point differ by up to 40%" in text and "30.0, 33.0 us/op" in text

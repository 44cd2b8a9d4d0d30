"""rtmodel_plots and `rtmodel plot ...`: figures carry the model's numbers, files get written, mistakes are one line."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

import rtmodel_plots as plots
from rtmodel_cli.commands.plot import register
from rtmodel_cli.failing import OneLineUsageErrors, guard_app
from rtmodel_cli.gpu_counts import BadGpus, GpuSweep, parse_list, parse_range

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_RESULTS = REPO / "notebooks" / "data" / "example_validations.jsonl"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _app() -> typer.Typer:
    app = typer.Typer(cls=OneLineUsageErrors)  # as rtmodel's: a usage error is one line too

    @app.callback()
    def main():  # a group, so that `plot` stays a sub-command
        pass

    register(app)
    return guard_app(app)


runner = CliRunner()


def invoke(*args):
    return runner.invoke(_app(), ["plot", *args])


def assert_image(path: Path):
    data = path.read_bytes()
    assert len(data) > 2000
    if path.suffix == ".png":
        assert data.startswith(PNG_MAGIC)
    else:
        assert b"<svg" in data[:2000]


def assert_one_line_error(res, *fragments):
    assert res.exit_code != 0
    err = res.stderr.strip()
    assert "Traceback" not in res.output + res.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error:")
    for frag in fragments:
        assert frag in err


# ------------------------------------------------------------------------------------------ gpus syntax


def test_gpus_range_and_list():
    assert parse_range("8:1024") == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert parse_range("8:100") == [8, 16, 32, 64]
    assert parse_range("12:96") == [12, 24, 48, 96]
    assert parse_range("64:64") == [64]
    assert parse_list("8,12, 16") == [8, 12, 16]
    assert parse_list("64") == [64]
    assert GpuSweep().counts() == parse_range("8:1024")
    assert GpuSweep(gpus=64).counts() == [64]
    assert GpuSweep(gpus_list="16,8").counts() == [8, 16]


@pytest.mark.parametrize("text", ["8:4", "abc", "", "0:4", "8:x", "1:2:4", "-8:8", "64", "8,16"])
def test_gpus_range_rejects(text):
    with pytest.raises(BadGpus):
        parse_range(text)


@pytest.mark.parametrize("text", ["abc", "", "8,,16", "0", "8:16", "-8", "8,16:32"])
def test_gpus_list_rejects(text):
    with pytest.raises(BadGpus):
        parse_list(text)


def test_one_sweep_flag_at_a_time():
    with pytest.raises(BadGpus, match="not both"):
        GpuSweep(gpus=8, gpus_range="8:16").counts()


# ------------------------------------------------------------------------------------------ data layer


@pytest.fixture(scope="module")
def small_sweep():
    return plots.sweep([16, 24, 32], model="transformer-base", network="tcp-25g")


def test_sweep_rows_are_consistent(small_sweep):
    df = small_sweep
    ok = df[df["applicable"]]
    assert set(df["gpus"]) == {16, 24, 32}
    np.testing.assert_allclose(ok["speedup"], ok["allreduce_ms"] / ok["topology_ms"], rtol=1e-9)
    parts = ok["overlap_ms"] + ok["links_ms"] + ok["variance_ms"] + ok["uneven_ms"]
    np.testing.assert_allclose(parts, ok["saved_ms"], rtol=1e-9)
    np.testing.assert_allclose(ok["saved_ms"], ok["allreduce_ms"] - ok["topology_ms"], rtol=1e-6, atol=1e-9)
    # one-peer-exp needs n = 2^p: a gap (NaN) at 24, values at 16 and 32
    ope = df[df["topology"] == "one-peer-exp"].set_index("gpus")
    assert not ope.loc[24, "applicable"] and math.isnan(ope.loc[24, "speedup"])
    assert ope.loc[16, "speedup"] > 0 and ope.loc[32, "speedup"] > 0


def test_best_and_pays_from_logic():
    df = pd.DataFrame({
        "gpus": [8, 8, 16, 16, 32, 32, 64, 64],
        "topology": ["a", "b"] * 4,
        "applicable": [True] * 8,
        "speedup": [1.2, 0.9, 0.98, 1.01, 1.3, 1.1, 1.5, np.nan],
    })
    best = plots.best_per_gpus(df)
    assert list(best["topology"]) == ["a", "b", "a", "a"]
    assert plots.pays_from(df) == 32  # 8 wins, 16 does not (1.01 < 1.05), from 32 on it does
    assert plots.pays_from(df, margin=0.0) == 8
    df.loc[df["gpus"] == 64, "speedup"] = [1.0, 0.5]
    assert plots.pays_from(df) is None  # does not pay at the largest n


def test_plots_credit_only_rows_advise_could_pick():
    """BlueFog's dynamic graph ties ring at 64 GPUs, but advise never picks a row Decent-DP does not run: the
    sweep says which rows those are, and the best per n (factors' default bars, where it pays) skips them."""
    df = plots.sweep([64, 1024])
    bluefog = df[df["topology"] == "bluefog-dynamic-exp"]
    assert not bluefog["runnable"].any() and set(bluefog["library"]) == {"BlueFog"}
    assert df[df["topology"] == "ring"]["runnable"].all()
    best = plots.best_per_gpus(df)
    assert best["runnable"].all() and not set(best["topology"]) & {"bluefog-dynamic-exp", "sgp-exp", "osgp-exp"}
    with_all = plots.best_per_gpus(df.drop(columns="runnable"))  # a frame without the column: every row
    assert len(with_all) == len(best)


def test_preset_scenario_caps_gpus_per_node_and_weak_scaling():
    small = plots.preset_scenario(4, network="ib-100")
    assert small.shape.gpus_per_node == 4
    a = plots.preset_scenario(16, batch_per_gpu=1000)
    b = plots.preset_scenario(32, batch_per_gpu=1000)
    assert a.compute.compute_s == pytest.approx(b.compute.compute_s)  # same work per GPU
    c = plots.preset_scenario(16, batch_per_gpu={"transformer-base": 1000})
    assert c.compute.compute_s == pytest.approx(a.compute.compute_s)
    with pytest.raises(plots.PlotError):
        plots.preset_scenario(16, model="resnet50", batch_per_gpu={"transformer-base": 1000})


def test_what_if_apply_scales_the_right_parts():
    sc = plots.preset_scenario(32, network="ib-100")
    w = plots.WhatIf("x", inter_bandwidth=0.5, compute=2.0)
    out = w.apply(sc)
    assert out.network.inter.bandwidth_Bps == pytest.approx(sc.network.inter.bandwidth_Bps / 2)
    assert out.network.intra == sc.network.intra
    assert out.compute.backward_s == pytest.approx(2 * sc.compute.backward_s)
    assert plots.WhatIf("same").apply(sc) is sc


# ------------------------------------------------------------------------------------------ figures


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label() == label)


@pytest.mark.slow
def test_a_sweep_without_factors_has_the_same_times_from_the_means_alone(small_sweep):
    """What plot speedup draws (sweep factors=False: the means alone, about half the work)."""
    lean = plots.sweep([16, 24, 32], model="transformer-base", network="tcp-25g", factors=False)
    for column in ("allreduce_ms", "topology_ms", "speedup", "applicable", "runnable"):
        pd.testing.assert_series_equal(lean[column], small_sweep[column])  # bit for bit, NaN where NaN
    assert lean[["overlap_ms", "links_ms", "variance_ms", "uneven_ms", "saved_ms"]].isna().all().all()


def test_speedup_vs_gpus_draws_the_sweep(tmp_path):
    data = {}
    fig = plots.speedup_vs_gpus([16, 24, 32], ["tcp-25g", "ib-400"], "transformer-base", data=data)
    axes = fig.axes
    assert len(axes) == 2 and set(data) == {("transformer-base", "tcp-25g"), ("transformer-base", "ib-400")}
    for ax, net in zip(axes, ["tcp-25g", "ib-400"], strict=True):
        df = data[("transformer-base", net)]
        assert ax.get_xscale() == "log" and "GPUs" in ax.get_xlabel()
        assert net in ax.get_title()
        for topo in ("ring", "one-peer-exp"):
            y = np.asarray(_line(ax, topo).get_ydata(), dtype=float)
            expect = df[df["topology"] == topo].sort_values("gpus")["speedup"].to_numpy()
            np.testing.assert_allclose(y, expect)  # NaN (the gap at 24) included
        assert any(np.allclose(line.get_ydata(), 1.0) for line in ax.get_lines())  # the All-Reduce line
    assert "speedup over All-Reduce" in axes[0].get_ylabel()
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"ring", "one-peer-exp", "All-Reduce (speedup 1.0)"} <= legend
    for ext in ("png", "svg"):
        assert_image(plots.save(fig, tmp_path / f"s.{ext}"))


def test_speedup_marks_where_decentralization_pays():
    data = {}
    fig = plots.speedup_vs_gpus([8, 16, 32], "tcp-25g", data=data)
    n0 = plots.pays_from(data[("transformer-base", "tcp-25g")])
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert n0 is not None and str(n0) in texts and "pays" in texts


def test_factor_breakdown_bars_per_topology_and_per_n(tmp_path):
    fig = plots.factor_breakdown_bars(32, "tcp-25g")
    ax = fig.axes[0]
    df = plots.sweep([32], network="tcp-25g")
    names = [t.get_text() for t in ax.get_xticklabels()]
    assert names == list(df["topology"])
    assert "ms" in ax.get_ylabel()
    diamonds = _line(ax, "net saving (sum of the parts)")
    shown = df[df["applicable"] & (df["saved_ms"] >= -df["allreduce_ms"])]["saved_ms"].to_numpy()
    np.testing.assert_allclose(np.asarray(diamonds.get_ydata(), dtype=float), shown, rtol=1e-9)
    assert_image(plots.save(fig, tmp_path / "f.png"))

    fig = plots.factor_breakdown_bars([4, 16, 32], "ib-100", topology="alternating-exp-ring")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "16", "32"]
    assert "n/a" in [t.get_text() for t in ax.texts]  # AER needs >= 2 nodes: 4 GPUs is one 4-GPU node
    assert_image(plots.save(fig, tmp_path / "f.svg"))


def test_what_if_one_curve_per_variant(tmp_path):
    variants = (plots.WhatIf("base"), plots.WhatIf("slow net", inter_bandwidth=0.5))
    data = {}
    fig = plots.what_if([16, 32], "ib-100", variants=variants, data=data)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert [lab.split("  (")[0] for lab in labels] == ["base", "slow net"]
    best = plots.best_per_gpus(data["slow net"])["speedup"].to_numpy()
    np.testing.assert_allclose(_line(fig.axes[0], labels[1]).get_ydata(), best)
    assert_image(plots.save(fig, tmp_path / "w.png"))


def test_paper_comparison_labels_errors(tmp_path):
    df = pd.DataFrame({
        "cluster": ["c1"] * 4, "gpus": [8, 8, 16, 16], "method": ["allreduce", "one-peer-exp"] * 2,
        "published_ms": [100.0, 80.0, 60.0, 50.0], "predicted_ms": [110.0, 76.0, 60.0, np.nan],
    })
    df["error"] = df["predicted_ms"] / df["published_ms"] - 1
    fig = plots.paper_comparison(df)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(texts) == sorted(["+10%", "-5%", "+0%"])  # the NaN prediction gets no label
    assert "ms" in fig.axes[0].get_ylabel()
    assert_image(plots.save(fig, tmp_path / "p.png"))
    with pytest.raises(plots.PlotError):
        plots.paper_comparison(df.drop(columns="error"))


def test_parity_statistics_and_bands(tmp_path):
    fig = plots.parity([100.0, 108.0, 96.0, 130.0], [100.0, 100.0, 100.0, 100.0], ["a", "a", "b", "b"],
                       note="generated")
    ax = fig.axes[0]
    box = next(t.get_text() for t in ax.texts if "points" in t.get_text())
    assert "4 points" in box and "within ±5%: 50%" in box and "within ±10%: 75%" in box
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"±5%", "±10%", "predicted = measured", "a", "b"} <= set(labels)
    assert "measured" in ax.get_xlabel() and "predicted" in ax.get_ylabel() and "(ms)" in ax.get_xlabel()
    assert ax.get_title() == "generated"
    assert_image(plots.save(fig, tmp_path / "q.png"))


def test_parity_rejects_bad_input():
    with pytest.raises(plots.PlotError):
        plots.parity([1.0, 2.0], [1.0])
    with pytest.raises(plots.PlotError):
        plots.parity([0.0, -1.0], [1.0, 1.0])
    with pytest.raises(plots.PlotError):
        plots.parity([1.0, 2.0], [1.0, 2.0], labels=["x"])


def test_save_rejects_other_formats(tmp_path):
    fig = plots.parity([1.0], [1.0])
    with pytest.raises(plots.PlotError, match="png or .svg"):
        plots.save(fig, tmp_path / "x.jpg")


# ------------------------------------------------------------------------------------------ results file


def test_the_example_results_give_the_parity_points():
    """The notebook's frame of the example results (validation reads them; the figure takes the numbers)."""
    from dataclasses import asdict

    from rtmodel_validation.results import read_parity_points

    df = pd.DataFrame([asdict(p) for p in read_parity_points(EXAMPLE_RESULTS)])
    recs = [json.loads(line) for line in EXAMPLE_RESULTS.read_text().splitlines() if line.strip()]
    assert len(df) == 2 * len(recs)
    assert set(df["source"]) == {"measured"}
    first = recs[0]
    row = df.iloc[1]
    assert row["method"] == first["topology"]
    assert row["predicted_ms"] == pytest.approx(first["decentralized"]["predicted_mean_s"] * 1e3)
    assert row["measured_ms"] == pytest.approx(first["decentralized"]["measured"]["mean_s"] * 1e3)


# ------------------------------------------------------------------------------------------ CLI


@pytest.mark.parametrize("args, out", [
    (["speedup", "--gpus-range", "8:32", "--networks", "tcp-25g", "--networks", "ib-400"], "s.png"),
    (["speedup", "--gpus-list", "16,32", "--clusters", "a100-ib100", "--batch-per-gpu", "1000"], "s.svg"),
    (["factors", "--gpus", "32", "--network", "tcp-25g"], "f.png"),
    (["factors", "--gpus-range", "8:32", "--topology", "ring"], "f.svg"),
    (["what-if", "--gpus-range", "16:32", "--network", "ib-100"], "w.png"),
    (["paper"], "p.svg"),
    (["parity", "--results", str(EXAMPLE_RESULTS)], "q.png"),
])
def test_cli_writes_figures(tmp_path, args, out):
    res = invoke(*args, "--out", str(tmp_path / out))
    assert res.exit_code == 0, res.output + res.stderr
    assert_image(tmp_path / out)
    assert f"wrote {tmp_path / out}" in res.stdout


@pytest.mark.parametrize("args, fragments", [
    (["speedup", "--gpus-range", "64:8"], ["64:8"]),
    (["speedup", "--gpus", "lots"], ["lots"]),
    (["speedup", "--gpus", "8:16"], ["--gpus-range 8:16"]),
    (["speedup", "--gpus-range", "8:16", "--networks", "carrier-pigeon"], ["carrier-pigeon", "tcp-25g"]),
    (["speedup", "--gpus-range", "8:16", "--models", "gpt-9"], ["gpt-9"]),
    (["speedup", "--gpus-range", "8:16", "--networks", "ib-100", "--clusters", "a100-ib100"], ["not both"]),
    (["factors", "--gpus", "12", "--gpus-per-node", "8"], ["does not divide"]),
    (["factors", "--gpus", "16", "--topology", "star"], ["star"]),
    (["what-if", "--gpus-range", "8:16", "--batch-per-gpu", "-5"], ["batch-per-gpu"]),
    (["parity", "--results", "/nonexistent/results.jsonl"], ["cannot read"]),
])
def test_cli_bad_input_is_one_line(tmp_path, args, fragments):
    res = invoke(*args, "--out", str(tmp_path / "x.png"))
    assert_one_line_error(res, *fragments)
    assert not (tmp_path / "x.png").exists()


def test_cli_bad_output_paths(tmp_path):
    assert_one_line_error(invoke("paper", "--out", str(tmp_path / "x.jpg")), ".png or .svg")
    assert_one_line_error(invoke("paper", "--out", str(tmp_path / "no" / "x.png")), "does not exist")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        res = invoke("paper", "--out", str(locked / "x.png"))
        if res.exit_code == 0:  # running as root: permissions do not stop the write
            assert (locked / "x.png").exists()
        else:
            assert_one_line_error(res, "cannot write")
    finally:
        locked.chmod(0o700)


def test_cli_parity_flags_data_that_was_not_measured(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"method": "ring", "predicted_mean_s": 0.05, "measured_mean_s": 0.04,
                                "source": "synthetic"}) + "\n")
    out = tmp_path / "q.svg"
    res = invoke("parity", "--results", str(path), "--out", str(out))
    assert res.exit_code == 0, res.stderr
    assert "NOT MEASURED" in out.read_text()


def test_plot_modules_do_not_import_matplotlib_or_torch():
    code = ("import sys, rtmodel_cli.commands.plot, rtmodel_plots; "
            "bad = [m for m in ('matplotlib', 'torch') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_rtmodel_app_has_plot_commands():
    from rtmodel_cli.app import app

    res = runner.invoke(app, ["plot", "--help"])
    assert res.exit_code == 0
    for cmd in ("speedup", "factors", "what-if", "paper", "parity"):
        assert cmd in res.stdout


def test_a_sweep_of_several_curves_says_how_far_it_is_once_it_takes_a_while(monkeypatch, capsys):
    """Progress on stderr, one line per curve, once AFTER_S has passed; nothing for quick figures."""
    import rtmodel_plots.progress as progress

    monkeypatch.setattr(progress, "AFTER_S", 1e9)  # quick work (no clock in the test: a loaded box is slow)
    plots.what_if([8, 16], "ib-100")
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    plots.what_if([8, 16], "ib-100")
    lines = capsys.readouterr().err.splitlines()
    n = len(plots.DEFAULT_WHAT_IFS)
    assert len(lines) == n and lines[0].startswith(f"  1/{n} what-ifs drawn (") and "s left" in lines[0]
    assert lines[-1].startswith(f"  {n}/{n} what-ifs drawn") and "left" not in lines[-1]
    plots.speedup_vs_gpus([8, 16], ["ib-100", "tcp-25g"])
    assert capsys.readouterr().err.splitlines()[-1].startswith("  2/2 panels drawn (transformer-base on tcp-25g)")

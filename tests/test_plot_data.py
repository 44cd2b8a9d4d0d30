"""`rtmodel plot ... --data FILE.csv` (issue 64): each figure's numbers in long form, exactly the values it
draws (each test takes the figure the command saved and compares what its artists hold with the CSV),
and a --data path that would replace the figure or an input refused in one line before any work."""

import csv
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import rtmodel_plots as plots
from rtmodel_cli.app import app
from rtmodel_plots import crossover_plot, factors, paper, parity_plot, speedup, variance, whatif
from rtmodel_plots.style import FACTOR_COLORS, FACTOR_LABELS
from tests.helpers import scenario

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "notebooks" / "data" / "example_validations.jsonl"
runner = CliRunner()


def num(cell: str) -> float:
    return math.nan if cell == "" else float(cell)


def nums(rows: list[dict], column: str) -> np.ndarray:
    return np.array([num(r[column]) for r in rows], dtype=float)


def where(rows: list[dict], **match) -> list[dict]:
    return [r for r in rows if all(r[k] == v for k, v in match.items())]


def shown(ax) -> list:
    """The labelled lines of an axis (matplotlib names unlabelled ones '_child...')."""
    return [line for line in ax.get_lines() if not line.get_label().startswith("_")]


@pytest.fixture
def saved(monkeypatch):
    """The figures the command saves, as it drew them."""
    figs = []
    save = plots.save

    def keep(fig, path):
        figs.append(fig)
        return save(fig, path)

    monkeypatch.setattr(plots, "save", keep)
    return figs


def plot(tmp_path: Path, saved: list, *args) -> tuple:
    """Run `rtmodel plot ARGS --out f.png --data f.csv`: (the figure, the CSV's header, its rows)."""
    out, data = tmp_path / "f.png", tmp_path / "f.csv"
    res = runner.invoke(app, ["plot", *args, "--out", str(out), "--data", str(data)])
    assert res.exit_code == 0, res.output
    with data.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert f"wrote {data} ({len(rows)} rows)" in res.stdout and out.exists()
    (fig,) = saved
    return fig, reader.fieldnames, rows


def test_cells_read_back_bit_for_bit_and_rows_name_every_column():
    table = plots.PlotTable(("name", "x", "y"))
    table.add_points(name="a,b", x=np.array([8, 16], dtype=np.int64), y=[np.float64(0.1) + 0.2, math.nan])
    table.add(name=None, x=1, y=np.float32(0.5))
    rows = list(csv.reader(table.csv_text().splitlines()))
    assert rows == [["name", "x", "y"], ["a,b", "8", repr(0.1 + 0.2)], ["a,b", "16", ""], ["", "1", "0.5"]]
    assert float(rows[1][2]) == np.float64(0.1) + 0.2
    with pytest.raises(ValueError):
        table.add(name="a", x=1)  # a row names every column
    with pytest.raises(ValueError):
        table.add_points(name="a", x=[1, 2], y=[1.0])
    assert table.column("x", name="a,b") == [8, 16] and math.isnan(table.column("y", x=16)[0])
    with pytest.raises(plots.PlotError, match="not drawn by rtmodel_plots"):
        plots.plotted(object())


def test_speedup_csv_holds_each_panels_lines(tmp_path, saved):
    fig, header, rows = plot(
        tmp_path, saved, "speedup", "--gpus-list", "16,24,32", "--networks", "tcp-25g,ib-400"
    )
    assert tuple(header) == speedup.COLUMNS
    lines = 0
    for ax, net in zip(fig.axes, ["tcp-25g", "ib-400"], strict=True):
        panel = where(rows, model="transformer-base", network=net, cluster="", x_name="gpus")
        for line in shown(ax):
            mine = where(panel, topology=line.get_label())
            np.testing.assert_array_equal(nums(mine, "x"), line.get_xdata())
            np.testing.assert_array_equal(nums(mine, "speedup"), np.asarray(line.get_ydata(), float))
            lines += 1
        ar = where(panel, topology="allreduce")
        assert [r["x"] for r in ar] == ["16", "24", "32"] and set(nums(ar, "speedup")) == {1.0}
        for row in panel:  # speedup over All-Reduce at that n: its time over the topology's
            allreduce_ms = num(where(ar, x=row["x"])[0]["iteration_ms"])
            assert num(row["speedup"]) == pytest.approx(allreduce_ms / num(row["iteration_ms"]), nan_ok=True)
    assert "one-peer-exp" in {r["topology"] for r in rows if r["speedup"] == ""}  # its gap at 24, empty
    assert len(rows) == 3 * (lines + 2)  # a row per n, line and panel, and All-Reduce's per panel


def test_what_if_csv_holds_each_worlds_curve(tmp_path, saved):
    fig, header, rows = plot(tmp_path, saved, "what-if", "--gpus-range", "16:32", "--network", "ib-100")
    assert tuple(header) == whatif.COLUMNS
    curves = shown(fig.axes[0])
    assert len(curves) == len(plots.DEFAULT_WHAT_IFS)
    for line in curves:
        world = where(rows, what_if=line.get_label().split("  (")[0])
        picked = [r for r in world if r["topology"] != "allreduce"]
        np.testing.assert_array_equal(nums(picked, "x"), line.get_xdata())
        np.testing.assert_array_equal(nums(picked, "speedup"), np.asarray(line.get_ydata(), float))
        assert len(world) == 2 * 2  # the pick and All-Reduce at 16 and 32 GPUs
    assert len(rows) == 4 * len(curves)


def test_variance_csv_holds_both_panels(tmp_path, saved):
    fig, header, rows = plot(
        tmp_path, saved, "variance", "--gpus", "16", "--topologies", "ring", "--topologies", "complete"
    )
    assert tuple(header) == variance.COLUMNS
    count = 0
    for ax, x_name in zip(fig.axes, ["straggler_factor", "compute_cv"], strict=True):
        for line in shown(ax):
            if line.get_label().startswith("All-Reduce"):
                continue
            mine = where(rows, x_name=x_name, topology=line.get_label())
            np.testing.assert_array_equal(nums(mine, "x"), line.get_xdata())
            np.testing.assert_array_equal(nums(mine, "speedup"), line.get_ydata())
            count += len(mine)
        ar = where(rows, x_name=x_name, topology="allreduce")
        assert len(ar) == variance.POINTS and set(nums(ar, "speedup")) == {1.0}
        count += len(ar)
    assert count == len(rows) > 0


def test_factors_csv_holds_every_bars_parts_and_its_net_saving(tmp_path, saved):
    fig, header, rows = plot(tmp_path, saved, "factors", "--gpus", "32", "--network", "tcp-25g")
    assert tuple(header) == factors.COLUMNS
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_xticklabels()]
    assert len(rows) == len(names) * (len(FACTOR_COLORS) + 1)
    for factor in FACTOR_COLORS:
        part = where(rows, factor=factor)
        assert [r["topology"] for r in part] == names
        bars = next(c for c in ax.containers if c.get_label() == FACTOR_LABELS[factor])
        heights = [p.get_height() for p in bars.patches]
        # n/a: empty, drawn 0; a stacked patch keeps its top and bottom, so its height is off by a rounding
        np.testing.assert_allclose(np.nan_to_num(nums(part, "saved_ms")), heights, rtol=1e-12, atol=1e-12)
    net = nums(where(rows, factor="net"), "saved_ms")
    diamonds = next(line for line in ax.get_lines() if line.get_label() == "net saving (sum of the parts)")
    np.testing.assert_array_equal(net[np.asarray(diamonds.get_xdata(), int)], diamonds.get_ydata())


def test_paper_csv_holds_every_bar_and_error_label(tmp_path, saved):
    fig, header, rows = plot(tmp_path, saved, "paper")
    assert tuple(header) == paper.COLUMNS
    drawn = 0
    for ax in fig.axes:
        cluster = ax.get_title().split("  (")[0]
        mine = where(rows, cluster=cluster)
        methods = list(dict.fromkeys(r["topology"] for r in mine))
        for i, method in enumerate(methods):  # each method's published bars, then its predicted ones
            for container, bar in zip(
                ax.containers[2 * i : 2 * i + 2], ["published", "predicted"], strict=True
            ):
                heights = np.array([p.get_height() for p in container.patches], dtype=float)
                np.testing.assert_array_equal(
                    nums(where(mine, topology=method, bar=bar), "iteration_ms"), heights
                )
                drawn += len(heights)
        labels = sorted(t.get_text() for t in ax.texts)
        assert labels == sorted(f"{num(r['error']):+.0%}" for r in mine if r["error"] != "")
    assert drawn == len(rows)


def test_parity_csv_holds_every_point(tmp_path, saved):
    fig, header, rows = plot(tmp_path, saved, "parity", "--results", str(RESULTS))
    assert tuple(header) == parity_plot.COLUMNS
    points = [c for c in fig.axes[0].collections if c.get_label() in {r["label"] for r in rows}]
    for dots in points:
        mine = where(rows, label=dots.get_label(), unit="ms")
        np.testing.assert_array_equal(
            np.column_stack([nums(mine, "measured"), nums(mine, "predicted")]), dots.get_offsets()
        )
        np.testing.assert_allclose(nums(mine, "error"), nums(mine, "predicted") / nums(mine, "measured") - 1)
    assert sum(len(c.get_offsets()) for c in points) == len(rows) > 0


def test_crossover_csv_holds_the_curve_and_the_marks(tmp_path, saved):
    fig, header, rows = plot(tmp_path, saved, "crossover", "--gpus", "16", "--gpus-per-node", "4")
    assert tuple(header) == crossover_plot.COLUMNS
    curve = where(rows, kind="curve", x_name="inter_bandwidth_gbit_s")
    line = next(line for line in fig.axes[0].get_lines() if line.get_label().endswith("/ All-Reduce"))
    assert len(curve) == crossover_plot.POINTS and {r["topology"] for r in curve} == {
        line.get_label().split()[0]
    }
    np.testing.assert_array_equal(nums(curve, "x"), line.get_xdata())
    np.testing.assert_array_equal(nums(curve, "speedup"), line.get_ydata())
    (here,) = where(rows, kind="this cluster")
    assert any(num(here["x"]) == ln.get_xdata()[0] and ln.get_label().startswith("this cluster")
               for ln in fig.axes[0].get_lines())  # fmt: skip
    low, high = nums(where(rows, kind="too close to call"), "speedup")
    assert low < 1 < high and low + high == pytest.approx(2.0)


def test_crossover_table_holds_where_the_verdict_flips():
    """A scenario whose verdict flips inside the range (tests/test_crossover.py's): the dot's row."""
    from runtime_model.advice.advisor import advise
    from runtime_model.advice.crossover import with_crossovers

    sc = scenario(n=16, k=4, sd=0.0)
    sc = replace(sc, gossip_compute=sc.compute.scaled(1.2))
    fig = plots.crossover_curve(with_crossovers(advise(sc, topologies=["alternating-exp-ring"])), "test")
    table = plots.plotted(fig)
    dot = next(line for line in fig.axes[0].get_lines() if line.get_label().startswith("flips at"))
    assert table.column("x", kind="flip") == list(dot.get_xdata())
    assert table.column("speedup", kind="flip") == [1.0]
    assert table.column("topology", kind="flip") == ["alternating-exp-ring"]


# ------------------------------------------------------------------------------------------ refusals


def assert_refused(res, *fragments):
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:") and "Traceback" not in res.output, err
    for fragment in fragments:
        assert fragment in err


def refused(tmp_path: Path, *args):
    return runner.invoke(app, ["plot", *args])


def test_data_must_end_in_csv(tmp_path):
    out = tmp_path / "p.png"
    assert_refused(refused(tmp_path, "paper", "--out", str(out), "--data", str(tmp_path / "p.txt")), ".csv")
    assert not out.exists() and not (tmp_path / "p.txt").exists()


@pytest.mark.parametrize("link", [os.symlink, os.link])
def test_data_may_not_be_the_figure(tmp_path, link):
    out = tmp_path / "p.png"
    out.write_bytes(b"an older figure")
    link(out, tmp_path / "p.csv")  # one file by two names
    res = refused(tmp_path, "paper", "--out", str(out), "--data", str(tmp_path / "p.csv"))
    assert_refused(res, "--data", "--out")
    assert out.read_bytes() == b"an older figure"


def test_data_may_not_be_a_figure_not_yet_written(tmp_path):
    (tmp_path / "p.csv").symlink_to(tmp_path / "p.png")
    res = refused(tmp_path, "paper", "--out", str(tmp_path / "p.png"), "--data", str(tmp_path / "p.csv"))
    assert_refused(res, "--out")
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("link", [None, os.symlink])
def test_data_may_not_be_an_input(tmp_path, link):
    results = tmp_path / "results.csv"
    results.write_text(RESULTS.read_text())
    data = results
    if link is not None:
        data = tmp_path / "link.csv"
        link(results, data)
    args = ["parity", "--results", str(results), "--out", str(tmp_path / "q.png"), "--data", str(data)]
    assert_refused(refused(tmp_path, *args), "--data", "--results")
    assert results.read_text() == RESULTS.read_text() and not (tmp_path / "q.png").exists()


def test_data_in_a_missing_directory_is_one_line(tmp_path):
    args = [
        "what-if",
        "--gpus-range",
        "8:16",
        "--out",
        str(tmp_path / "w.png"),
        "--data",
        str(tmp_path / "no" / "w.csv"),
    ]
    assert_refused(refused(tmp_path, *args), "--data", "does not exist")
    assert not (tmp_path / "w.png").exists()


def test_without_data_no_csv_is_written(tmp_path):
    res = runner.invoke(app, ["plot", "paper", "--out", str(tmp_path / "p.png")])
    assert res.exit_code == 0 and res.stdout.strip() == f"wrote {tmp_path / 'p.png'}"
    assert [p.name for p in tmp_path.iterdir()] == ["p.png"]

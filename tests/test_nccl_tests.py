"""`--nccl-tests FILE`: nccl-tests' own output as the inter-node link model. Every layout nccl-tests has
printed parses to the same rows; a run made by the model's own formula gives its link back; the run's
own shape is reproduced size by size; every malformed file is one line (exit 2 from the shell)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from calibration.nccl_tests_link import nccl_tests_link
from calibration.nccl_tests_output import (
    ALL_REDUCE,
    SENDRECV,
    NcclTestsError,
    parse_nccl_tests,
    read_nccl_tests,
)
from rtmodel_cli.app import app
from runtime_model.core.scenario import Link, TabulatedCost
from tests.nccl_tests_text import MIB, SIZES, model_times, nccl_tests_output, small_network

runner = CliRunner()


def _net(algo="ring", *args, **kw):
    return small_network(algo, *args, **kw)


@pytest.mark.parametrize("layout", ["new", "old", "slurm"])
def test_every_layout_parses_to_the_same_run(layout):
    times = {s: 100.0 + s / 10e3 for s in SIZES}
    run = parse_nccl_tests(nccl_tests_output(times, layout=layout))
    assert (run.collective, run.ranks, run.hosts, run.ranks_per_host) == (ALL_REDUCE, 16, 2, 8)
    assert [r.nbytes for r in run.rows] == SIZES
    assert [r.time_s * 1e6 for r in run.rows] == pytest.approx([round(times[s], 1) for s in SIZES])
    assert "H100" in run.device


def test_the_collective_comes_from_the_footer_or_else_from_busbw_over_algbw():
    times = {s: 50.0 + s / 20e3 for s in SIZES}
    assert parse_nccl_tests(nccl_tests_output(times, collective="sendrecv")).collective == SENDRECV
    assert (
        parse_nccl_tests(nccl_tests_output(times, collective="sendrecv", footer=False)).collective == SENDRECV
    )
    assert parse_nccl_tests(nccl_tests_output(times, footer=False)).collective == ALL_REDUCE


@pytest.mark.parametrize(("algo", "nics"), [("ring", 1), ("ring", 4), ("tree", 1), ("auto", 8)])
def test_a_run_made_by_the_model_gives_its_link_back(algo, nics):
    truth = _net(algo, inter_Bps=12e9, nics=nics)
    run = parse_nccl_tests(nccl_tests_output(model_times(truth)))
    got = nccl_tests_link(run, _net(algo, inter_Bps=3e9, nics=nics))  # the preset guessed 4x too slow
    assert got.network.inter.bandwidth_Bps == pytest.approx(12e9, rel=0.02)
    assert got.busbw_worst_rel <= 0.05
    assert "nccl-tests" in got.network.name and "reproduces the run's bus bandwidth" in got.provenance(run)


def test_the_runs_own_shape_is_reproduced_size_by_size_across_a_protocol_switch():
    """NCCL's switch between protocols makes a step no one line follows (as a real Ethernet run does)."""
    times = {s: (200.0 if s < 16 * MIB else 700.0) + s / 180e3 for s in SIZES}
    run = parse_nccl_tests(nccl_tests_output(times))
    got = nccl_tests_link(run, _net())
    assert got.busbw_worst_rel <= 0.01
    assert isinstance(got.network.group_costs[got.group.key], TabulatedCost)


def test_tabulated_cost_interpolates_log_log_and_extends_with_the_lines_slope():
    cost = TabulatedCost(10e-6, 1e-9, "t", sizes=(1e6, 4e6), times_s=(1e-3, 4e-3))
    assert cost.time_s(1e6) == pytest.approx(1e-3) and cost.time_s(4e6) == pytest.approx(4e-3)
    assert cost.time_s(2e6) == pytest.approx(2e-3)  # log-log between the two
    assert cost.time_s(1e5) == pytest.approx(1e-3)  # below the table: its first size's
    assert cost.time_s(5e6) == pytest.approx(4e-3 + 1e6 * 1e-9)


def test_where_the_link_inside_the_node_bounds_the_run_the_nic_is_a_lower_bound_and_said_so():
    """8 NICs of 12 GB/s behind a 150 GB/s intra-node link: the run shows the chain, not the NICs."""
    truth = _net("auto", inter_Bps=12e9, nics=8, intra_Bps=150e9)
    run = parse_nccl_tests(nccl_tests_output(model_times(truth)))
    got = nccl_tests_link(run, _net("auto", inter_Bps=3e9, nics=8, intra_Bps=150e9))
    assert got.network.inter.bandwidth_Bps <= 12e9 * 1.02
    assert "at least" in got.provenance(run)


def test_a_run_faster_than_the_presets_nic_says_so():
    run = parse_nccl_tests(nccl_tests_output(model_times(_net(inter_Bps=50e9))))
    assert "above the preset's rate" in nccl_tests_link(run, _net(inter_Bps=12e9)).provenance(run)


def _text(**kw) -> str:
    return nccl_tests_output({s: 100.0 + s / 10e3 for s in SIZES}, **kw)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no nccl-tests column header"),
        ("\x00\x01 binary", "no nccl-tests column header"),
        (_text().replace("#  Rank", "# Dev"), "ranks and nodes are unknown"),
        (
            _text().replace(
                "# Collective test concluded: all_reduce_perf", "# Collective test concluded: all_gather_perf"
            ),
            "all_gather_perf run",
        ),
        ("\n".join(line for line in _text().splitlines() if not line.startswith("  ")), "no data rows"),
        ("\n".join(line for line in _text().splitlines() if "Rank  3 " not in line), "skips ranks"),
        (_text(ranks=6, hosts=2).replace("node01", "node00", 1), "not the same number per host"),
    ],
)
def test_a_malformed_output_is_one_line(text, says):
    with pytest.raises(NcclTestsError, match=says) as err:
        parse_nccl_tests(text, "f.txt")
    assert "\n" not in str(err.value) and str(err.value).startswith("--nccl-tests f.txt:")


@pytest.mark.parametrize(
    ("times", "ranks", "hosts", "says"),
    [
        ({s: 100.0 + s / 10e3 for s in SIZES[:2]}, 16, 2, "fewer than 3 sizes"),
        ({s: 100.0 + s / 10e3 for s in SIZES}, 8, 1, "one host"),
        ({s: 500.0 for s in SIZES}, 16, 2, "do not grow"),
    ],
)
def test_an_output_that_measures_no_network_is_one_line(times, ranks, hosts, says):
    run = parse_nccl_tests(nccl_tests_output(times, ranks=ranks, hosts=hosts), "f.txt")
    with pytest.raises(NcclTestsError, match=says):
        nccl_tests_link(run, _net())


def test_a_missing_or_huge_file_is_one_line(tmp_path):
    with pytest.raises(NcclTestsError, match="cannot read it"):
        read_nccl_tests(tmp_path / "missing.txt")
    big = tmp_path / "big.txt"
    big.write_bytes(b"#" * (17 << 20))
    with pytest.raises(NcclTestsError, match="is not an nccl-tests output"):
        read_nccl_tests(big)


def _run_file(tmp_path, inter_Bps=30e9):
    path = tmp_path / "all_reduce.txt"
    path.write_text(nccl_tests_output(model_times(_net("auto", inter_Bps, 8), ranks=16, hosts=2)))
    return path


def test_advise_takes_the_network_from_the_file_and_says_so(tmp_path):
    path = _run_file(tmp_path)
    args = ["advise", "--gpus", "64", "--gpu", "H100", "--gpus-per-node", "8", "--network", "ib-400"]
    res = runner.invoke(app, [*args, "--nics-per-node", "8", "--nccl-tests", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["provenance"]["network"].startswith(
        f"nccl-tests {path}: all_reduce_perf on 16 ranks / 2 hosts"
    )
    assert doc["inputs"]["nccl_tests"] == str(path)
    plain = runner.invoke(app, [*args, "--format", "json"])
    assert json.loads(plain.stdout)["predictions"][0]["iteration_s"] != doc["predictions"][0]["iteration_s"]


def test_a_scenario_file_names_the_output_relative_to_itself(tmp_path):
    _run_file(tmp_path)
    (tmp_path / "team.toml").write_text('gpus = 32\ngpus_per_node = 8\nnccl_tests = "all_reduce.txt"\n')
    res = runner.invoke(app, ["advise", "--scenario", str(tmp_path / "team.toml"), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["provenance"]["network"].startswith("nccl-tests")


def test_advise_refuses_what_it_cannot_use_in_one_line():
    res = runner.invoke(app, ["advise", "--gpus", "16", "--nccl-tests", "/nonexistent/all_reduce.txt"])
    assert res.exit_code == 2, res.output
    assert "cannot read it" in res.output and "Traceback" not in res.output


def test_a_sweep_plot_refuses_a_scenario_files_nccl_tests(tmp_path):
    _run_file(tmp_path)
    (tmp_path / "team.toml").write_text('nccl_tests = "all_reduce.txt"\n')
    out = tmp_path / "s.png"
    res = runner.invoke(
        app,
        ["plot", "speedup", "--gpus-range", "8:16", "--scenario", str(tmp_path / "team.toml"), "--out", str(out)],
    )
    assert res.exit_code == 2 and "plot crossover" in res.output and not out.exists()


def test_plot_crossover_marks_the_measured_bandwidth(tmp_path):
    out = tmp_path / "flip.png"
    res = runner.invoke(
        app,
        ["plot", "crossover", "--gpus", "32", "--nccl-tests", str(_run_file(tmp_path)), "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_the_fit_keeps_the_presets_latency_where_it_cannot_resolve_one():
    times = {s: s / 10e3 for s in SIZES}  # no fixed part at all
    run = parse_nccl_tests(nccl_tests_output(times))
    got = nccl_tests_link(run, replace(_net(), inter=Link(7e-6, 3e9)))
    assert got.network.inter.latency_s == 7e-6 and "the fit does not resolve it" in got.provenance(run)

"""nccl-tests logs as clusters write them (issue 64): launcher labels, several runs in one file, the run's
own shape against the question's, what NCCL says it ran, a per-NIC rate beyond any NIC, nccl-tests' own
check, and sizes or bandwidths no machine has. Every layout comes from tests/nccl_tests_text.py."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from calibration.nccl_tests_link import nccl_tests_link
from calibration.nccl_tests_output import NcclTestsError, parse_nccl_tests
from rtmodel_cli.app import app
from runtime_model.core.scenario import Network
from tests.nccl_tests_text import SIZES, model_times, nccl_tests_output, small_network

runner = CliRunner()
NET_IB_8 = "NET/IB : Using " + " ".join(f"[{i}]mlx5_{i}:1/IB" for i in range(8)) + " ; OOB eth0:10.0.0.1<0>"


def _net(algo="auto", *args, **kw):
    return small_network(algo, *args, **kw)


def _link(text: str, net: Network | None = None, gpus_per_node: int | None = None):
    run = parse_nccl_tests(text, "f.txt")
    return run, nccl_tests_link(run, net or _net(), gpus_per_node)


@pytest.mark.parametrize(
    "launcher", [{"label": "tag-output"}, {"label": "prepend-rank"}, {"layout": "slurm"}]
)
def test_a_launchers_labelled_log_gives_the_same_link_as_the_plain_log(launcher):
    times = model_times(_net(inter_Bps=20e9))
    _, plain = _link(nccl_tests_output(times))
    run, got = _link(nccl_tests_output(times, **launcher))
    assert got.network.inter == plain.network.inter and got.algorithm == plain.algorithm
    assert f"labels of {run.launcher} stripped" in got.provenance(run)


def test_two_runs_in_one_file_are_not_blended_the_last_complete_one_is_used():
    first, rerun = model_times(_net(inter_Bps=10e9)), model_times(_net(inter_Bps=20e9))
    run, got = _link(nccl_tests_output(first) + nccl_tests_output(rerun))
    _, alone = _link(nccl_tests_output(rerun))
    assert got.network.inter == alone.network.inter
    assert "last complete of its 2 all_reduce_perf runs (run 2; not blended" in got.provenance(run)
    cut_off = nccl_tests_output(rerun, footer=False).split("# Out of bounds")[0]
    run, got = _link(nccl_tests_output(first) + cut_off)  # the rerun was killed before its footer
    assert (
        got.network.inter == _link(nccl_tests_output(first))[1].network.inter and "(run 1;" in run.runs_note
    )


def test_runs_of_different_shapes_in_one_file_are_refused_in_one_line_naming_both():
    text = nccl_tests_output(model_times(_net())) + nccl_tests_output(
        model_times(_net(), 8, 2), ranks=8, hosts=2
    )
    with pytest.raises(NcclTestsError, match="16 ranks / 2 hosts.*8 ranks / 2 hosts") as err:
        parse_nccl_tests(text, "f.txt")
    assert "\n" not in str(err.value)


def test_a_run_of_another_collective_in_the_same_file_is_skipped_and_said():
    other = nccl_tests_output(model_times(_net())).replace(
        "concluded: all_reduce_perf", "concluded: all_gather_perf"
    )
    run, got = _link(other + nccl_tests_output(model_times(_net(inter_Bps=20e9))))
    assert "skipped its all_gather_perf run(s)" in got.provenance(run)


def test_one_test_per_process_without_mpi_is_refused_in_one_line():
    """nccl-tests built without MPI=1 under mpirun: every process is rank 0 of a test of its own
    (NVIDIA/nccl-tests#107 shows the doubled header and `Rank 0` on both hosts)."""
    one = nccl_tests_output({s: 100.0 + s / 10e3 for s in SIZES}, ranks=1, hosts=1)
    lines = one.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("#  Rank"))
    both = [lines[at], lines[at].replace("node00", "node01")]
    text = "".join(lines[:at] * 2 + both + lines[at + 1 :])  # as the two processes' lines interleave
    with pytest.raises(NcclTestsError, match="rank 0 is listed on node00 and on node01"):
        parse_nccl_tests(text, "f.txt")


def test_a_2x8_log_under_4_gpus_per_node_is_adapted_with_a_line_naming_both_shapes():
    times = model_times(_net(nics=8), 16, 2)
    run, asked = _link(nccl_tests_output(times), _net(nics=8), gpus_per_node=4)
    _, same = _link(nccl_tests_output(times), _net(nics=8), gpus_per_node=8)
    assert asked.network.inter == same.network.inter  # the per-NIC rate is the run's own shape's
    line = next(w for w in asked.warnings if "the question's 4 GPUs per node" in w)
    assert "2 x 8 ranks" in line and not same.warnings


def test_ncclS_nic_list_gives_the_runs_nics_per_host():
    """The question says 1 NIC per node; NCCL's NET/IB line lists the run's 8: the rate is per one of 8."""
    times = model_times(_net(nics=8, inter_Bps=40e9))
    run, got = _link(nccl_tests_output(times, info=(NET_IB_8,)), _net(nics=1))
    assert run.nics_per_host == 8
    assert got.network.inter.bandwidth_Bps == pytest.approx(40e9, rel=0.02)
    assert got.network.nics_per_node == 1  # the question's node stays the question's
    assert any("8 NIC(s) per host from its NET/IB line" in w for w in got.warnings)


@pytest.mark.parametrize(
    ("info", "algo"),
    [
        ("NCCL_ALGO set by environment to Ring", "ring"),
        (f"{1 << 30} Bytes -> Algo 0 proto 2 time 9000.0", "tree"),
        (f"AllReduce: {1 << 30} Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..31}}", "ring"),
    ],
)
def test_the_algorithm_the_log_says_nccl_ran_is_the_one_inverted(info, algo):
    truth = _net(algo, inter_Bps=12e9, nics=8)
    run, got = _link(nccl_tests_output(model_times(truth), info=(info,)), _net("auto", inter_Bps=3e9, nics=8))
    assert run.algorithm == algo and got.algorithm == algo
    assert got.network.inter.bandwidth_Bps == pytest.approx(12e9, rel=0.02)
    assert f"({algo}, as {run.algorithm_from} says" in got.provenance(run)


def test_the_fit_is_reported_in_bus_bandwidth_too():
    run, got = _link(nccl_tests_output({s: 100.0 + s / 45e3 for s in SIZES}))
    assert "S / 45.00 GB/s algbw = 84.38 GB/s busbw" in got.provenance(run)  # x 2(16-1)/16


def test_a_rate_beyond_any_nic_is_a_note_naming_the_likely_causes_not_a_refusal():
    times = model_times(_net(inter_Bps=150e9, nics=8))  # 1,200 Gbit/s per NIC under 1 NIC per node x 8 ...
    run, got = _link(nccl_tests_output(times), _net(nics=1, inter_Bps=25e9))
    line = next(w for w in got.warnings if "beyond any NIC made" in w)
    assert "NVLS or SHARP/CollNet" in line and "more than 1 NIC(s)" in line
    run, got = _link(nccl_tests_output(times, info=("NCCL_ALGO set by environment to NVLS",)), _net(nics=1))
    assert any("NCCL ran NVLink SHARP (NCCL_ALGO=NVLS in the log)" in w for w in got.warnings)


def test_sizes_nccl_tests_marked_wrong_are_not_fitted():
    times = {s: 100.0 + s / 10e3 for s in SIZES}
    bad = {SIZES[-1]: "12"}
    run = parse_nccl_tests(nccl_tests_output({**times, SIZES[-1]: 1.0}, wrong=bad))
    assert run.wrong_sizes == 1 and SIZES[-1] not in [r.nbytes for r in run.rows]
    assert "1 size(s) nccl-tests marked wrong" in nccl_tests_link(run, _net()).provenance(run)
    old = {SIZES[0]: "3e-02", SIZES[1]: "2e-05"}  # float: 1e-5 x (16 - 1) tolerated, 3e-2 not
    assert parse_nccl_tests(nccl_tests_output(times, layout="old", wrong=old)).wrong_sizes == 1
    with pytest.raises(NcclTestsError, match="marked every size wrong"):
        parse_nccl_tests(nccl_tests_output(times, wrong=dict.fromkeys(SIZES, "1")))


@pytest.mark.parametrize(
    ("times", "says"),
    [
        ({**{s: 1e4 for s in SIZES}, 1 << 30: 1e-3}, "beyond any machine"),  # prints as 0.0 us
        ({s: 100.0 + s / 10e3 for s in SIZES} | {-(1 << 31): 100.0}, "overflows"),
    ],
)
def test_a_bandwidth_or_size_no_machine_has_is_refused_in_one_line(times, says):
    with pytest.raises(NcclTestsError, match=says) as err:
        parse_nccl_tests(nccl_tests_output(times), "f.txt")
    assert "\n" not in str(err.value)


def test_advise_reads_a_tag_output_log_and_says_the_shape_it_adapted(tmp_path):
    path = tmp_path / "all_reduce.txt"
    path.write_text(nccl_tests_output(model_times(_net(inter_Bps=25e9, nics=8)), label="tag-output"))
    args = [
        "advise",
        "--gpus",
        "32",
        "--gpus-per-node",
        "4",
        "--nics-per-node",
        "8",
        "--nccl-tests",
        str(path),
    ]
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "mpirun --tag-output" in json.loads(res.stdout)["provenance"]["network"]
    assert "not the question's 4 GPUs per node" in res.stderr


def test_advise_refuses_a_file_of_runs_of_different_shapes_in_one_line(tmp_path):
    path = tmp_path / "all_reduce.txt"
    path.write_text(
        nccl_tests_output(model_times(_net()))
        + nccl_tests_output(model_times(_net(), 8, 2), ranks=8, hosts=2)
    )
    res = runner.invoke(app, ["advise", "--gpus", "16", "--nccl-tests", str(path)])
    assert res.exit_code == 2 and "runs of different shapes" in res.output and "Traceback" not in res.output

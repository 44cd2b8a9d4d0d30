"""`rtmodel validate --baseline fsdp`: FSDP2 (ZeRO-3) trained for real beside DDP and Decent-DP.

Bad input is one line, exit 2, before any rank starts; the blocks FSDP2 shards are the children of the
model's stacks; the job and report keep their JSON round trip (and load documents from before fsdp); an
FSDP2 that cannot step is one line from the preflight; a real run on 2 ranks (gloo on a CPU host, as the
other validate runs) times fsdp, records every rank's peak memory for every run, and fsdp's peak is below
DDP's: at 2 ranks FSDP2 keeps half the parameters, gradients and optimizer states. No test asserts a time.
"""

from __future__ import annotations

import json

import pytest

from rtmodel_validation.job import RankJob, RankReport, RunWorkload
from tests.test_validation import SMALL_MODEL, _invoke, _one_error_line

JOB = RankJob(2, 2, "ring", "ring", False, RunWorkload("synthetic", {"layers": 2}, 4, 25.0), 8, 4, 60.0)
REPORT = RankReport(1, 1, "node0", "cpu", "gloo", (0.1, 0.2), (0.09, 0.08), 0.0)

# ----------------------------------------------------------------------------- bad input (no rank starts)


@pytest.fixture
def profile_2(tmp_path):
    from calibration.synthetic import write_synthetic_profile

    return write_synthetic_profile(
        tmp_path / "p2.json", nodes=1, ranks_per_node=2, extra_workload=SMALL_MODEL
    )


@pytest.mark.parametrize(
    "value, torch_version, needle",
    [
        ("zero9", None, "--baseline must be one of fsdp, got 'zero9'"),
        ("fsdp", (2, 5), "--baseline fsdp needs torch >= 2.6"),  # FSDP2's public fully_shard
    ],
    ids=["unknown", "old-torch"],
)
def test_fsdp_where_it_cannot_run_is_one_line_exit_2(
    value, torch_version, needle, profile_2, tmp_path, monkeypatch
):
    import rtmodel_validation.sharded
    import rtmodel_validation.validate

    def no_launch(*a, **k):
        raise AssertionError("a bad --baseline reached the ranks")

    monkeypatch.setattr(rtmodel_validation.validate, "_run_local", no_launch)
    if torch_version is not None:
        monkeypatch.setattr(rtmodel_validation.sharded, "torch_version", lambda: torch_version)
    results = tmp_path / "r.jsonl"
    res = _invoke(
        ["--profile", str(profile_2), "--topology", "ring", "--baseline", value, "--results", str(results)]
    )
    assert res.exit_code == 2, res.output
    assert needle in _one_error_line(res) and "Traceback" not in res.output
    assert not results.exists()


def test_without_baseline_nothing_changes(profile_2):
    """The default runs what validate always ran: no fsdp in the plan, the job or the record."""
    from calibration.profile_view import load_profile
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.plan import make_plan, run_shape

    plan = make_plan(
        load_profile(profile_2), run_shape(2, 2), ValidateOptions("ring", iterations=4, warmup=2)
    )
    assert plan.baseline is None and plan.predicted.fsdp is None
    assert plan.rank_job(60.0).baseline is None
    fsdp = make_plan(
        load_profile(profile_2),
        run_shape(2, 2),
        ValidateOptions("ring", iterations=4, warmup=2, baseline="fsdp"),
    )
    assert fsdp.rank_job(60.0).baseline == "fsdp"


# ----------------------------------------------------------------------------- the rank boundary


@pytest.mark.parametrize(
    "value",
    [
        RankJob(**{**JOB.__dict__, "baseline": "fsdp"}),
        RankReport(
            **{
                **REPORT.__dict__,
                "fsdp_s": (0.3, 0.4),
                "peak_memory_bytes": {"allreduce": 1000, "decentralized": 900, "fsdp": 500},
                "peak_memory_source": "mem_tracker",
            }
        ),
    ],
    ids=["job+fsdp", "report+fsdp+memory"],
)
def test_round_trip_is_exact(value):
    assert type(value).from_json(json.loads(json.dumps(value.to_json()))) == value


def test_documents_from_before_fsdp_still_load():
    old_report = {
        k: v
        for k, v in REPORT.to_json().items()
        if k not in ("fsdp_s", "peak_memory_bytes", "peak_memory_source")
    }
    assert RankJob.from_json({k: v for k, v in JOB.to_json().items() if k != "baseline"}).baseline is None
    report = RankReport.from_json(old_report)
    assert report.fsdp_s == () and report.peak_memory_bytes == {} and report.peak_memory_source is None


# ----------------------------------------------------------------------------- what FSDP2 shards


def test_blocks_are_the_children_of_the_models_stacks():
    torch = pytest.importorskip("torch")
    from torch import nn

    from rtmodel_harness.fsdp import stack_blocks
    from rtmodel_harness.workloads import build_workload

    cpu = torch.device("cpu")
    mlp = build_workload("mlp", {}, 2, cpu).model  # Sequential(Linear, ReLU, ..., Linear): the Linears
    assert stack_blocks(mlp) == [m for m in mlp if isinstance(m, nn.Linear)]
    lm = build_workload(
        "transformer-tiny", {}, 32, cpu
    ).model  # the encoder's layers; embeddings and head: root
    assert stack_blocks(lm) == list(lm.encoder.layers)
    synthetic = build_workload("synthetic", SMALL_MODEL, 2, cpu).model
    assert stack_blocks(synthetic) == list(synthetic.layers) and len(synthetic.layers) == 4

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))  # a block's insides stay its own

    stages = nn.Sequential(
        nn.Linear(2, 2), nn.ReLU(), nn.Sequential(Block(), Block()), nn.Sequential(Block())
    )
    assert stack_blocks(stages) == [
        stages[0],
        stages[2][0],
        stages[2][1],
        stages[3][0],
    ]  # a stack in a stack opens
    assert stack_blocks(nn.Linear(2, 2)) == []  # no stack: the root alone is sharded


def test_an_fsdp2_that_cannot_step_is_one_line_from_the_preflight(one_rank_group):
    torch = one_rank_group
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.preflight import preflight_fsdp

    def broken(params):
        raise KeyError("capturable")

    preflight_fsdp(torch.device("cpu"), 1, lambda params: torch.optim.Adam(params))  # it steps here
    with pytest.raises(ValidationError) as info:
        preflight_fsdp(torch.device("cpu"), 1, broken)
    line = str(info.value)
    assert "\n" not in line and line.startswith("FSDP2 preflight failed on cpu (gloo): ")
    assert (
        "KeyError: 'capturable'" in line
        and f"torch {torch.__version__}" in line
        and "--baseline fsdp" in line
    )


# ----------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory):
    """One validation with --baseline fsdp on 2 ranks of a 2 MiB synthetic model (Adam): run once."""
    pytest.importorskip("torch")
    pytest.importorskip("decent_dp")
    from calibration.synthetic import write_synthetic_profile
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.validate import run_validation

    tmp = tmp_path_factory.mktemp("fsdp")
    profile = write_synthetic_profile(tmp / "p2.json", nodes=1, ranks_per_node=2, extra_workload=SMALL_MODEL)
    results = tmp / "runs.jsonl"
    opts = ValidateOptions(
        topology="ring", iterations=4, warmup=2, baseline="fsdp", results_path=results, timeout_s=180
    )
    return run_validation(profile, opts), results


@pytest.mark.slow
@pytest.mark.cluster
def test_fsdp_runs_end_to_end_with_a_time_and_a_peak_per_rank(fsdp_run):
    from tests.host_device import expected_device_and_backend

    res, _ = fsdp_run
    device, _backend = expected_device_and_backend(2)
    source = "cuda max_memory_allocated" if device == "cuda" else "mem_tracker"
    times = res.times_s["fsdp"]
    assert len(times) == 2 and all(len(t) == 4 and all(x > 0 for x in t) for t in times)
    c = res.fsdp
    assert c.name == "fsdp" and c.measured.samples == 8 and c.measured.mean_s > 0
    for run in (res.allreduce, res.decentralized, res.fsdp):  # every method: one peak per rank
        assert run.peak_memory_source == source
        assert len(run.peak_memory_bytes) == 2 and all(
            isinstance(p, int) and p > 0 for p in run.peak_memory_bytes
        )
    assert len(res.times_s["allreduce"][0]) == 4  # DDP's and Decent-DP's runs as before


@pytest.mark.slow
@pytest.mark.cluster
def test_fsdp_peak_is_below_ddps_at_two_ranks(fsdp_run):
    """An invariant, not a timing: FSDP2 over 2 ranks keeps half of the parameters, gradients and Adam
    states DDP keeps whole (plus one gathered block at a time), and no DDP bucket copy."""
    res, _ = fsdp_run
    ddp, fsdp = res.allreduce.peak_memory_bytes, res.fsdp.peak_memory_bytes
    assert all(f < d for f, d in zip(fsdp, ddp, strict=True)), (fsdp, ddp)
    param_bytes = round(SMALL_MODEL["param_mb"] * 2**20)  # fp32, whole model
    assert min(ddp) >= 4 * param_bytes  # parameters, gradients, Adam's two states: whole on every rank


@pytest.mark.slow
@pytest.mark.cluster
def test_the_record_carries_fsdp_and_reads_back(fsdp_run):
    from rtmodel_validation.results import (
        ValidationResult,
        dumps,
        read_parity_points,
        read_records,
        summarise_results,
    )

    res, results = fsdp_run
    (rec,), skipped = read_records(results)
    assert skipped == 0
    assert rec["fsdp"]["measured"]["mean_s"] == pytest.approx(res.fsdp.measured.mean_s)
    assert rec["fsdp"]["peak_memory_bytes"] == list(res.fsdp.peak_memory_bytes)
    assert rec["allreduce"]["peak_memory_source"] == res.allreduce.peak_memory_source
    back = ValidationResult.from_record(rec)
    assert back.fsdp.peak_memory_bytes == res.fsdp.peak_memory_bytes
    assert json.loads(dumps(back.to_record())) == rec  # the record read back writes the same line
    predicted = rec["fsdp"]["predicted_mean_s"]
    assert ("fsdp" in summarise_results(results).by_run) == (predicted is not None)  # without one: no error
    assert ("fsdp" in {p.method for p in read_parity_points(results)}) == (predicted is not None)

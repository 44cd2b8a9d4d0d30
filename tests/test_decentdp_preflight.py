"""Decent-DP's optimizers step on every torch in range (rtmodel_decentdp.compat), and validation's
preflight turns a Decent-DP that cannot step into one line before any training (rtmodel_validation.preflight).

torch 2.11 (no `_cuda_graph_capture_health_check` on torch.optim.Optimizer) is simulated by deleting the
method; a CUDA graph capture by faking the shim's `graph_capture_in_progress`.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("torch")
pytest.importorskip("decent_dp")

import torch  # noqa: E402
from decent_dp import optim as dd_optim  # noqa: E402

import rtmodel_decentdp  # noqa: E402, F401  (installs the shim on import, as users do)
from rtmodel_decentdp import compat  # noqa: E402
from rtmodel_validation.errors import ValidationError  # noqa: E402
from rtmodel_validation.preflight import (  # noqa: E402
    ADVISOR_OPTIMIZER,
    preflight_decent_dp,
    versions,
    world_size_line,
)
from tests.spawned import end_spawned_rank  # noqa: E402

CLASSES = [dd_optim.AccumAdam, dd_optim.AccumAdamW]


def _step(cls, device="cpu", steps: int = 2):
    """The advisor's line on a tiny model: AccumAdam(named parameters, lr=...), then a few steps."""
    model = torch.nn.Linear(4, 4).to(device)
    optimizer = cls(list(model.named_parameters()), lr=1e-3)
    before = model.weight.detach().clone()
    for _ in range(steps):
        model(torch.ones(2, 4, device=device)).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return before, model.weight.detach()


def _without_any_check(monkeypatch):
    """torch 2.11 as decent_dp 0.2.3 meets it: no such method anywhere (the shim removed too)."""
    monkeypatch.delattr(torch.optim.Optimizer, compat.CHECK_NAME, raising=False)
    for cls in CLASSES:
        monkeypatch.delattr(cls, compat.CHECK_NAME, raising=False)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_without_the_shim_torch_211_fails_and_the_shim_fixes_it(monkeypatch, cls):
    _without_any_check(monkeypatch)
    with pytest.raises(AttributeError, match=compat.CHECK_NAME):
        _step(cls)
    compat.ensure_optimizers_work()
    before, after = _step(cls)
    assert not torch.equal(before, after)  # it really stepped


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_shim_steps_where_torch_has_the_check_without_a_warning(cls):
    assert compat.installed()  # `import rtmodel_decentdp` installed it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's deprecated alias would warn on every step
        before, after = _step(cls)
    assert not torch.equal(before, after)


def test_installing_twice_changes_nothing():
    first = [cls.__dict__[compat.CHECK_NAME] for cls in CLASSES]
    inits = [cls.__dict__["__init__"] for cls in CLASSES]
    compat.ensure_optimizers_work()
    compat.ensure_optimizers_work()
    assert [cls.__dict__[compat.CHECK_NAME] for cls in CLASSES] == first
    assert [cls.__dict__["__init__"] for cls in CLASSES] == inits
    assert compat.installed()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_graph_capture_is_refused_like_torch_does(monkeypatch, cls):
    monkeypatch.setattr(compat, "graph_capture_in_progress", lambda: True)
    with pytest.raises(
        RuntimeError, match=f"CUDA graph capture of step\\(\\) for an instance of {cls.__name__} "
    ):
        _step(cls)


def test_no_capture_is_seen_outside_one():
    assert compat.graph_capture_in_progress() is False


def test_names_are_dropped_where_torch_takes_tensors_only(monkeypatch):
    """torch < 2.6 rejects the (name, tensor) pairs Decent-DP hands optim_fn: the constructors drop them."""
    for cls in CLASSES:
        monkeypatch.setattr(cls, "__init__", cls.__dict__["__init__"])  # restored after the test
    compat.ensure_optimizers_work(named_params_supported=False)
    compat.ensure_optimizers_work(named_params_supported=False)  # wrapped once, not twice
    for cls in CLASSES:
        assert not hasattr(cls.__dict__["__init__"].__wrapped__, "__wrapped__")
        model = torch.nn.Linear(3, 3)
        optimizer = cls(list(model.named_parameters()), lr=1e-3)
        assert [type(p) for p in optimizer.param_groups[0]["params"]] == [torch.nn.Parameter] * 2
        assert "param_names" not in optimizer.param_groups[0]
    weight, bias = torch.nn.Linear(2, 2).parameters()
    groups = compat.strip_param_names([{"params": [("w", weight)], "lr": 0.1}, {"params": bias}])
    assert groups[0]["params"] == [weight] and groups[0]["lr"] == 0.1 and groups[1]["params"] is bias


# ----------------------------------------------------------------------------- the preflight


def _one_line(exc: ValidationError) -> str:
    text = str(exc)
    assert "\n" not in text and text.strip() == text
    return text


def test_world_size_1_is_refused_in_one_line_before_anything_runs(monkeypatch):
    import rtmodel_validation.preflight as preflight

    monkeypatch.setattr(preflight, "_step_alone", lambda *a: pytest.fail("stepped with one rank"))
    with pytest.raises(ValidationError) as info:
        preflight_decent_dp("cpu", 1)
    line = _one_line(info.value)
    assert line == world_size_line(1)
    assert "at least 2 ranks" in line and "world size 1" in line and "--nproc-per-node 2" in line


def test_validate_refuses_one_rank_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from calibration.synthetic import write_synthetic_profile
    from rtmodel_cli.app import app

    profile = write_synthetic_profile(tmp_path / "p.json", nodes=1, ranks_per_node=2)
    res = CliRunner().invoke(
        app, ["validate", "--profile", str(profile), "--topology", "ring", "--nproc-per-node", "1"]
    )
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and ">= 2" in lines[0]


def test_a_failing_run_optimizer_is_one_line_naming_the_versions():
    def broken(params):
        raise KeyError("capturable")

    with pytest.raises(ValidationError) as info:
        preflight_decent_dp("cpu", 2, broken, optimizer_name="the run's Adam")
    line = _one_line(info.value)
    assert line.startswith("Decent-DP preflight failed on cpu: the run's Adam raised KeyError: 'capturable' ")
    assert f"torch {torch.__version__}" in line and "decent_dp 0.2.3" in line and versions() in line
    assert "pip install 'decent-dp==0.2.3'" in line and "import rtmodel_decentdp" in line


def test_accumadam_on_torch_211_without_the_shim_is_one_line(monkeypatch):
    """What a torch 2.11 host without the shim sees: the advisor's optimizer named, before any training."""
    _without_any_check(monkeypatch)
    with pytest.raises(ValidationError) as info:
        preflight_decent_dp("cpu", 2, lambda params: torch.optim.Adam(params))
    line = _one_line(info.value)
    assert f"{ADVISOR_OPTIMIZER} raised AttributeError: " in line and compat.CHECK_NAME in line
    assert versions() in line


def _job(optimizer: str = "adam"):
    from rtmodel_validation.job import RankJob

    return RankJob.from_json(
        {"world_size": 2, "ranks_per_node": 2, "topology": "ring", "decent_dp_topology": "ring",
         "registered_by_rtmodel": False, "iterations": 3, "warmup": 2, "timeout_s": 60,
         "workload": {"model": "mlp", "model_args": {"d_in": 8, "hidden": 8, "depth": 1, "classes": 2},
                      "batch_per_rank": 2, "bucket_cap_mb": 25.0, "optimizer": optimizer}})  # fmt: skip


@pytest.mark.parametrize(
    "optimizer, expected", [("adam", torch.optim.Adam), ("accum-adam", dd_optim.AccumAdam)]
)
def test_the_job_preflight_steps_the_runs_own_optimizer(monkeypatch, optimizer, expected):
    """run_rank's call: the run's optimizer is its workload's make_optimizer with the job's recipe."""
    import rtmodel_validation.preflight as preflight
    from rtmodel_harness.recipe import Recipe

    built, wrapped = [], []
    real_step_alone = preflight._step_alone

    def step_alone(make, device):
        real_step_alone(lambda named: built.append(make(named)) or built[-1], device)

    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(preflight, "_step_alone", step_alone)
    monkeypatch.setattr(preflight, "_step_wrapped", lambda makers, *a: wrapped.append(len(makers)))
    job = _job(optimizer)
    preflight.preflight_job(job, "cpu", Recipe(job.workload.precision, job.workload.optimizer))
    assert [type(o) for o in built] == [dd_optim.AccumAdam, expected] and wrapped == [2]


def test_the_job_preflight_refuses_one_rank(monkeypatch):
    import rtmodel_validation.preflight as preflight

    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 1)
    monkeypatch.setattr(preflight, "job_optimizer_factory", lambda *a: pytest.fail("looked for an optimizer"))
    with pytest.raises(ValidationError, match="^Decent-DP needs at least 2 ranks"):
        preflight.preflight_job(_job(), "cpu")


# ----------------------------------------------------------------------------- real ranks and a real GPU


def _rank(rank: int, init_file: str, errors) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        preflight_decent_dp("cpu", 2, lambda params: torch.optim.Adam(params, lr=1e-3))
    except Exception as exc:  # noqa: BLE001 - handed back to the test
        errors.put(f"rank {rank}: {type(exc).__name__}: {exc}")
    end_spawned_rank()


@pytest.mark.slow
@pytest.mark.cluster
def test_two_gloo_ranks_pass_the_preflight(tmp_path):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    errors = ctx.SimpleQueue()
    procs = [ctx.Process(target=_rank, args=(r, str(tmp_path / "init"), errors)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert errors.empty(), errors.get()


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty")  # refused before anything was captured
@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_accumadam_steps_on_cuda_and_refuses_a_real_capture(cls):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    compat.ensure_optimizers_work()
    before, after = _step(cls, "cuda:0")
    assert not torch.equal(before.cpu(), after.cpu())
    model = torch.nn.Linear(4, 4).cuda()
    optimizer = cls(list(model.named_parameters()), lr=1e-3)
    model(torch.ones(2, 4, device="cuda")).sum().backward()
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(stream), pytest.raises(RuntimeError, match="capturable is False"):
        with torch.cuda.graph(graph):
            optimizer.step()

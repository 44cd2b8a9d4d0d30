"""The training recipe (precision, optimizer) and the preset models as workloads: what the profiler times
and validation trains, carried from the profile into the rank job."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rtmodel_harness.errors import WorkloadError  # noqa: E402
from rtmodel_harness.model_choice import REFERENCE_MODELS, check_batch, default_batch  # noqa: E402
from rtmodel_harness.recipe import Recipe, train_step  # noqa: E402
from rtmodel_harness.workloads import build_workload  # noqa: E402

ROOT = Path(__file__).parent.parent
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
SMALL = {"width_div": 32}  # every width / 32: seconds on a CPU


class SpyScaler:
    """Stands in for GradScaler: records the calls the fp16 step makes."""

    def __init__(self):
        self.calls = []

    def scale(self, loss):
        self.calls.append("scale")
        return loss * 2.0

    def step(self, optimizer):
        self.calls.append("step")
        optimizer.step()

    def update(self):
        self.calls.append("update")


def _mlp():
    return build_workload("mlp", {"d_in": 16, "hidden": 32, "depth": 2}, 4, "cpu", rank=0)


@pytest.mark.parametrize(
    ("precision", "dtype"), [("fp32", torch.float32), ("tf32", torch.float32), ("bf16", torch.bfloat16)]
)
def test_autocast_gives_the_precisions_matmul_dtype(precision, dtype):
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with Recipe(precision).autocast("cpu"):
        assert (a @ b).dtype == dtype


def test_prepare_sets_tf32_flags_and_makes_a_scaler_only_for_fp16():
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        assert Recipe("tf32").prepare("cpu") is None
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
        assert Recipe("fp32").prepare("cpu") is None
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
        assert Recipe("bf16").prepare("cpu") is None
        assert isinstance(Recipe("fp16").prepare("cpu"), torch.amp.GradScaler)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def test_fp16_steps_through_the_scaler_and_the_others_do_not(monkeypatch):
    wl = _mlp()
    assert Recipe("fp16").uses_scaler and not Recipe("bf16").uses_scaler
    spy = SpyScaler()
    monkeypatch.setattr(Recipe, "autocast", lambda self, device: torch.autocast("cpu", enabled=False))
    opt = wl.make_optimizer(wl.model.parameters(), 1e-3, Recipe("fp16"))
    train_step(Recipe("fp16"), wl, wl.model, wl.make_batch(0), opt, spy)
    assert spy.calls == ["scale", "step", "update"]
    assert all(p.grad is None for p in wl.model.parameters())  # zero_grad after the step


def test_fp16_is_refused_without_cuda_and_tf32_on_cpu_is_said_to_be_fp32():
    with pytest.raises(WorkloadError, match="fp16.*no CUDA"):
        Recipe("fp16").device_note("cpu")
    assert Recipe("fp16").device_note("cuda") is None
    assert "plain fp32" in Recipe("tf32").device_note("cpu")
    assert Recipe("bf16").device_note("cpu") is None


def test_bad_recipe_values_are_one_line():
    with pytest.raises(WorkloadError, match="--precision must be one of fp32, tf32, fp16, bf16"):
        Recipe("fp8")
    with pytest.raises(WorkloadError, match="--optimizer must be one of adam, accum-adam"):
        Recipe("fp32", "sgd")


def test_optimizer_choice_and_the_synthetic_sleep_stand_in_wins():
    from decent_dp.optim import AccumAdam

    import rtmodel_decentdp  # noqa: F401  (as the stages do before AccumAdam)

    wl = _mlp()
    assert type(wl.make_optimizer(wl.model.parameters(), 1e-3, Recipe())) is torch.optim.Adam
    accum = wl.make_optimizer(wl.model.parameters(), 1e-3, Recipe("fp32", "accum-adam"))
    assert isinstance(accum, AccumAdam) and accum.param_groups[0]["accum_iter"] == 4
    synth = build_workload(
        "synthetic", {"optimizer": "sleep", "param_mb": 0.01, "layers": 2}, 2, "cpu", rank=0
    )
    assert type(
        synth.make_optimizer(synth.model.parameters(), 1e-3, Recipe("fp32", "accum-adam"))
    ).__name__ == ("SleepOptimizer")


@pytest.mark.parametrize("name", REFERENCE_MODELS)
def test_reference_workloads_train_a_step_with_deterministic_batches(name):
    batch = {"resnet50": 2, "transformer-xl-base": 192}.get(name, 64)
    wl = build_workload(name, SMALL, batch, "cpu", rank=1)
    again = build_workload(name, SMALL, batch, "cpu", rank=1)
    other = build_workload(name, SMALL, batch, "cpu", rank=0)
    flat = lambda b: [t for t in torch.utils._pytree.tree_leaves(b) if isinstance(t, torch.Tensor)]  # noqa: E731
    assert all(
        torch.equal(x, y) for x, y in zip(flat(wl.make_batch(3)), flat(again.make_batch(3)), strict=True)
    )
    assert not all(
        torch.equal(x, y) for x, y in zip(flat(wl.make_batch(3)), flat(other.make_batch(3)), strict=True)
    )
    assert all(
        torch.equal(p, q) for p, q in zip(wl.model.parameters(), other.model.parameters(), strict=True)
    )
    recipe = Recipe("bf16")
    opt = wl.make_optimizer(wl.model.parameters(), 1e-3, recipe)
    before = [p.detach().clone() for p in wl.model.parameters()]
    train_step(recipe, wl, wl.model, wl.make_batch(0), opt, recipe.prepare("cpu"))
    assert any(not torch.equal(b, p) for b, p in zip(before, wl.model.parameters(), strict=True))


def test_batch_per_rank_counts_the_models_units():
    tb = build_workload("transformer-base", SMALL, 100, "cpu", rank=0)  # 3 whole 32-token sentences
    (src, tgt_in), tgt_out = tb.make_batch(0)
    assert src.shape == tgt_in.shape == tgt_out.shape == (3, 32)
    (data, _, mems), _ = build_workload("transformer-xl-base", SMALL, 400, "cpu", rank=0).make_batch(0)
    assert data.shape == (192, 2) and mems[0].shape[1] == 2  # 2 segments of 192 tokens
    assert build_workload("resnet50", SMALL, 3, "cpu", rank=0).make_batch(0)[0].shape[0] == 3
    assert default_batch("transformer-base") == 1024 and default_batch("synthetic") == 8
    with pytest.raises(
        WorkloadError, match="too small for transformer-base: it counts tokens per rank, at least 32"
    ):
        check_batch("transformer-base", 31)


def test_old_jobs_load_as_fp32_adam_and_the_profiles_recipe_reaches_the_rank_job():
    from calibration.profile_view import profile_from_document
    from rtmodel_validation.job import RankJob, RunWorkload
    from rtmodel_validation.plan import resolve_workload

    old = {"model": "synthetic", "model_args": {}, "batch_per_rank": 2, "bucket_cap_mb": 25.0}
    assert RunWorkload.from_json(old) == RunWorkload("synthetic", {}, 2, 25.0, "fp32", "adam")
    doc = json.loads(PROFILE.read_text())
    assert resolve_workload(profile_from_document(doc, "old"), None, None)[0].precision == "fp32"
    doc["workload"].update(precision="bf16", optimizer="accum-adam")
    profile = profile_from_document(doc, "new")
    workload, notes = resolve_workload(profile, None, None)
    assert (workload.precision, workload.optimizer) == ("bf16", "accum-adam") and not notes
    workload, notes = resolve_workload(profile, None, None, precision="fp32")
    assert workload.precision == "fp32" and any("--precision fp32" in n and "bf16" in n for n in notes)
    job = RankJob(2, 2, "ring", "ring", False, workload, 1, 2, 60.0)
    assert RankJob.from_json(json.loads(json.dumps(job.to_json()))).workload.precision == "fp32"


def test_compute_ms_with_a_profile_replaces_only_the_compute(capsys):
    from rtmodel_inputs.sources import scenario_for

    base = scenario_for({"gpus": 4}, PROFILE).scenario
    given = scenario_for({"gpus": 4, "compute_ms": 123.0}, PROFILE)
    sc, prov, notes = given.scenario, given.provenance, given.notes
    assert sc.compute.compute_s == pytest.approx(0.123)
    assert sc.compute.forward_s / sc.compute.compute_s == pytest.approx(
        base.compute.forward_s / base.compute.compute_s
    )
    assert sc.compute.optimizer_s == base.compute.optimizer_s and sc.buckets == base.buckets
    assert sc.network == base.network and "--compute-ms 123" in prov["compute"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "replaces the profile's compute" in err[0] and notes[-1] == err[0]


@pytest.mark.slow
def test_profile_records_the_recipe_and_a_reference_model(tmp_path):
    from profiler.launch import run_profile
    from profiler.options import ProfileOptions

    opts = ProfileOptions(
        tmp_path / "p.json",
        "transformer-base",
        SMALL,
        64,
        quick=True,
        nproc_per_node=2,
        precision="bf16",
        optimizer="accum-adam",
        progress=False,
        iterations=2,
        reps=1,
    )
    doc = run_profile(opts)
    wl = doc["workload"]
    assert (wl["model"], wl["batch_per_rank"], wl["precision"], wl["optimizer"]) == (
        "transformer-base",
        64,
        "bf16",
        "accum-adam",
    )
    assert wl["model_args"] == {"width_div": 32, "seed": 0} and doc["complete"]

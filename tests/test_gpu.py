"""The GPU path for real: profile and validate on the visible CUDA GPUs (`pytest -m gpu`).

Skipped where torch sees no CUDA GPU (conftest.py). What each test pins down is the behaviour a one-GPU
user met: ranks sharing a GPU run on gloo on that GPU (NCCL refuses two ranks on one GPU), one rank per
GPU runs NCCL, and backend and device are recorded in the profile and in the result.
"""

from __future__ import annotations

import pytest

from profiler.options import ProfileOptions
from rtmodel_validation.options import ValidateOptions

pytestmark = [pytest.mark.gpu, pytest.mark.cluster]

MODEL = "mlp"
MODEL_ARGS = {"d_in": 256, "hidden": 512, "depth": 3}


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


def _profile(tmp_path, nproc: int):
    from profiler.launch import run_profile

    out = tmp_path / f"profile-{nproc}.json"
    doc = run_profile(ProfileOptions(out, model=MODEL, model_args=MODEL_ARGS, batch_per_rank=16, quick=True,
                                     nproc_per_node=nproc, progress=False, timeout_s=180))
    return out, doc


def test_profile_without_options_measures_the_papers_recipe_on_the_visible_gpus(tmp_path):
    from profiler.launch import run_profile
    from rtmodel_util.backend_choice import pick_backend

    doc = run_profile(ProfileOptions(tmp_path / "default.json", quick=True, progress=False, timeout_s=300))
    shape, workload = doc["shape"], doc["workload"]
    assert doc["complete"] and shape["device"] == "cuda"
    assert shape["backend"] == pick_backend("auto", shape["world_size"], _gpus())[0]
    assert (workload["model"], workload["precision"], workload["batch_per_rank"]) == ("transformer-base", "fp16", 1024)
    assert all(min(rank) > 0 for rank in doc["compute"]["forward_s"])


def test_validate_with_ranks_sharing_one_gpu_runs_gloo_on_it(tmp_path, monkeypatch):
    pytest.importorskip("decent_dp")
    from rtmodel_validation.validate import run_validation

    monkeypatch.chdir(tmp_path)
    nproc = _gpus() + 1  # one GPU at least is shared
    profile, doc = _profile(tmp_path, nproc)
    assert (doc["shape"]["device"], doc["shape"]["backend"]) == ("cuda", "gloo")
    res = run_validation(profile, ValidateOptions(recommended=True, iterations=6, warmup=3, timeout_s=300))
    assert (res.device, res.backend) == ("cuda", "gloo")
    assert res.allreduce.measured.samples == nproc * 6 and res.decentralized.measured.samples == nproc * 6


def test_validate_refuses_nccl_for_ranks_sharing_a_gpu_in_one_line(tmp_path, monkeypatch):
    pytest.importorskip("decent_dp")
    from rtmodel_validation.errors import ValidationError
    from rtmodel_validation.validate import run_validation

    monkeypatch.chdir(tmp_path)
    profile, _ = _profile(tmp_path, _gpus() + 1)
    with pytest.raises(ValidationError, match="NCCL refuses two ranks on one GPU"):
        run_validation(profile, ValidateOptions(recommended=True, iterations=4, warmup=3, timeout_s=120, backend="nccl"))


def test_validate_with_one_rank_per_gpu_runs_nccl(tmp_path, monkeypatch):
    pytest.importorskip("decent_dp")
    if _gpus() < 2:
        pytest.skip("one rank per GPU needs two or more GPUs")
    from rtmodel_validation.validate import run_validation

    monkeypatch.chdir(tmp_path)
    profile, doc = _profile(tmp_path, _gpus())
    assert doc["shape"]["backend"] == "nccl"
    res = run_validation(profile, ValidateOptions(recommended=True, iterations=6, warmup=3, timeout_s=300))
    assert (res.device, res.backend) == ("cuda", "nccl")

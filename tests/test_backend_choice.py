"""One backend rule for every launch path: NCCL only when each rank on the host has a GPU of its own."""

from __future__ import annotations

import pytest

from rtmodel_util.backend_choice import HOST_RANKS_ENV, pick_backend, ranks_on_this_host
from runtime_model.core.errors import UserError


@pytest.mark.parametrize(
    "ranks, gpus, backend, shared",
    [(2, 0, "gloo", False), (2, 2, "nccl", False), (4, 8, "nccl", False), (2, 1, "gloo", True), (8, 4, "gloo", True)],
)
def test_auto_uses_nccl_only_when_every_rank_has_its_own_gpu(ranks, gpus, backend, shared):
    chosen, why = pick_backend("auto", ranks, gpus)
    assert chosen == backend
    assert (why is not None) == shared
    if shared:
        assert why == f"{ranks} ranks share {gpus} GPU(s) on this host: using gloo (NCCL needs one GPU per rank)"


def test_gloo_is_always_allowed_and_says_nothing():
    assert pick_backend("gloo", 4, 1) == ("gloo", None)
    assert pick_backend("gloo", 2, 0) == ("gloo", None)


@pytest.mark.parametrize(
    "ranks, gpus, words",
    [(2, 0, "needs CUDA GPUs, and torch sees none here"), (2, 1, "2 ranks share 1 GPU(s) on this host")],
)
def test_nccl_that_cannot_run_here_is_one_line(ranks, gpus, words):
    with pytest.raises(UserError) as err:
        pick_backend("nccl", ranks, gpus)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_unknown_backend_is_refused():
    with pytest.raises(UserError, match="--backend must be one of auto, gloo, nccl, got 'mpi'"):
        pick_backend("mpi", 2, 2)


def test_ranks_on_this_host_prefers_the_local_launchers_count():
    assert ranks_on_this_host({HOST_RANKS_ENV: "4", "LOCAL_WORLD_SIZE": "2"}) == 4  # pretend nodes share a host
    assert ranks_on_this_host({"LOCAL_WORLD_SIZE": "8"}) == 8  # torchrun
    assert ranks_on_this_host({"LOCAL_WORLD_SIZE": ""}) == 1
    assert ranks_on_this_host({}) == 1


@pytest.mark.parametrize("local_world, gpus, backend", [("2", 1, "gloo"), ("2", 2, "nccl"), ("4", 2, "gloo")])
def test_a_torchrun_rank_applies_the_same_rule(monkeypatch, local_world, gpus, backend):
    """validate and profile under torchrun: LOCAL_WORLD_SIZE ranks on this host share `gpus` GPUs (faked)."""
    torch = pytest.importorskip("torch")
    from rtmodel_harness.distributed import backend_note, choose_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.delenv(HOST_RANKS_ENV, raising=False)
    monkeypatch.delenv("RTMODEL_DEVICE_INDEX", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world)
    monkeypatch.setenv("LOCAL_RANK", "1")
    chosen, device = choose_backend("auto")
    assert chosen == backend and device == torch.device("cuda", 1 % gpus)
    assert (backend_note("auto") is not None) == (backend == "gloo")
    if backend == "gloo":
        with pytest.raises(UserError, match="NCCL refuses two ranks on one GPU"):
            choose_backend("nccl")

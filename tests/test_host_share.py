"""Ranks that share one machine's cores get their share as OpenMP threads, unless the user chose."""

import os

import pytest

from rtmodel_emulation import EmulatedCluster
from rtmodel_util.host_share import OMP_THREADS_ENV, omp_threads_env, threads_per_rank


@pytest.mark.parametrize(
    "cores, ranks, threads", [(2, 4, 1), (2, 1, 2), (16, 4, 4), (16, 3, 5), (None, 2, 1)]
)
def test_each_rank_gets_its_share_of_the_cores_and_at_least_one(monkeypatch, cores, ranks, threads):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert threads_per_rank(ranks) == threads


def test_a_users_own_setting_wins(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.delenv(OMP_THREADS_ENV, raising=False)
    assert omp_threads_env(8) == {OMP_THREADS_ENV: "2"}
    monkeypatch.setenv(OMP_THREADS_ENV, "7")
    assert omp_threads_env(8) == {}


def test_one_rank_nodes_of_the_emulator_share_the_cores_not_each_take_them_all(monkeypatch):
    """torchrun pins one thread only for several ranks per node; the emulator's 4 one-rank nodes on 2
    cores ran 2 threads each, and their sleeps overran by 60 %."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.delenv(OMP_THREADS_ENV, raising=False)
    c = EmulatedCluster(nodes=4, ranks_per_node=1, inter_bandwidth_mbit=200, inter_delay_ms=0.2)
    for node, cmd in enumerate(c.torchrun_commands(["-m", "pkg.mod"])):
        assert f"{OMP_THREADS_ENV}=1" in cmd, node
    monkeypatch.setenv(OMP_THREADS_ENV, "3")
    assert not any(a.startswith(OMP_THREADS_ENV) for a in c.torchrun_commands(["-m", "pkg.mod"])[0])


def test_local_profile_and_validation_ranks_get_the_same_share(monkeypatch, tmp_path):
    """The profile times compute with each rank's share of the cores; a validation with fewer threads
    per rank would time slower compute than was profiled."""
    from profiler.launch import _rank_env
    from rtmodel_validation.launch import _env

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.delenv(OMP_THREADS_ENV, raising=False)
    for nproc in (1, 2, 4):
        profiled = _rank_env(0, nproc, nproc, 29500, str(tmp_path), {})[OMP_THREADS_ENV]
        assert profiled == _env(nproc, tmp_path)[OMP_THREADS_ENV] == str(16 // nproc)

"""Shared pytest fixtures. Each block is owned by one part of the project; keep blocks self-contained."""

import pytest


# ---- BEGIN emulated_cluster fixture (owner: rtmodel_emulation/) ------------------------------------------------
@pytest.fixture(scope="module")
def emulated_cluster(request):
    """An up EmulatedCluster shared by one test module: 2 nodes x 2 ranks, 200 Mbit/s, 2 ms one-way.

    Override with `@pytest.mark.parametrize("emulated_cluster", [dict(nodes=3, ...)], indirect=True)`.
    Skips (with the reason) where the machine cannot emulate: not root, no netns/TUN/tc.
    """
    from rtmodel_emulation import EmulatedCluster, available

    ok, reason = available()
    if not ok:
        pytest.skip(reason)
    params = dict(nodes=2, ranks_per_node=2, inter_bandwidth_mbit=200.0, inter_delay_ms=2.0)
    params.update(getattr(request, "param", None) or {})
    with EmulatedCluster(**params) as cluster:
        yield cluster


# ---- END emulated_cluster fixture ----------------------------------------------------------------------


# ---- BEGIN one_rank_group fixture (owner: rtmodel_validation/ and rtmodel_harness/) ---------------------------------
@pytest.fixture
def one_rank_group(tmp_path):
    """A gloo group of one process (this one): a collective's arithmetic without other ranks."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield torch
    dist.destroy_process_group()


# ---- END one_rank_group fixture --------------------------------------------------------------------------


# ---- BEGIN gpu marker (owner: the GPU path) -------------------------------------------------------------
def pytest_collection_modifyitems(config, items):
    """`gpu` tests run only where torch sees a CUDA GPU; elsewhere they are skipped with the reason."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs a CUDA GPU (torch sees none here)")
        for item in gpu_items:
            item.add_marker(skip)


# ---- END gpu marker -------------------------------------------------------------------------------------

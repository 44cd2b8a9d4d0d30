"""Where a rank trains: its device, the backend, joining the process group, and time that waits for the
GPU. One choice for the profiler and validation alike (they used to carry their own copies).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from rtmodel_harness.errors import BackendError
from rtmodel_util.backend_choice import pick_backend, ranks_on_this_host
from rtmodel_util.launch_env import DEVICE_INDEX_ENV


def device_index() -> int:
    """This rank's GPU: the launcher's index, else LOCAL_RANK; wraps around when ranks share GPUs."""
    idx = int(os.environ.get(DEVICE_INDEX_ENV) or os.environ.get("LOCAL_RANK") or 0)
    return idx % max(1, torch.cuda.device_count())


def _gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def choose_backend(requested: str) -> tuple[str, torch.device]:
    """rtmodel_util.backend_choice's rule for this rank (nccl when every rank on this host has a GPU of
    its own, else gloo; or what --backend asks for); the GPU is device_index()'s."""
    backend, _ = pick_backend(requested, ranks_on_this_host(), _gpus(), BackendError)
    if _gpus():
        return backend, torch.device("cuda", device_index())
    return backend, torch.device("cpu")


def backend_note(requested: str) -> str | None:
    """Why `auto` chose gloo on a GPU host (ranks share a GPU), for the lead rank to say; else None."""
    return pick_backend(requested, ranks_on_this_host(), _gpus(), BackendError)[1]


def nccl_version() -> str | None:
    """NCCL's version as "2.28.9", or None without CUDA or in a build without NCCL: what every profile
    and GPU result records."""
    if not torch.cuda.is_available():
        return None
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - some builds have no NCCL
        return None
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def init_distributed(requested: str, timeout_s: float) -> tuple[str, torch.device]:
    """Bind this process to its GPU, then create the default process group; returns (backend, device).

    Why set_device first: NCCL and the collectives that use "the current device" (barrier, *_object)
    must use the GPU we time on. Why device_id on NCCL: a bound group forms its communicator now and
    new_group splits it eagerly (torch >= 2.4, init_process_group's `device_id`), instead of lazily in
    a group's first, possibly timed, collective. Gloo takes no device_id.
    """
    backend, device = choose_backend(requested)
    if device.type == "cuda":
        torch.cuda.set_device(device.index)
    bound = {"device_id": device} if backend == "nccl" else {}
    dist.init_process_group(backend, timeout=timedelta(seconds=float(timeout_s)), **bound)
    return backend, device


def barrier(device: torch.device) -> None:
    """Global barrier (NCCL wants the device named, gloo does not)."""
    if device.type == "cuda" and dist.get_backend() == "nccl":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def sync(device: torch.device) -> None:
    """Wait until the GPU has finished all queued work (nothing to wait for on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clock(device: torch.device) -> float:
    """Host time once the GPU has finished all queued work: an iteration ends when its kernels do."""
    sync(device)
    return time.perf_counter()

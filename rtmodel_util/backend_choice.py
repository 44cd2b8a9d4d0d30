"""One backend choice for every launch path (profile, validate, their torchrun ranks, the benchmarks).

Why one rule in one place: NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), so `auto` may
only pick NCCL when every rank on this host has a GPU of its own; ranks that share a GPU use gloo,
which copies through the host. Each launcher used to carry its own copy of this rule, and validate
had none, so a one-GPU profile (2 ranks sharing it) could not be validated. Torch-free: launchers
decide before any rank imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from runtime_model.core.errors import UserError

BACKENDS = ("auto", "gloo", "nccl")
HOST_RANKS_ENV = "RTMODEL_HOST_RANKS"  # set by a local launcher whose pretend nodes share this host


def ranks_on_this_host(environ: Mapping[str, str] | None = None) -> int:
    """How many ranks run on this host: the local launcher's count, else torchrun's LOCAL_WORLD_SIZE."""
    env = os.environ if environ is None else environ
    for key in (HOST_RANKS_ENV, "LOCAL_WORLD_SIZE"):
        value = env.get(key, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def pick_backend(
    requested: str, ranks_on_host: int, gpus: int, error: type[UserError] = UserError
) -> tuple[str, str | None]:
    """(backend, why it is not the obvious one or None); `error` with one line when it cannot run here."""
    if requested not in BACKENDS:
        raise error(f"--backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    sharing = gpus > 0 and ranks_on_host > gpus
    if requested == "nccl":
        if gpus == 0:
            raise error("--backend nccl needs CUDA GPUs, and torch sees none here")
        if sharing:
            raise error(
                f"--backend nccl needs one GPU per rank, but {ranks_on_host} ranks share {gpus} GPU(s) on this "
                "host (NCCL refuses two ranks on one GPU); use --backend gloo, or auto"
            )
        return "nccl", None
    if requested == "gloo":
        return "gloo", None
    if sharing:
        return (
            "gloo",
            f"{ranks_on_host} ranks share {gpus} GPU(s) on this host: using gloo (NCCL needs one GPU per rank)",
        )
    return ("nccl" if gpus else "gloo"), None


def visible_gpus() -> int:
    """Visible CUDA GPUs; torch is imported only when the machine has an NVIDIA driver at all, so a
    launcher on a CPU host stays fast and torch-free."""
    if not os.path.exists("/dev/nvidiactl"):
        return 0
    import torch

    return torch.cuda.device_count()

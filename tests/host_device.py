"""What a real local run uses on THIS host, so that tests pass on a CUDA host as on a CPU host."""

from __future__ import annotations


def expected_device_and_backend(ranks: int) -> tuple[str, str]:
    """(device type, backend) of `ranks` local ranks launched with --backend auto on this host."""
    import torch

    from rtmodel_util.backend_choice import pick_backend

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ("cuda" if gpus else "cpu"), pick_backend("auto", ranks, gpus)[0]

"""Who is in the run: world size, ranks per node, node names, backend, device, library versions
(and on NCCL, the NCCL_ALGO the ranks saw, null when unset: NCCL chose its algorithm per call).

Node names: socket.gethostname() per rank, unless RTMODEL_NODE_NAME is set. On the emulated cluster
every network namespace shares one hostname, so each node's launcher sets RTMODEL_NODE_NAME; local
launches that pretend several nodes (--ranks-per-node) set it to "<host>-node<i>".
"""

from __future__ import annotations

import os
import platform
import socket

import torch
import torch.distributed as dist

from profiler.errors import ProfilingError
from rtmodel_util.processes import NODE_NAME_ENV, RANKS_PER_NODE_ENV


def node_name() -> str:
    return os.environ.get(NODE_NAME_ENV) or socket.gethostname()


def ranks_per_node(option: int | None, world_size: int) -> int:
    """--ranks-per-node, else the launcher's RTMODEL_RANKS_PER_NODE, else torchrun's LOCAL_WORLD_SIZE."""
    for value, what in ((option, "--ranks-per-node"), (os.environ.get(RANKS_PER_NODE_ENV), RANKS_PER_NODE_ENV),
                        (os.environ.get("LOCAL_WORLD_SIZE"), "LOCAL_WORLD_SIZE")):
        if value is not None and value != "":
            k = int(value)
            if k < 1 or world_size % k:
                raise ProfilingError(f"{what}={k} does not divide the world size {world_size}")
            return k
    return world_size


def _nccl_version() -> str | None:
    if not torch.cuda.is_available():
        return None
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # some builds have no NCCL
        return None
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def collect_shape(k: int, backend: str, device: torch.device) -> tuple[dict, list[str]]:
    """The shape section (identical on every rank) plus warnings worth printing."""
    n = dist.get_world_size()
    if n < 2:
        raise ProfilingError("a profile needs at least 2 ranks (an all-reduce needs a partner); this job has 1")
    names: list = [None] * n
    dist.all_gather_object(names, node_name())
    shape = {
        "world_size": n,
        "ranks_per_node": k,
        "nodes": n // k,
        "node_names": names,
        "backend": backend,
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine(),
        "torch_version": torch.__version__,
        "nccl_version": _nccl_version(),
    }
    if backend == "nccl":  # which algorithms NCCL could pick: calibration inverts the one that ran
        shape["nccl_algo_env"] = os.environ.get("NCCL_ALGO")
    warnings = []
    blocks = [names[i * k:(i + 1) * k] for i in range(n // k)]
    distinct = sorted(set(names))
    if any(len(set(b)) != 1 for b in blocks) or (len(distinct) > 1 and len(distinct) != n // k):
        warnings.append(
            f"node names {distinct} do not form {n // k} node-major blocks of {k} ranks; "
            f"patterns assume rank = node * {k} + local (set {NODE_NAME_ENV} or --ranks-per-node if wrong)"
        )
    elif n // k > 1 and len(distinct) == 1:
        warnings.append(f"all {n} ranks report node name {distinct[0]!r} but the shape has {n // k} nodes of {k} "
                        f"(fine for namespaces/containers; set {NODE_NAME_ENV} per node to record real names)")
    return shape, warnings

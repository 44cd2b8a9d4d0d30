"""Who is in the run: world size, ranks per node, node names, backend, device, library versions
(and on NCCL, the NCCL_ALGO the ranks saw, null when unset: NCCL chose its algorithm per call).

Node names: socket.gethostname() per rank, unless RTMODEL_NODE_NAME is set. On the emulated cluster
every network namespace shares one hostname, so each node's launcher sets RTMODEL_NODE_NAME; local
launches that pretend several nodes (--ranks-per-node) set it to "<host>-node<i>".

Links it could not measure (shape.unmeasured_links, see unmeasured_links): GPU ranks of one node on one
GPU exchange through a host copy, not a GPU link; pretend nodes (the local launcher's
RTMODEL_PRETEND_NODES) share one machine, not a network. CPU ranks share no device: a CPU profile's
links are what its ranks really have (the emulated cluster's too), so they stay measured.
"""

from __future__ import annotations

import os
import platform
import socket

import torch
import torch.distributed as dist

from profiler.errors import ProfilingError
from rtmodel_documents.profile_document import ProfileShape
from rtmodel_documents.profile_schema import PRETEND_NODES_ENV
from rtmodel_harness.distributed import nccl_version
from rtmodel_util.launch_env import NODE_NAME_ENV, RANKS_PER_NODE_ENV

# What each rank reports for the link marks: (its host's real name, its GPU index or None off CUDA)
RankPlace = tuple[str, int | None]


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


def collect_shape(k: int, backend: str, device: torch.device) -> tuple[ProfileShape, list[str]]:
    """The shape section (identical on every rank) plus warnings worth printing."""
    n = dist.get_world_size()
    if n < 2:
        raise ProfilingError("a profile needs at least 2 ranks (an all-reduce needs a partner); this job has 1")
    gathered: list = [None] * n
    index = None if device.type != "cuda" else device.index if device.index is not None else torch.cuda.current_device()
    dist.all_gather_object(gathered, (node_name(), socket.gethostname(), index))
    names = [name for name, _, _ in gathered]
    places = [(host, gpu) for _, host, gpu in gathered]
    shape = ProfileShape(
        world_size=n,
        ranks_per_node=k,
        nodes=n // k,
        node_names=tuple(names),
        backend=backend,
        device=device.type,
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else platform.machine(),
        torch_version=torch.__version__,
        nccl_version=nccl_version(),
        unmeasured_links=unmeasured_links(places, k, device.type, bool(os.environ.get(PRETEND_NODES_ENV))),
        # which algorithms NCCL could pick: calibration inverts the one that ran (written on NCCL only)
        nccl_algo_env=os.environ.get("NCCL_ALGO") if backend == "nccl" else None,
    )
    flags = {"intra": "--intra", "inter": "--network"}
    warnings = [f"the {cls}-node link is not measured: {why}; `rtmodel advise` takes it from {flags[cls]} or a "
                "preset" for cls, why in shape.unmeasured_links.items()]
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


def unmeasured_links(places: list[RankPlace], k: int, device_type: str, pretend_nodes: bool) -> dict[str, str]:
    """Link class -> why this profile measures no real link of it (empty: every link it has is real).

    places: each rank's (host, GPU index), rank order; ranks sit node-major, k per node. Intra: two
    ranks of one node on the same host and GPU (the ranks of a GPU-less run share nothing: their links
    are real). Inter: the local launcher pretended the nodes (pretend_nodes)."""
    out: dict[str, str] = {}
    n = len(places)
    if device_type == "cuda" and k > 1:
        on_gpu: dict[tuple, list[int]] = {}
        for rank, (host, index) in enumerate(places):
            if index is not None:
                on_gpu.setdefault((rank // k, host, index), []).append(rank)
        shared = {key: ranks for key, ranks in on_gpu.items() if len(ranks) > 1}
        if shared:
            ranks = sum(len(r) for r in shared.values())
            gpus = {(host, index) for _, host, index in shared}  # pretend nodes on one host share its GPUs
            hosts = len({host for host, _ in gpus})
            where = ", ".join(sorted({f"cuda:{index}" for _, index in gpus})) + (f" on {hosts} hosts" if hosts > 1 else "")
            out["intra"] = (f"{ranks} ranks share {len(gpus)} GPU{'s' if len(gpus) > 1 else ''} ({where}): "
                            "their exchange is a copy through the host, not a GPU link")
    if pretend_nodes and n // k > 1:
        out["inter"] = f"the {n // k} pretend nodes of --ranks-per-node are one machine"
    return out

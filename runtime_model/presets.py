"""Built-in presets (data files in presets/*.toml) turned into the model's data types.

Why data files: a preset is physical data (peak FLOP/s, line rates, parameter counts) plus one
stated efficiency figure; keeping them out of code makes every number reviewable and citable.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from runtime_model.distributions import NormalCompute
from runtime_model.scenario import Bucket, ClusterShape, Compute, Link, Network, Scenario, ScenarioError

MB = 1024 * 1024
BYTES_PER_PARAM = 4  # gradients/parameters communicated in fp32, even under mixed precision
ADAM_BYTES_PER_PARAM = 28  # read p, g, m, v (16 B) + write p, m, v (12 B), fp32
DDP_FIRST_BUCKET_MB = 1.0  # torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES
DEFAULT_INTRA = {"T4": "pcie3", "A40": "pcie4", "A100": "nvlink3", "H100": "nvlink4", "H200": "nvlink4"}


@cache
def load(kind: str) -> dict:
    """One preset file (gpus, networks, models, clusters) as a dict."""
    text = resources.files("runtime_model.preset_data").joinpath(f"{kind}.toml").read_text()
    return tomllib.loads(text)


def _pick(table: dict, name: str, what: str, flag: str) -> dict:
    if name not in table:
        raise ScenarioError(f"unknown {what} '{name}' for {flag}; choose one of: {', '.join(sorted(table))}")
    return table[name]


def link_from_preset(entry: dict, name: str) -> Link:
    return Link(
        latency_s=entry["latency_us"] * 1e-6,
        bandwidth_Bps=entry["bandwidth_Gbps"] * 1e9 / 8,
        source=f"preset {name}",
    )


def network_preset(inter: str, intra: str) -> Network:
    nets = load("networks")
    inter_e = _pick(nets["inter"], inter, "network", "--network")
    intra_e = _pick(nets["intra"], intra, "intra-node link", "--intra")
    return Network(intra=link_from_preset(intra_e, intra), inter=link_from_preset(inter_e, inter), name=f"{intra}+{inter}")


def bucket_layout(
    total_params: int, tail_params: int, cap_mb: float, first_cap_mb: float | None
) -> tuple[Bucket, ...]:
    """Buckets in backward order from a parameter count.

    Non-embedding gradients appear uniformly during backward; `tail_params` (input embeddings)
    appear at its very end. DDP closes a bucket when adding more would pass the cap (first bucket
    1 MB); Decent-DP closes it once it reaches the cap (`first_cap_mb=None`).
    """
    if cap_mb <= 0:
        raise ScenarioError(f"bucket size must be > 0 MB, got {cap_mb}")
    body = (total_params - tail_params) * BYTES_PER_PARAM
    tail = tail_params * BYTES_PER_PARAM
    cap = cap_mb * MB
    buckets: list[Bucket] = []
    done = 0.0
    first = True
    while done < body - 0.5:
        size = min((first_cap_mb * MB) if (first and first_cap_mb) else cap, body - done)
        done += size
        first = False
        buckets.append(Bucket(int(size), min(1.0, done / body)))
    while tail > 0.5:
        size = min(cap, tail)
        tail -= size
        buckets.append(Bucket(int(size), 1.0))
    return tuple(buckets)


@dataclass(frozen=True)
class PresetChoice:
    """What the user asked for, with defaults filled in (echoed in the output)."""

    gpus: int
    gpus_per_node: int
    gpu: str
    network: str
    intra: str
    model: str
    global_batch: float
    precision: str
    mfu: float
    compute_cv: float
    bucket_cap_mb: float


def resolve(
    gpus: int,
    gpus_per_node: int | None = None,
    gpu: str | None = None,
    network: str | None = None,
    intra: str | None = None,
    model: str = "transformer-base",
    global_batch: float | None = None,
    precision: str | None = None,
    mfu: float | None = None,
    compute_cv: float | None = None,
    bucket_cap_mb: float = 25.0,
    cluster: str | None = None,
) -> PresetChoice:
    """Fill defaults from a named cluster or from the GPU, and check every name and number."""
    if cluster is not None:
        c = _pick(load("clusters"), cluster, "cluster", "--cluster")
        gpu = gpu or c["gpu"]
        gpus_per_node = gpus_per_node or c["gpus_per_node"]
        intra = intra or c["intra"]
        network = network or c["network"]
    gpu = gpu or "A100"
    g = _pick(load("gpus"), gpu, "GPU", "--gpu")
    m = _pick(load("models"), model, "model", "--model")
    precision = precision or g["default_precision"]
    if precision not in g["tflops"]:
        raise ScenarioError(f"unknown precision '{precision}'; choose one of: {', '.join(g['tflops'])}")
    choice = PresetChoice(
        gpus=gpus,
        gpus_per_node=gpus_per_node or min(8, gpus),
        gpu=gpu,
        network=network or "ib-100",
        intra=intra or DEFAULT_INTRA.get(gpu, "pcie4"),
        model=model,
        global_batch=float(global_batch if global_batch is not None else m["default_global_batch"]),
        precision=precision,
        mfu=float(mfu if mfu is not None else g["mfu"]),
        compute_cv=float(compute_cv if compute_cv is not None else m["compute_cv"]),
        bucket_cap_mb=bucket_cap_mb,
    )
    for name, lo, hi in (("mfu", 0.0, 1.0), ("compute_cv", 0.0, 1.0)):
        v = getattr(choice, name)
        if not (lo < v <= hi if name == "mfu" else lo <= v <= hi) or math.isnan(v):
            raise ScenarioError(f"--{name.replace('_', '-')} must be in ({lo}, {hi}], got {v}")
    if not (choice.global_batch > 0) or math.isinf(choice.global_batch):
        raise ScenarioError(f"--global-batch must be a positive number, got {choice.global_batch}")
    if not (0 < bucket_cap_mb < 1e6):
        raise ScenarioError(f"--bucket-mb must be a positive number of MB, got {bucket_cap_mb}")
    return choice


def compute_from_preset(choice: PresetChoice) -> Compute:
    """Forward:backward = 1:2 of FLOPs / (peak x MFU); Adam as a memory-bound pass over 28 B/param."""
    g = load("gpus")[choice.gpu]
    m = load("models")[choice.model]
    units = choice.global_batch / choice.gpus
    seconds = units * m["train_flops_per_unit"] / (g["tflops"][choice.precision] * 1e12 * choice.mfu)
    fwd, bwd = seconds / 3, 2 * seconds / 3
    opt = m["params"] * ADAM_BYTES_PER_PARAM / (g["memory_bandwidth_GBps"] * 1e9)
    src = f"preset {choice.model} on {choice.gpu} {choice.precision} at MFU {choice.mfu:g}"
    return Compute(
        forward_s=fwd,
        backward_s=bwd,
        optimizer_s=opt,
        ddp_buckets=bucket_layout(m["params"], m["embedding_params"], choice.bucket_cap_mb, DDP_FIRST_BUCKET_MB),
        gossip_buckets=bucket_layout(m["params"], m["embedding_params"], choice.bucket_cap_mb, None),
        distribution=NormalCompute(seconds, seconds * choice.compute_cv),
        source=src,
    )


def scenario_from_choice(choice: PresetChoice) -> Scenario:
    shape = ClusterShape(choice.gpus, choice.gpus_per_node)
    net = network_preset(choice.network, choice.intra)
    return Scenario(shape=shape, network=net, compute=compute_from_preset(choice), description=str(choice))


def names() -> dict[str, list[str]]:
    """Valid preset names per kind (for help texts and error messages)."""
    nets = load("networks")
    return {
        "gpu": sorted(load("gpus")),
        "network": sorted(nets["inter"]),
        "intra": sorted(nets["intra"]),
        "model": sorted(load("models")),
        "cluster": sorted(load("clusters")),
    }

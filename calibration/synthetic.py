"""Synthetic profiles (rtmodel-profile/1, built as rtmodel_documents.profile_document's dataclasses) generated from KNOWN parameters plus noise.

Why: the only honest test of a fitter is to hand it data whose truth is known and check it gets the
truth back (within its own stated uncertainty). The collective times come from the same cost the model
uses (runtime_model.prediction.collectives): the flat ring for gloo and the default "synthetic" backend, NCCL's
ring/tree (as NCCL_ALGO would leave it) for backend "nccl"; with multiplicative log-normal noise, optionally with a
separate small-message regime (a protocol switch), so regime detection can be tested too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rtmodel_documents.profile_document import (
    PatternResult,
    ProfileCommunication,
    ProfileCompute,
    ProfileDocument,
    ProfilePattern,
    ProfileShape,
    ProfileWorkload,
    frozen,
)
from rtmodel_documents.profile_schema import CHECKPOINT_SECTIONS, nccl_algo_from_env
from rtmodel_util.files import write_json_atomic
from runtime_model.core.defaults import BUCKET_CAP_MIB, MIB
from runtime_model.core.scenario import GroupShape, Link, Network
from runtime_model.prediction.collectives import allreduce_s, busbw_Bps


@dataclass(frozen=True)
class SmallMessageRegime:
    """Below `below_bytes` the collective follows a different affine law (e.g. an eager protocol)."""

    below_bytes: int
    fixed_s: float  # for a 2-rank group; scales with 2(p-1) like a ring latency
    per_byte_s: float  # for a 2-rank group; scales with 2(p-1)/p like a ring


@dataclass(frozen=True)
class SyntheticTruth:
    """Everything a synthetic profile is generated from; tests compare fits against these numbers."""

    nodes: int = 2
    ranks_per_node: int = 2
    intra: Link = Link(latency_s=20e-6, bandwidth_Bps=40e9)
    inter: Link = Link(latency_s=60e-6, bandwidth_Bps=3e9)
    sizes_bytes: tuple[int, ...] = tuple(1 << e for e in range(10, 27))  # 1 KB .. 64 MB
    samples_per_size: int = 10
    noise_rel: float = 0.03  # sd of the log-normal multiplicative noise on every sample
    small_regime: SmallMessageRegime | None = None
    forward_s: float = 0.030
    backward_s: float = 0.060
    optimizer_s: float = 0.005
    forward_sd_s: float = 0.0015
    backward_sd_s: float = 0.003
    rank_offset_rel_sd: float = 0.0  # persistent per-rank slowness (centred: the true mean is unchanged)
    rank_slowdown: tuple[float, ...] = ()  # persistent multipliers of ranks 0, 1, ... (not centred): stragglers
    node_rel_sd: float = 0.0  # per node and iteration, a relative deviation shared by the node's ranks
    iterations: int = 50
    ddp_buckets_bytes: tuple[int, ...] = (1 * MIB, 25 * MIB, 25 * MIB, 25 * MIB, 24 * MIB)
    gossip_buckets_bytes: tuple[int, ...] = (25 * MIB, 25 * MIB, 25 * MIB, 25 * MIB)
    ddp_ready_fractions: tuple[float, ...] = (0.05, 0.3, 0.55, 0.8, 1.0)
    gossip_ready_fractions: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    ready_noise_rel: float = 0.01
    seed: int = 0
    extra_workload: dict = field(default_factory=dict)
    backend: str = "synthetic"  # "nccl": timed with NCCL's ring/tree cost; anything else: the flat ring
    nccl_algo_env: str | None = None  # NCCL_ALGO recorded with backend "nccl" (None: NCCL's own choice)

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def nccl_algo(self) -> str | None:
        """The algorithm the collectives run, in Network.nccl_algo's terms (None: the flat ring)."""
        return nccl_algo_from_env(self.nccl_algo_env) if self.backend == "nccl" else None

    @property
    def network(self) -> Network:
        return Network(intra=self.intra, inter=self.inter, name="synthetic-truth", nccl_algo=self.nccl_algo)

    def true_time_s(self, group: GroupShape, nbytes: int) -> float:
        """Noise-free time of one all-reduce of nbytes on `group` (the ground truth)."""
        small = self.small_regime
        if small is not None and nbytes < small.below_bytes:
            p = group.size
            return (p - 1) * small.fixed_s + (p - 1) / p * 2 * nbytes * small.per_byte_s
        return allreduce_s(group, nbytes, self.network)


def pattern_groups(nodes: int, ranks_per_node: int) -> list[tuple[str, GroupShape, int]]:
    """(pattern, group shape, concurrent groups) for every pattern the profiler runs on this shape."""
    from rtmodel_documents.profile_patterns import patterns_for

    return [
        (p.name, GroupShape(p.group_size, p.nodes_spanned, p.nic_sharing), len(p.groups))
        for p in patterns_for(nodes * ranks_per_node, ranks_per_node)
    ]


def synthetic_profile(truth: SyntheticTruth | None = None, **overrides) -> dict:
    """A complete profile document (JSON-ready) drawn from `truth` (fields may be overridden by keyword)."""
    return synthetic_document(truth, **overrides).to_json()


def synthetic_document(truth: SyntheticTruth | None = None, **overrides) -> ProfileDocument:
    """The typed profile synthetic_profile writes."""
    if truth is None:
        truth = SyntheticTruth(**overrides)
    elif overrides:
        truth = SyntheticTruth(**{**truth.__dict__, **overrides})
    rng = np.random.default_rng(truth.seed)
    n, k, m = truth.world_size, truth.ranks_per_node, truth.nodes
    return ProfileDocument(
        created_utc="2026-01-01T00:00:00Z",
        complete=True,
        sections_done=CHECKPOINT_SECTIONS,
        shape=ProfileShape(
            world_size=n,
            ranks_per_node=k,
            nodes=m,
            node_names=tuple(f"h{r // k}" for r in range(n)),
            backend=truth.backend,
            device="synthetic",
            nccl_algo_env=truth.nccl_algo_env if truth.backend == "nccl" else None,
        ),
        workload=ProfileWorkload(
            model="synthetic",
            model_args=dict(truth.extra_workload),
            batch_per_rank=8,
            param_bytes=int(sum(truth.gossip_buckets_bytes)),
            bucket_cap_mb=BUCKET_CAP_MIB,
            ddp_buckets_bytes=tuple(truth.ddp_buckets_bytes),
            gossip_buckets_bytes=tuple(truth.gossip_buckets_bytes),
        ),
        compute=_compute_section(truth, rng),
        communication=_communication_section(truth, rng),
    )


def _tuples(array: np.ndarray) -> tuple:
    """An array as nested tuples of Python floats (what the profile's dataclasses hold)."""
    return frozen(array.tolist())


def _compute_section(t: SyntheticTruth, rng: np.random.Generator) -> ProfileCompute:
    n, iters = t.world_size, t.iterations
    offsets = (
        rng.normal(0.0, t.rank_offset_rel_sd, size=(n, 1)) if t.rank_offset_rel_sd > 0 else np.zeros((n, 1))
    )
    offsets -= offsets.mean()
    slow = np.ones((n, 1))
    slow[: len(t.rank_slowdown), 0] = t.rank_slowdown[:n]
    node = np.zeros((n, iters))
    if t.node_rel_sd > 0:
        node = np.repeat(rng.normal(0.0, t.node_rel_sd, size=(t.nodes, iters)), t.ranks_per_node, axis=0)
    scale = slow * (1 + offsets + node)
    fwd = scale * t.forward_s + slow * rng.normal(0.0, t.forward_sd_s, size=(n, iters))
    bwd = scale * t.backward_s + slow * rng.normal(0.0, t.backward_sd_s, size=(n, iters))
    opt = np.abs(t.optimizer_s * (1 + rng.normal(0.0, 0.02, size=(n, iters))))

    def ready(fractions: tuple[float, ...]) -> tuple:
        f = np.asarray(fractions)[None, None, :]
        jitter = 1 + rng.normal(0.0, t.ready_noise_rel, size=(n, iters, f.shape[-1]))
        r = np.minimum(bwd[:, :, None] * f * jitter, bwd[:, :, None])
        return _tuples(r)

    return ProfileCompute(
        warmup=3,
        iterations=iters,
        forward_s=_tuples(np.abs(fwd)),
        backward_s=_tuples(np.abs(bwd)),
        optimizer_s=_tuples(opt),
        ddp_bucket_ready_s=ready(t.ddp_ready_fractions),
        gossip_bucket_ready_s=ready(t.gossip_ready_fractions),
    )


def _communication_section(t: SyntheticTruth, rng: np.random.Generator) -> ProfileCommunication:
    patterns = []
    for name, group, concurrent in pattern_groups(t.nodes, t.ranks_per_node):
        results = []
        for nbytes in t.sizes_bytes:
            true_s = t.true_time_s(group, nbytes)
            samples = true_s * np.exp(rng.normal(0.0, t.noise_rel, size=t.samples_per_size))
            median = float(np.median(samples))
            results.append(
                PatternResult(
                    bytes=int(nbytes),
                    samples_s=_tuples(samples),
                    median_s=median,
                    algbw_Bps=nbytes / median,
                    busbw_Bps=busbw_Bps(group.size, nbytes, median),
                )
            )
        patterns.append(
            ProfilePattern(
                pattern=name,
                group_size=group.size,
                nodes_spanned=group.nodes,
                nic_sharing=group.nic_sharing,
                concurrent_groups=concurrent,
                results=tuple(results),
            )
        )
    return ProfileCommunication(sizes_bytes=tuple(t.sizes_bytes), patterns=tuple(patterns))


def write_synthetic_profile(path: str | Path, truth: SyntheticTruth | None = None, **overrides) -> Path:
    """Write a synthetic profile atomically (temp file + os.replace), like the profiler does."""
    path = Path(path)
    write_json_atomic(path, synthetic_profile(truth, **overrides), indent=None)
    return path

"""Per-iteration time of local SGD (the DiLoCo family) on the same compute, link and collective models.

Why a third family: gossip and All-Reduce both communicate every iteration; local SGD communicates every
H inner steps, so on a slow network it can keep the GPUs busy where neither can (DiLoCo, Douillard et al.
2023, arXiv 2311.08105; OpenDiLoCo, arXiv 2407.07852; INTELLECT-1, arXiv 2412.01152).

What one period of H inner steps costs (every number from the scenario, nothing fitted):
- inner steps: each replica steps its inner optimizer alone. A replica is one GPU ("gpu": no
  communication at all), or one node whose GPUs run DDP inside it every step ("node": the hierarchical
  form DiLoCo runs across sites), costed as DDP's All-Reduce on a one-node cluster (its exposed tail);
- the outer step waits for the slowest replica's H steps: E[max over replicas of the sum of its H
  steps], from the same compute draws as the other families (common random numbers);
- the outer all-reduce of the pseudo-gradient (theta_outer - theta, every parameter once) at `bits` per
  element on the wire (default: the gradient's own dtype; 32 = fp32; 16 = OpenDiLoCo's fp16, 8 = INTELLECT-1's int8),
  costed as DDP's all-reduce of those bytes over every GPU (replicas inside a node hold one model, so the
  average is the same, and every NIC of the node carries its share);
- the outer optimizer (Nesterov SGD on the pseudo-gradient): one elementwise pass over the parameters,
  charged as one inner optimizer step (an Adam step touches more state: an upper estimate);
- Streaming DiLoCo (Douillard et al. 2025, arXiv 2501.18512): the parameters in `fragments` parts, each
  synchronised once per period, its all-reduce overlapping the next `overlap_steps` inner steps: a
  fragment's exposed time is max(0, all-reduce - overlap_steps x inner step); `backward_overlap` adds
  the synchronising step's backward to that window (the pseudo-gradient's buckets leave as the backward
  makes them, Douillard's simulators' assumption; the runs of OpenDiLoCo and INTELLECT-1 block). The NICs are never
  oversubscribed: overlap_steps x fragments < H, so the fragments' all-reduces plus the inner steps no
  all-reduce covers fit in the period as charged.

The iteration time is the period over H; compute utilization is the mean compute (forward + backward +
optimizer) of one GPU over it, the quantity OpenDiLoCo and INTELLECT-1 report.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from runtime_model.core.constraints import AT_LEAST_ONE, Interval
from runtime_model.core.distributions import EmpiricalCompute
from runtime_model.core.errors import InvalidCombination, InvalidValue
from runtime_model.core.scenario import ClusterShape, Compute, Scenario
from runtime_model.prediction.collectives import allreduce_s, global_allreduce_shape
from runtime_model.prediction.iteration import allreduce_prediction
from runtime_model.prediction.link_bytes import allreduce_nic_bytes

NON_NEGATIVE_INT = Interval(0, None, integer=True)
REPLICAS = ("node", "gpu")  # what one local-SGD replica is
INNER = ("ddp", "fsdp")  # what trains inside a node replica (LocalSgd.inner)
WIRE_BITS = (32, 16, 8, 4)  # bits per pseudo-gradient element on the wire
LOCAL_SGD_SEED = 20241017  # fixed: predictions are deterministic
DRAW_BUDGET = 1_000_000  # compute draws per prediction (n x H x periods): bounds the advisor's latency
MIN_PERIODS, MAX_PERIODS = 8, 200
# above the budget: the period sums of as many replicas as it allows (16 to 1,024) stand for all of them
SUBSET_REPLICAS = (16, 1024)
MAX_INNER_STEPS = 10_000  # 5x the longest cadence published (H = 2,000, arXiv 2311.08105 Fig. 4)
INNER_STEPS = Interval(1, MAX_INNER_STEPS, integer=True)
# the cadence of the published loss fits (arXiv 2503.09799) and the default of Douillard's simulator
DEFAULT_INNER_STEPS = 30
WIRE_NAMES = {None: "", 32: " fp32", 16: " fp16", 8: " int8", 4: " int4"}


@dataclass(frozen=True)
class LocalSgd:
    """One local-SGD configuration: H inner steps, then an outer step on the all-reduced pseudo-gradient."""

    inner_steps: int = DEFAULT_INNER_STEPS  # H
    overlap_steps: int = 0  # inner steps an outer all-reduce may run behind (Streaming DiLoCo's tau)
    fragments: int = 1  # parts synchronised separately, each once per period (Streaming DiLoCo's P)
    bits: int | None = None  # bits per element on the wire; None: the gradient's own dtype
    replica: str = "node"  # "node": DDP inside each node; "gpu": every GPU its own replica
    # the synchronising step's backward covers the all-reduce too (its buckets leave as the backward makes
    # them), as Douillard's simulators assume for every method; OpenDiLoCo and INTELLECT-1 block (False)
    backward_overlap: bool = False
    # what trains inside a node replica: "ddp" (DDP: a full replica per GPU), or "fsdp" (FSDP2 over the
    # node's GPUs, as torchft's DiLoCo and torchtitan run a replica a GPU cannot hold: the inner step's
    # exposed communication is the sharded model's, its optimizer and the outer step on 1/k each)
    inner: str = "ddp"

    def __post_init__(self):  # each input named as the option that sets it (--local-sgd-h, ...)
        INNER_STEPS.check("local_sgd_h", self.inner_steps)
        NON_NEGATIVE_INT.check("local_sgd_overlap", self.overlap_steps)
        AT_LEAST_ONE.check("local_sgd_fragments", self.fragments)
        if self.bits is not None and self.bits not in WIRE_BITS:
            raise InvalidValue("local_sgd_bits", f"one of {', '.join(map(str, WIRE_BITS))}", self.bits)
        if self.replica not in REPLICAS:
            raise InvalidValue("local_sgd_replica", f"one of {', '.join(REPLICAS)}", self.replica)
        if self.inner not in INNER:
            raise InvalidValue("local_sgd_inner", f"one of {', '.join(INNER)}", self.inner)
        if self.inner == "fsdp" and self.replica == "gpu":
            raise InvalidCombination(
                "{local_sgd_inner} shards a node replica over its GPUs: a one-GPU replica ({local_sgd_replica}) "
                "has nothing to shard over",
                local_sgd_inner=self.inner,
                local_sgd_replica=self.replica,
            )
        if self.fragments > self.inner_steps:
            raise InvalidCombination(
                "{local_sgd_fragments} needs at least as many inner steps ({local_sgd_h}): each fragment "
                "is synchronised at its own step of the period",
                local_sgd_fragments=self.fragments,
                local_sgd_h=self.inner_steps,
            )
        if self.overlap_steps * self.fragments >= self.inner_steps:
            raise InvalidCombination(
                "overlap x fragments ({local_sgd_overlap} x {local_sgd_fragments}) must be below the inner "
                "steps ({local_sgd_h}): a fragment's outer update must land before its next synchronisation",
                local_sgd_overlap=self.overlap_steps,
                local_sgd_fragments=self.fragments,
                local_sgd_h=self.inner_steps,
            )

    @property
    def name(self) -> str:
        """The row's name: 'local-sgd H=100', '... P=4 overlap=1 int8', '... per-gpu'."""
        text = f"local-sgd H={self.inner_steps}"
        if self.fragments > 1:
            text += f" P={self.fragments}"
        if self.overlap_steps:
            text += f" overlap={self.overlap_steps}"
        text += WIRE_NAMES[self.bits]
        text += " bwd-overlap" if self.backward_overlap else ""
        text += " fsdp" if self.inner == "fsdp" else ""
        return text + (" per-gpu" if self.replica == "gpu" else "")

    def replicas(self, shape: ClusterShape) -> int:
        return shape.nodes if self.replica == "node" else shape.gpus


@dataclass(frozen=True)
class LocalSgdPrediction:
    """Local SGD's time per inner step (averaged over a period of H) and what goes into it."""

    name: str
    options: LocalSgd
    replicas: int
    mean_s: float  # per inner step: the period over H
    period_s: float
    inner_step_s: float  # one replica's mean inner step (compute, optimizer, DDP tail inside a node)
    wait_s: float  # per period: E[max over replicas of H steps] - H x the mean step (the variance factor)
    outer_comm_s: float  # per period: the all-reduces of every fragment
    exposed_comm_s: float  # per period: the part of outer_comm_s nothing hides
    outer_step_s: float  # per period: the outer optimizer
    compute_utilization: float  # one GPU's forward + backward + optimizer over the iteration time
    nic_bytes_per_iteration: float  # bytes through the busiest NIC per inner step (0 inside one node)


def wire_bytes(scenario: Scenario, bits: int | None) -> float:
    """The pseudo-gradient's bytes at `bits` per element (one per gradient element; None: as the gradient)."""
    buckets = scenario.buckets
    if bits is None:
        return float(buckets.message_bytes)
    return buckets.message_bytes / buckets.element_bytes * bits / 8


def compute_utilization(compute: Compute, iteration_s: float) -> float:
    """One GPU's forward + backward + optimizer over the iteration time (what DiLoCo's sources report)."""
    return (compute.compute_s + compute.optimizer_s) / iteration_s if iteration_s > 0 else 0.0


def inner_tail_s(scenario: Scenario, opts: LocalSgd) -> float:
    """The exposed communication of one inner step inside a node (0 for a one-GPU replica): DDP's tail,
    or with FSDP inside the replica the sharded model's (prediction/sharded.py on the node alone)."""
    k = scenario.shape.gpus_per_node
    if opts.replica == "gpu" or k == 1:
        return 0.0
    node = replace(scenario, shape=ClusterShape(k, k))
    if opts.inner == "fsdp":
        from runtime_model.prediction.sharded import sharded_prediction

        return sharded_prediction(node, "fsdp").exposed_comm_s
    return allreduce_prediction(node).exposed_comm_s


def optimizer_share(scenario: Scenario, opts: LocalSgd) -> float:
    """The part of the optimizer's work one GPU does: all of it, or 1/k with FSDP inside the replica."""
    return 1.0 / scenario.shape.gpus_per_node if opts.inner == "fsdp" else 1.0


def period_compute_s(scenario: Scenario, opts: LocalSgd, seed: int = LOCAL_SGD_SEED) -> tuple[float, float]:
    """(E[max over replicas of the sum of H replica steps' compute], H x the mean replica step's compute).

    A replica's step is its GPU's draw ("gpu") or its node's slowest draw ("node", DDP waits for it).
    Within the draw budget every rank is simulated (the variation's structure as drawn for all n ranks);
    above it, the period sums of a subset of replicas (SUBSET_REPLICAS) form an empirical distribution whose exact
    expected maximum over all replicas is taken (distributions.EmpiricalCompute)."""
    shape, comp, h = scenario.shape, scenario.compute, opts.inner_steps
    replicas = opts.replicas(shape)
    group = shape.gpus_per_node if opts.replica == "node" else 1
    drawn = replicas
    if shape.gpus * h * MIN_PERIODS > DRAW_BUDGET:
        allowed = DRAW_BUDGET // (group * h * MIN_PERIODS)
        drawn = min(replicas, int(np.clip(allowed, *SUBSET_REPLICAS)))
    periods = int(np.clip(DRAW_BUDGET // max(drawn * group * h, 1), MIN_PERIODS, MAX_PERIODS))
    sums = _period_sums(comp, shape.gpus_per_node, drawn, group, h, periods, np.random.default_rng(seed))
    mean_step = float(sums.mean()) / h
    if drawn == replicas:
        return float(sums.max(axis=1).mean()), h * mean_step
    return EmpiricalCompute(tuple(sums.ravel())).expected_max(replicas), h * mean_step


def _period_sums(comp, gpus_per_node: int, drawn: int, group: int, h: int, periods: int, rng) -> np.ndarray:
    """(periods, drawn): each replica's sum of h steps, a step its group's slowest draw. Drawn a whole
    block at once where the compute allows it (the very values, added in the same order, as drawing one
    iteration at a time, which a node term needs)."""
    sums = np.zeros((periods, drawn))
    block = comp.block_sampler(drawn * group)
    if block is not None:
        steps = block(rng, periods * h).reshape(periods, h, drawn, group).max(axis=3)
        for j in range(h):
            sums += steps[:, j]
        return sums
    draw = comp.sampler(drawn * group, gpus_per_node)
    for p in range(periods):
        for _ in range(h):
            sums[p] += draw(rng).reshape(drawn, group).max(axis=1)
    return sums


def outer_exposed_s(fragment_s: float, opts: LocalSgd, inner_step_s: float, backward_s: float) -> float:
    """Per period: what the fragments' all-reduces add beyond the inner steps (module doc)."""
    window_s = opts.overlap_steps * inner_step_s + (backward_s if opts.backward_overlap else 0.0)
    return opts.fragments * max(0.0, fragment_s - window_s)


def local_sgd_prediction(scenario: Scenario, opts: LocalSgd) -> LocalSgdPrediction:
    """Time per inner step of local SGD with `opts` on `scenario` (module doc)."""
    shape, comp, net = scenario.shape, scenario.compute, scenario.network
    h = opts.inner_steps
    optimizer_s = comp.optimizer_s * optimizer_share(scenario, opts)
    fixed_step_s = optimizer_s + inner_tail_s(scenario, opts)
    slowest_s, mean_compute_s = period_compute_s(scenario, opts)
    inner_step_s = mean_compute_s / h + fixed_step_s
    group = global_allreduce_shape(shape.gpus, shape.gpus_per_node, net.nics_per_node)
    payload = wire_bytes(scenario, opts.bits)
    fragment_s = allreduce_s(group, payload / opts.fragments, net) if shape.gpus > 1 else 0.0
    outer_comm_s = opts.fragments * fragment_s
    exposed_s = outer_exposed_s(fragment_s, opts, inner_step_s, comp.backward_s)
    outer_step_s = optimizer_s if shape.gpus > 1 else 0.0
    steps_s = slowest_s + h * fixed_step_s
    period_s = steps_s + exposed_s + outer_step_s
    return LocalSgdPrediction(
        name=opts.name,
        options=opts,
        replicas=opts.replicas(shape),
        mean_s=period_s / h,
        period_s=period_s,
        inner_step_s=inner_step_s,
        wait_s=slowest_s - mean_compute_s,
        outer_comm_s=outer_comm_s,
        exposed_comm_s=period_s - outer_step_s - steps_s,
        outer_step_s=outer_step_s,
        compute_utilization=compute_utilization(comp, period_s / h),
        nic_bytes_per_iteration=allreduce_nic_bytes(shape, net.nics_per_node, payload, net) / h,
    )

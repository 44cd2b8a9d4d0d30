"""The data types every stage shares: presets, calibration and the model all speak these.

The model never learns where a number came from (preset or measurement); it only sees these
objects. Each object can carry a `source` string so the advisor can say where its inputs came from.
Units are SI and spelled in field names: seconds (`_s`), bytes (`_bytes`), bytes per second (`_Bps`).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field, replace

from runtime_model.core.constraints import AT_LEAST_ONE, FRACTION, GAIN, NON_NEGATIVE, POSITIVE
from runtime_model.core.defaults import MAX_GPUS
from runtime_model.core.distributions import ComputeDistribution, NormalCompute, plus_deviation
from runtime_model.core.errors import InvalidCombination, InvalidValue, UserError
from runtime_model.core.variation import Variation


class ScenarioError(UserError):
    """A scenario that cannot work (bad shape, bad number)."""


def check_gpus(name: str, value) -> int:
    """`value` as a GPU count the model answers for: an integer in [1, MAX_GPUS] (see defaults.MAX_GPUS);
    else InvalidValue naming `name`."""
    AT_LEAST_ONE.check(name, value)
    if value > MAX_GPUS:
        raise InvalidValue(
            name,
            f"at most {MAX_GPUS} (2^24, the largest n rtmodel answers: see runtime_model/core/defaults.py MAX_GPUS)",
            value,
        )
    return value


@dataclass(frozen=True)
class Link:
    """Hockney alpha-beta parameters of one link class: a step costs latency_s + bytes / bandwidth_Bps."""

    latency_s: float
    bandwidth_Bps: float
    source: str = "preset"
    latency_sd_s: float = 0.0  # 1-sigma uncertainty of latency_s (0 = unknown / exact)
    bandwidth_rel_sd: float = 0.0  # relative 1-sigma uncertainty of bandwidth_Bps
    # The most one flow gets when it is alone on the link (one TCP stream, link-aggregation hashing):
    # q flows sharing the link each get min(bandwidth_Bps / q, flow_cap_Bps). inf: a flow fills the link.
    flow_cap_Bps: float = math.inf
    # the fabric a preset declares (presets/preset_types.FABRICS); "": not known (measured, or a user's)
    fabric: str = ""

    def __post_init__(self):
        NON_NEGATIVE.check("latency_s", self.latency_s)
        POSITIVE.check("bandwidth_Bps", self.bandwidth_Bps)
        if not self.flow_cap_Bps > 0:
            raise ValueError(f"flow_cap_Bps must be > 0, got {self.flow_cap_Bps}")

    def flow_bandwidth_Bps(self, flows: int) -> float:
        """What each of `flows` concurrent flows on this link gets."""
        return min(self.bandwidth_Bps / flows, self.flow_cap_Bps)

    @property
    def beta_s_per_byte(self) -> float:
        return 1.0 / self.bandwidth_Bps


@dataclass(frozen=True)
class GroupShape:
    """Where the ranks of one collective sit: what the collective's cost depends on.

    size: ranks in the group; nodes: how many nodes they span; nic_sharing: how many network flows
    leave the busiest NIC the group uses at the same time (1 = NIC to itself); rails: how many of a
    node's NICs the group spreads its traffic over (NCCL runs channels across rails when a group has
    several GPUs per node on a rail-optimised node; 1 on a one-NIC node).
    """

    size: int
    nodes: int
    nic_sharing: int = 1
    rails: int = 1

    def __post_init__(self):
        if (
            self.size < 1
            or self.nodes < 1
            or self.nodes > self.size
            or self.nic_sharing < 1
            or self.rails < 1
        ):
            raise ScenarioError(f"invalid group shape {self}")

    @property
    def ranks_per_node(self) -> int:
        """Members per node (groups here are spread evenly: whole nodes, or one rank per node)."""
        return max(1, self.size // self.nodes)

    @property
    def key(self) -> str:
        """p{size}-s{nodes}-q{sharing}, plus -r{rails} on multi-NIC nodes (profiles keep their keys)."""
        rails = f"-r{self.rails}" if self.rails > 1 else ""
        return f"p{self.size}-s{self.nodes}-q{self.nic_sharing}{rails}"


@dataclass(frozen=True)
class AffineCost:
    """A measured all-reduce cost for one exact group shape: t(S) = fixed_s + S * per_byte_s.

    Calibration produces these; when the model is asked about that exact shape it uses the
    measurement instead of deriving the cost from link classes.
    """

    fixed_s: float
    per_byte_s: float
    source: str = "measured"
    fixed_sd_s: float = 0.0
    per_byte_rel_sd: float = 0.0

    def time_s(self, nbytes: float) -> float:
        return self.fixed_s + nbytes * self.per_byte_s

    def scaled(self, bandwidth: float = 1.0, latency: float = 1.0) -> AffineCost:
        """The fit on links `bandwidth` times as fast and with `latency` times the latency: the fixed part
        times `latency`, the per-byte part divided by `bandwidth` (Network.scaled)."""
        return replace(
            self,
            fixed_s=self.fixed_s * latency,
            per_byte_s=self.per_byte_s / bandwidth,
            fixed_sd_s=self.fixed_sd_s * latency,
        )


@dataclass(frozen=True)
class TabulatedCost(AffineCost):
    """A measured all-reduce cost given size by size (an nccl-tests run): interpolated log-log between
    the measured sizes, the nearest one's below them, and the affine line's slope beyond the largest.

    Why not the line alone: NCCL switches protocol and algorithm with the size (a 2-node H100 run over
    Ethernet took 572 us at 8 MiB and 978 us at 16 MiB, then 1,060 us at 32 MiB), which no one line
    follows within 5 %; the line (fixed_s, per_byte_s) stays what other shapes' links come from."""

    sizes: tuple[float, ...] = ()
    times_s: tuple[float, ...] = ()

    def time_s(self, nbytes: float) -> float:
        if not self.sizes:
            return super().time_s(nbytes)
        if nbytes > self.sizes[-1]:
            return self.times_s[-1] + (nbytes - self.sizes[-1]) * self.per_byte_s
        if nbytes <= self.sizes[0]:
            return self.times_s[0]
        i = bisect.bisect_left(self.sizes, nbytes)
        (s0, s1), (t0, t1) = self.sizes[i - 1 : i + 1], self.times_s[i - 1 : i + 1]
        w = math.log(nbytes / s0) / math.log(s1 / s0)
        return t0 * (t1 / t0) ** w

    def scaled(self, bandwidth: float = 1.0, latency: float = 1.0) -> TabulatedCost:
        """As AffineCost.scaled, each measured time split as the model splits it (collectives.py): the
        fixed part, and the rest as the bandwidth's (so the table and the line beyond it move together)."""
        if bandwidth == 1.0 and latency == 1.0:
            return self
        line = AffineCost.scaled(self, bandwidth, latency)
        times = tuple(self.fixed_s * latency + max(0.0, t - self.fixed_s) / bandwidth for t in self.times_s)
        return replace(line, times_s=times)


NCCL_ALGORITHMS = ("auto", "ring", "tree")


@dataclass(frozen=True)
class Network:
    """Two link classes (inside a node, across nodes) plus optional measured per-shape costs.

    `inter` is one NIC (its achievable bandwidth); a node has `nics_per_node` of them, rail-optimised:
    local rank i sends through NIC i mod nics_per_node. `nccl_algo` says how collectives that no
    measurement covers are costed: None = one flat ring whose every step pays the slowest hop (gloo,
    as the profiler measures it); "ring"/"tree" = NCCL's algorithm of that name; "auto" = the cheaper
    of the two per message, as NCCL's tuner picks unless NCCL_ALGO fixes one (collectives.py).
    """

    intra: Link
    inter: Link
    name: str = "custom"
    group_costs: dict[str, AffineCost] = field(default_factory=dict)  # keyed by GroupShape.key
    # How many collectives the backend keeps in flight at once: NCCL runs them in order on one
    # stream (1); gloo's ProcessGroupGloo has 2 worker threads, so a second bucket's latency hides
    # behind the first one's transfer.
    concurrent_collectives: int = 1
    nics_per_node: int = 1
    nccl_algo: str | None = None
    # How many times one group's rate a link carries when collectives of different process groups run at
    # once: gloo gives every group its own connections and worker threads, so where a transfer is bound
    # by the host (ranks sharing a GPU, through the CPU) rather than a link, Decent-DP's consecutive
    # rounds on groups of their own overlap. Measured by the profile (InFlightResult.two_groups_s); 1
    # where it is not (presets: the NIC, not the group, is the limit).
    group_concurrency: float = 1.0

    def __post_init__(self):
        AT_LEAST_ONE.check("nics_per_node", self.nics_per_node)
        GAIN.check("group_concurrency", self.group_concurrency)
        if self.nccl_algo is not None and self.nccl_algo not in NCCL_ALGORITHMS:
            raise InvalidValue("nccl_algo", f"one of {', '.join(NCCL_ALGORITHMS)}", self.nccl_algo)

    def scaled(self, inter_bandwidth: float = 1.0, inter_latency: float = 1.0) -> Network:
        """What-if copy: every NIC `inter_bandwidth` times as fast (its per-flow cap too) with
        `inter_latency` times the latency, and every measured fit that spans nodes moved with it
        (AffineCost.scaled); fits inside one node stay. Why not drop the measured fits: the shape they
        cover would then be priced by the link alone at factor 1, and a fit left as measured (an
        nccl-tests run's pairs on one GPU per node) would not slow down with the NIC while the rest does."""
        inter = replace(
            self.inter,
            bandwidth_Bps=self.inter.bandwidth_Bps * inter_bandwidth,
            latency_s=self.inter.latency_s * inter_latency,
            flow_cap_Bps=self.inter.flow_cap_Bps * inter_bandwidth,
        )
        costs = {
            key: fit.scaled(inter_bandwidth, inter_latency) if key_spans_nodes(key) else fit
            for key, fit in self.group_costs.items()
        }
        return replace(self, inter=inter, group_costs=costs)


def key_spans_nodes(group_key: str) -> bool:
    """Does the measured fit under `group_key` (GroupShape.key: p{size}-s{nodes}-...) cross the network?"""
    m = re.search(r"-s(\d+)", group_key)
    return bool(m) and int(m.group(1)) > 1


@dataclass(frozen=True)
class Bucket:
    """One gradient bucket: its size and when, into the backward pass, its gradients are ready."""

    nbytes: int
    ready_fraction: float  # r_b / t_B in (0, 1]; the last bucket is ready at 1.0

    def __post_init__(self):
        AT_LEAST_ONE.check("nbytes", self.nbytes)
        FRACTION.check("ready_fraction", self.ready_fraction)


@dataclass(frozen=True)
class BucketLayout:
    """How the framework cuts the gradients into buckets: an execution setting beside the workload
    (a what-if may change it without touching compute). Given twice because DDP and Decent-DP form
    buckets differently (DDP's first bucket is 1 MiB; Decent-DP closes a bucket once it reaches the cap).
    """

    ddp: tuple[Bucket, ...]
    gossip: tuple[Bucket, ...]
    # bytes of one gradient element (fp32 4, bf16/fp16 2): local SGD's compressed wire counts elements
    element_bytes: int = 4

    def __post_init__(self):
        if not self.ddp or not self.gossip:
            raise ScenarioError("a workload needs at least one gradient bucket")
        AT_LEAST_ONE.check("element_bytes", self.element_bytes)

    @property
    def message_bytes(self) -> int:
        """Bytes each rank exchanges per iteration (the whole gradient)."""
        return sum(b.nbytes for b in self.gossip)


@dataclass(frozen=True)
class Compute:
    """One worker's compute per iteration.

    forward_s/backward_s are means; `distribution` describes C = forward + backward across
    workers and iterations (its mean should equal forward_s + backward_s).
    """

    forward_s: float
    backward_s: float
    optimizer_s: float
    distribution: ComputeDistribution | None = None  # the i.i.d. part of C (its mean is the mean of C)
    source: str = "preset"
    variation: Variation = Variation()  # persistent (stragglers, rank spread) and node-correlated parts
    # the step's own spread per rank and iteration where it was measured (its mean is optimizer_s's)
    step_spread: ComputeDistribution | None = None

    def __post_init__(self):
        for name in ("forward_s", "backward_s", "optimizer_s"):
            NON_NEGATIVE.check(name, getattr(self, name))
        if self.distribution is None:
            object.__setattr__(self, "distribution", NormalCompute(self.forward_s + self.backward_s, 0.0))

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s

    @property
    def wait_distribution(self) -> ComputeDistribution:
        """C plus the step's deviation: what each rank adds per iteration before a synchronous exchange
        (DDP steps, then computes the next forward and backward), so the slowest of n draws from it."""
        return plus_deviation(self.distribution, self.step_spread)

    @property
    def step_varies(self) -> bool:
        """Was the step measured to vary from iteration to iteration?"""
        return self.step_spread is not None and self.step_spread.sd_s > 0

    def step_deviations(self, gpus: int):
        """draw(rng) -> each rank's step minus its mean this iteration; None without a measured spread."""
        spread = self.step_spread
        if not self.step_varies:
            return None
        return lambda rng: spread.sample(rng, gpus) - spread.mean_s

    def sampler(self, gpus: int, gpus_per_node: int):
        """draw(rng) -> C_i for all ranks in one iteration (variation.Variation applied to the i.i.d.
        draws); with i.i.d. variation exactly the distribution's own draws."""
        dist, var = self.distribution, self.variation
        if var.is_iid:
            return lambda rng: dist.sample(rng, gpus)
        s = var.factors(gpus)
        return lambda rng: var.sample(dist.sample(rng, gpus), dist.mean_s, rng, gpus_per_node, s)

    def block_sampler(self, gpus: int):
        """draw(rng, rows) -> `rows` iterations of sampler's draws at once: the very values `rows` calls of
        its draw give (one stream consumed in the same order; tests/test_distributions.py holds them
        equal). None with a node term, whose draws interleave with the ranks' iteration by iteration."""
        dist, var = self.distribution, self.variation
        if var.node_cv > 0:
            return None
        s = None if var.is_iid else var.factors(gpus)
        if s is None:
            return lambda rng, rows: dist.sample(rng, (rows, gpus))
        return lambda rng, rows: s * dist.sample(rng, (rows, gpus))

    def scaled(self, factor: float) -> Compute:
        """What-if copy: forward, backward and optimizer times multiplied by `factor`."""
        return replace(
            self,
            forward_s=self.forward_s * factor,
            backward_s=self.backward_s * factor,
            optimizer_s=self.optimizer_s * factor,
            distribution=self.distribution.scaled(factor),
            step_spread=None if self.step_spread is None else self.step_spread.scaled(factor),
        )


@dataclass(frozen=True)
class ClusterShape:
    """n workers, k per node, ranks node-major (rank = node * k + local)."""

    gpus: int
    gpus_per_node: int

    def __post_init__(self):
        check_gpus("gpus", self.gpus)
        AT_LEAST_ONE.check("gpus_per_node", self.gpus_per_node)
        if self.gpus % self.gpus_per_node:
            raise InvalidCombination(
                "{gpus_per_node} does not divide {gpus} (every node must hold the same number of GPUs)",
                gpus_per_node=self.gpus_per_node,
                gpus=self.gpus,
            )

    @property
    def nodes(self) -> int:
        return self.gpus // self.gpus_per_node

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node


@dataclass(frozen=True)
class Scenario:
    """Everything one prediction needs."""

    shape: ClusterShape
    network: Network
    compute: Compute
    buckets: BucketLayout
    description: str = ""
    # Decent-DP's own compute when it differs from DDP's (per-bucket mixing, steps and host syncs on a
    # GPU preset); None: the same as `compute` (a profile measures one).
    gossip_compute: Compute | None = None

    @property
    def decent_dp_compute(self) -> Compute:
        return self.gossip_compute if self.gossip_compute is not None else self.compute

    def compute_scaled(self, factor: float) -> Scenario:
        """What-if copy: every compute time multiplied by `factor`."""
        gossip = None if self.gossip_compute is None else self.gossip_compute.scaled(factor)
        return replace(self, compute=self.compute.scaled(factor), gossip_compute=gossip)

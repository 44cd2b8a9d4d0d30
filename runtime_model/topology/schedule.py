"""A gossip schedule as Decent-DP runs it: rounds of disjoint groups, each group all-reducing with one weight.

Why arrays and not one object per group: the advisor sweeps n up to 65,536, where a schedule has
~10^6 groups. A round is a label per rank (which group it is in) plus one weight per group, so
checks and cost shapes are vectorised numpy.

Decent-DP's mixing for a group g with weight w (see decent_dp/ddp.py `_ddp_fn`):
    x_i <- w * x_i + (1 - w) / (|g| - 1) * sum_{j in g, j != i} x_j
so each round's matrix is symmetric and doubly stochastic by construction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from runtime_model.core.errors import UserError
from runtime_model.core.scenario import ClusterShape, GroupShape
from runtime_model.topology.exchange import DECENT_DP, ExchangeStyle

NOT_GROUP_ROUNDS_NOTE = "it is not a sequence of rounds of disjoint groups"


class ScheduleError(UserError):
    """The rounds do not form a valid Decent-DP topology."""


def nics_in_use(nics_per_node: int, gpus_per_node: int) -> int:
    """NICs a node's ranks send through: one rail per local rank at most (and at least one NIC)."""
    return max(1, min(nics_per_node, gpus_per_node))


def nic_of_ranks(ranks: np.ndarray, gpus_per_node: int, nics_per_node: int) -> np.ndarray:
    """The NIC (numbered node-major) each rank sends through on a rail-optimised node: local rank i
    uses NIC i mod nics. One rule for the NIC-sharing count and the NIC byte bound."""
    k = gpus_per_node
    nics = nics_in_use(nics_per_node, k)
    node = ranks // k
    return node if nics == 1 else node * nics + (ranks % k) % nics


@dataclass(frozen=True, eq=False)
class Round:
    """labels[r] = index of rank r's group in this round; weights[label] = that group's keep-weight w."""

    labels: np.ndarray
    weights: np.ndarray

    @staticmethod
    def from_groups(n: int, groups: list[list[int]], weights: list[float] | float | None = None) -> Round:
        """Build from explicit groups; weights default to an exact group average (w = 1/|g|)."""
        labels = np.full(n, -1, dtype=np.int64)
        for gi, ranks in enumerate(groups):
            ranks_arr = np.asarray(ranks, dtype=np.int64)
            if np.any(ranks_arr < 0) or np.any(ranks_arr >= n):
                raise ScheduleError(f"group {ranks} has a rank outside 0..{n - 1}")
            if np.any(labels[ranks_arr] != -1) or len(set(ranks)) != len(ranks):
                raise ScheduleError(f"a rank of group {ranks} is already in another group this round")
            labels[ranks_arr] = gi
        if weights is None:
            w = np.array([1.0 / len(g) for g in groups])
        elif np.isscalar(weights):
            w = np.full(len(groups), float(weights))
        else:
            w = np.asarray(weights, dtype=float)
        return Round(labels, w)

    @property
    def n(self) -> int:
        return int(self.labels.size)

    @cached_property
    def sorted_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """(ranks sorted by group then rank, where each group starts in that order): computed once
        per round and shared by the cost shapes and the gossip recurrence."""
        order = np.argsort(self.labels, kind="stable")
        lab = self.labels[order]
        return order, np.flatnonzero(np.concatenate([[True], lab[1:] != lab[:-1]]))

    def group_sizes(self) -> np.ndarray:
        """Ranks per group (by label), counted once per round: the checks, the builders' Decent-DP
        verdict and the consensus metrics all ask (read-only: a round is shared)."""
        return self._group_sizes

    @cached_property
    def _group_sizes(self) -> np.ndarray:
        sizes = np.bincount(self.labels, minlength=self.weights.size)
        sizes.flags.writeable = False
        return sizes

    def groups(self) -> list[list[int]]:
        """Explicit groups (sorted ranks), for small n: printing, Decent-DP registration, tests."""
        order = np.argsort(self.labels, kind="stable")
        bounds = np.flatnonzero(np.diff(self.labels[order])) + 1
        return [chunk.tolist() for chunk in np.split(order, bounds)]

    def validate(self) -> None:
        """Each rank in exactly one group; weights in [0, 1]; every group non-empty (checked once: a
        round's arrays are not changed after it is built, and the cost shapes ask again every time)."""
        self._valid  # noqa: B018 (the check runs on first access, raising if the round is invalid)

    @cached_property
    def _valid(self) -> bool:
        if self.labels.ndim != 1 or self.n == 0:
            raise ScheduleError("a round needs one label per rank")
        if self.labels.min() < 0 or self.labels.max() >= self.weights.size:
            raise ScheduleError("some rank is in no group this round")
        if self.group_sizes().min() == 0:
            raise ScheduleError("a round has an empty group")
        if self.weights.min() < 0 or self.weights.max() > 1:
            raise ScheduleError("group weights must lie in [0, 1]")
        return True

    def mix(self, x: np.ndarray) -> np.ndarray:
        """Apply this round's mixing matrix to x (shape (n,) or (n, d)) in O(n * d), no n x n matrix."""
        sizes = self.group_sizes().astype(float)
        x2 = x.reshape(self.n, -1)
        sums = np.zeros((self.weights.size, x2.shape[1]))
        np.add.at(sums, self.labels, x2)
        w = self.weights[self.labels][:, None]
        g = sizes[self.labels][:, None]
        # x_i <- w x_i + (1-w)/(g-1) (sum_g - x_i); singleton groups keep x_i.
        with np.errstate(invalid="ignore", divide="ignore"):
            c = np.where(g > 1, (1.0 - w) / np.maximum(g - 1.0, 1.0), 0.0)
        out = (w - c) * x2 + c * sums[self.labels]
        out = np.where(g > 1, out, x2)
        return out.reshape(x.shape)

    def dense(self) -> np.ndarray:
        """The n x n mixing matrix; only for small n (tests, printing)."""
        if self.n > 4096:
            raise ScheduleError("dense mixing matrices are only built for n <= 4096")
        return self.mix(np.eye(self.n))

    def group_placement(
        self, shape: ClusterShape, nics_per_node: int = 1
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per group (indexed by label): its size, the nodes it spans, its NIC sharing q and its rails.

        A group all-reduces as a ring over its sorted ranks (gloo/NCCL ring order). Each ring hop
        between different nodes is one flow leaving the source rank's NIC: on a rail-optimised node
        local rank i sends through NIC i mod nics_per_node. A NIC's load is the number of such flows
        over all groups running in this round, and a group is charged the load of the busiest NIC its
        members use. A group with several ranks on a node spreads over min(nics, ranks per node) rails.
        """
        key = (shape, nics_per_node)  # kept: a round is costed again (uncertainty, a sweep's reduced systems)
        if key not in self._placements:
            self.validate()
            if shape.gpus != self.n:
                raise ScheduleError(f"round has {self.n} ranks but the cluster has {shape.gpus}")
            pairs = self.group_sizes().max() <= 2
            self._placements[key] = (self._pair_placement if pairs else self._ring_placement)(
                shape, nics_per_node
            )
        return self._placements[key]

    @cached_property
    def _placements(self) -> dict:
        return {}

    def _ring_placement(self, shape: ClusterShape, nics_per_node: int) -> tuple[np.ndarray, ...]:
        """group_placement for any round: every group's ring hops along its sorted ranks."""
        k = shape.gpus_per_node
        nics = nics_in_use(nics_per_node, k)
        order, starts = self.sorted_groups
        lab = self.labels[order]
        node = order // k
        nic = nic_of_ranks(order, k, nics_per_node)
        ends = np.append(starts[1:], lab.size)
        # next member in ring order (cyclic within each group)
        nxt = np.arange(lab.size) + 1
        nxt[ends - 1] = starts
        crossing = node != node[nxt]
        single = (ends - starts) == 1
        load = np.bincount(nic[crossing], minlength=shape.nodes * nics)
        sizes = ends - starts
        # nodes spanned per group: count node changes along the sorted ranks (node-major => contiguous)
        node_change = np.concatenate([[True], (node[1:] != node[:-1]) | (lab[1:] != lab[:-1])])
        spans = np.add.reduceat(node_change.astype(np.int64), starts)
        q = np.maximum.reduceat(load[nic], starts)
        q = np.where(spans > 1, np.maximum(q, 1), 1)
        spans = np.where(single, 1, spans)
        rails = np.where(spans > 1, np.minimum(nics, np.maximum(sizes // np.maximum(spans, 1), 1)), 1)
        return sizes, spans, q, rails

    def _pair_placement(self, shape: ClusterShape, nics_per_node: int) -> tuple[np.ndarray, ...]:
        """group_placement for a round of pairs and singletons, on (first, second) member arrays: a pair
        on two nodes is two flows (one each way), from its members' NICs; the same numbers, without the
        per-segment cost of reduceat over n / 2 groups."""
        k = shape.gpus_per_node
        order, starts = self.sorted_groups
        sizes = self.group_sizes()  # by label = in the order sorted_groups starts the groups
        a = order[starts]
        b = order[starts + sizes - 1]
        cross = (a // k) != (b // k)
        nic_a, nic_b = nic_of_ranks(a, k, nics_per_node), nic_of_ranks(b, k, nics_per_node)
        minlength = shape.nodes * nics_in_use(nics_per_node, k)
        load = np.bincount(np.concatenate([nic_a[cross], nic_b[cross]]), minlength=minlength)
        q = np.where(cross, np.maximum(np.maximum(load[nic_a], load[nic_b]), 1), 1)
        spans = np.where(cross, 2, 1)
        return sizes, spans, q, np.ones_like(sizes)

    def group_shapes(self, shape: ClusterShape, nics_per_node: int = 1) -> Counter:
        """How many groups of each GroupShape this round runs (see group_placement)."""
        keys = Counter(zip(*(a.tolist() for a in self.group_placement(shape, nics_per_node)), strict=True))
        return Counter({GroupShape(s, sp, qq, r): c for (s, sp, qq, r), c in keys.items()})

    def per_rank_cost(self, shape: ClusterShape, cost_of, nics_per_node: int = 1) -> np.ndarray:
        """cost_of(GroupShape) evaluated once per distinct shape, then given to every rank of such a group."""
        shapes, of_rank = self._shape_index(shape, nics_per_node)
        costs = np.array([cost_of(g) for g in shapes])
        if len(shapes) == 1:  # every rank gets the one cost: the gather's values, as a read-only view
            return np.broadcast_to(costs, (self.n, *costs.shape[1:]))
        return costs[of_rank]

    def _shape_index(self, shape: ClusterShape, nics_per_node: int) -> tuple[list[GroupShape], np.ndarray]:
        """(the distinct GroupShapes of this round, each rank's index into them); kept per cluster, as the
        placement is: a crossover search costs one round at many bandwidths and computes."""
        key = (shape, nics_per_node)
        if key in self._shape_indexes:
            return self._shape_indexes[key]
        sizes, spans, q, rails = self.group_placement(shape, nics_per_node)
        # One int64 key per group, unique'd in 1-D (fast). Each field gets its own base (spans <= nodes,
        # q <= k, rails <= k), so a key is < (n + 1)(nodes + 1)(k + 1)^2: exact far past MAX_GPUS.
        # (One base n + 1 for all fields overflowed int64 at n = 2^21, giving negative sizes.)
        base_r = int(rails.max()) + 1
        base_q = int(q.max()) + 1
        base_s = int(spans.max()) + 1
        keys = ((sizes.astype(np.int64) * base_s + spans) * base_q + q) * base_r + rails
        low, high = (int(keys.min()), int(keys.max())) if keys.size else (0, 0)
        if low == high:  # one shape (most rounds): no sort, and every rank's index is 0
            uniq, inverse = keys[:1], None
        elif high - low <= 4 * keys.size:  # keys in a short range: counted, not sorted (np.unique's answer)
            seen = np.bincount(keys - low, minlength=high - low + 1) > 0
            uniq = np.flatnonzero(seen) + low
            inverse = (np.cumsum(seen) - 1)[keys - low]
        else:
            uniq, inverse = np.unique(keys, return_inverse=True)
        shapes = [
            GroupShape(
                int(k // (base_s * base_q * base_r)),
                int(k // (base_q * base_r) % base_s),
                int(k // base_r % base_q),
                int(k % base_r),
            )
            for k in uniq
        ]
        of_rank = np.zeros(self.n, dtype=np.intp) if inverse is None else inverse.reshape(-1)[self.labels]
        self._shape_indexes[key] = shapes, of_rank
        return self._shape_indexes[key]

    @cached_property
    def _shape_indexes(self) -> dict:
        return {}


@dataclass(frozen=True)
class StaticGraph:
    """A static circulant graph: every iteration rank i averages itself with ranks (i + d) mod n for
    each d in peer_offsets, all with the same weight.

    Why not Rounds: the neighbourhoods overlap, so it is not a set of disjoint groups. The cost model
    reads peer_offsets (each rank sends its full message to every peer); consensus reads circulant_row.
    """

    n: int
    peer_offsets: tuple[int, ...]
    weight: float  # of every in-neighbour and of the rank itself: 1 / (len(peer_offsets) + 1)

    @property
    def circulant_row(self) -> np.ndarray:
        """c of length n with W[i, j] = c[(j - i) mod n]."""
        row = np.zeros(self.n)
        row[0] = self.weight
        row[list(self.peer_offsets)] = self.weight
        return row


@dataclass(frozen=True, eq=False)
class Schedule:
    """A named, periodic list of rounds; iteration t uses rounds[t % period]."""

    name: str
    rounds: tuple[Round, ...]
    description: str = ""
    decent_dp_name: str | None = None  # the name Decent-DP registers it under, if it is a built-in there
    # The mixing when it is not disjoint groups; then rounds is one placeholder (every rank alone, identity)
    # that only carries n, and per-round group costs do not apply.
    static_graph: StaticGraph | None = None
    decent_dp_note: str | None = None  # why Decent-DP cannot run it as-is; None when it can
    exchange: ExchangeStyle = DECENT_DP  # the library that runs it, and how (exchange.py)

    def __post_init__(self) -> None:
        if self.static_graph is not None and self.decent_dp_note is None:
            # Decent-DP runs one group per rank per iteration: a static graph is never runnable
            object.__setattr__(self, "decent_dp_note", NOT_GROUP_ROUNDS_NOTE)

    @property
    def decent_dp_runnable(self) -> bool:
        """THE predicate for "can Decent-DP run this schedule on this shape", with `decent_dp_note` as
        the one reason text: the advise table and JSON (`runs_on_decent_dp`), the topologies table and
        validate (`rtmodel_validation.plan`) all read it."""
        return self.decent_dp_note is None

    @property
    def period(self) -> int:
        return len(self.rounds)

    @property
    def n(self) -> int:
        return self.rounds[0].n

    def validate(self) -> None:
        if not self.rounds:
            raise ScheduleError(f"{self.name}: a schedule needs at least one round")
        for i, r in enumerate(self.rounds):
            if r.n != self.n:
                raise ScheduleError(f"{self.name}: round {i} has {r.n} ranks, round 0 has {self.n}")
            r.validate()
        if self.static_graph is not None and self.static_graph.n != self.n:
            raise ScheduleError(
                f"{self.name}: static graph has {self.static_graph.n} ranks, rounds have {self.n}"
            )

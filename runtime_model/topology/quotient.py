"""Rank relabellings that leave a topology's rounds invariant, and the reduced system they give.

Why: rtmodel is an analytical model and its cost must not grow with n. Every topology here is invariant
under a group of rank relabellings (rotation by whole nodes, XOR by node bits, rotation within the node),
so the same topology built at a small n' is a *quotient* of the large one: a covering map phi from the
n ranks onto the n' ranks sends each group of full round t onto a group of reduced round round_map[t], with
the same group shape (size, nodes spanned, NIC sharing) and so the same cost. Then, without compute
variance, rank r of the full recurrence equals rank phi(r) of the reduced one at every iteration (by
induction on the max-plus recurrence): one representative per orbit is exact. With variance the draws of
distinct ranks are independent; the reduced system keeps each rank's local structure (distinct partners,
the same nodes, the same costs) for as many rounds as its folded bits allow, and its growth rate converges
to the full one as n' grows (tests compare it with the per-rank recurrence within the stated Monte-Carlo
error).

This module holds the two families of folds the topologies share; which one a topology uses, and with
what unit, is said by the topology itself (topology/kinds/<name>.py, its TopologyInfo.reduce):
- rotation_quotient: phi(r) = r mod n' (n' a multiple of `unit` dividing n);
- bit_fold_quotient: rank = block x U + position, the block index's bits below `keep` kept and the higher
  ones folded: bit i -> keep + (i - keep) mod (bits - keep). A hypercube round over bit i becomes the
  reduced round over its folded bit (XOR is linear, so phi is a homomorphism).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from runtime_model.core.scenario import ClusterShape, GroupShape
from runtime_model.topology.schedule import Schedule

# Up to this n every rank is simulated (the reference); above it the reduced system answers. 4,096 keeps
# today's predictions (n = 64 among them) bit for bit and bounds a reduced simulation's work.
FULL_MAX_N = 4096
# Ranks a reduced system holds at most (with variance); the Monte-Carlo error the simulation reports is
# the one of this size. Without variance the smallest quotient is used (it is exact).
REDUCED_RANKS = 1024

# build(name, small_shape): builds a registered topology (registry.build_schedule or a cached one)
BuildByName = Callable[[str, ClusterShape], Schedule]


class NoReduction(Exception):
    """This schedule at this shape has no quotient the model knows (the caller says so to the user)."""


@dataclass(frozen=True)
class Reduction:
    """A topology at a reduced shape that covers the full one (module doc).

    small: the topology built at `shape`; round_map[t] = the small round playing full round t;
    rank_map(r) = phi(r) for full ranks r (the first n' ranks map to themselves); group_scale: complete's
    group spans all n ranks, so its reduced shape is scaled by (n / n', m / m'); static_offsets: the full
    static graph's peer offsets (its cost), None for group schedules.
    """

    name: str
    full: ClusterShape
    shape: ClusterShape
    small: Schedule
    round_map: tuple[int, ...]
    rank_map: Callable[[np.ndarray], np.ndarray]
    group_scale: bool = False
    static_offsets: tuple[int, ...] | None = None

    @property
    def n(self) -> int:
        return self.shape.gpus

    @property
    def period(self) -> int:
        return len(self.round_map)

    @property
    def orbit_size(self) -> int:
        """Full ranks per reduced rank (every fold here is uniform)."""
        return self.full.gpus // self.shape.gpus

    def lift(self, g: GroupShape) -> GroupShape:
        """The full system's shape of a reduced group (identity but for complete's all-rank group)."""
        if not self.group_scale:
            return g
        return GroupShape(
            g.size * self.orbit_size, g.nodes * (self.full.nodes // self.shape.nodes), g.nic_sharing, g.rails
        )

    def schedule(self) -> Schedule:
        """The reduced recurrence's schedule: the small rounds in the full order (one period of the full one)."""
        sm = self.small
        if sm.static_graph is not None:
            return sm
        rounds = tuple(sm.rounds[j] for j in self.round_map)
        return Schedule(sm.name, rounds, sm.description, sm.decent_dp_name, None, sm.decent_dp_note)


def log2(x: int) -> int:
    return x.bit_length() - 1


def fold_bit(i: int, keep: int, bits: int) -> int:
    """Bit i of a full index -> its bit in a `bits`-bit reduced index (bits below `keep` unchanged)."""
    if i < bits:
        return i
    return keep + (i - keep) % (bits - keep)


def fold_index(hi: np.ndarray, full_bits: int, keep: int, bits: int) -> np.ndarray:
    """phi on a block/node index: XOR of the folded bits (a GF(2)-linear map, identity below 2^bits)."""
    hi = np.asarray(hi, dtype=np.int64)
    out = hi & ((1 << bits) - 1)
    for i in range(bits, full_bits):
        out ^= ((hi >> i) & 1) << fold_bit(i, keep, bits)
    return out


def bits_for(units: int, unit_ranks: int, keep: int, full_bits: int, target: int) -> int:
    """Reduced number of index bits: as many as `target` ranks allow, at least keep + 1, at most full."""
    room = max(target // unit_ranks, 1)
    return int(min(full_bits, max(keep + 1, room.bit_length() - 1)))


def identity_ranks(r) -> np.ndarray:
    return np.asarray(r, dtype=np.int64)


def largest_divisor_multiple(n: int, unit: int, limit: int) -> int:
    """The largest n' <= limit with unit | n' and n' | n (n itself when it fits)."""
    if n <= limit:
        return n
    rest = n // unit
    best = 1
    d = 1
    while d * d <= rest:
        if rest % d == 0:
            for e in (d, rest // d):
                if e * unit <= limit:
                    best = max(best, e)
        d += 1
    return best * unit


@dataclass(frozen=True)
class BlockFold:
    """phi(r) for rank = block x unit + position: the block index's `full_bits` bits folded onto `bits`,
    the `keep` lowest unchanged (module doc)."""

    full_bits: int
    unit: int
    keep: int
    bits: int

    def __call__(self, r) -> np.ndarray:
        hi, lo = np.divmod(np.asarray(r, dtype=np.int64), self.unit)
        return fold_index(hi, self.full_bits, self.keep, self.bits) * self.unit + lo

    def bit(self, i: int) -> int:
        return fold_bit(i, self.keep, self.bits)


@dataclass(frozen=True)
class _Modulo:
    n_red: int

    def __call__(self, r) -> np.ndarray:
        return np.asarray(r, dtype=np.int64) % self.n_red


def rotation_quotient(
    name: str, shape: ClusterShape, build: BuildByName, target: int, unit: int, group_scale: bool = False
) -> Reduction:
    """phi(r) = r mod n', n' the largest multiple of `unit` dividing n with about `target` ranks (two
    nodes at least); the small schedule plays its own rounds in order."""
    n, k = shape.gpus, shape.gpus_per_node
    n_red = largest_divisor_multiple(n, unit, max(target, 2 * unit))  # two nodes at least
    if n_red < min(n, 2 * unit):
        raise NoReduction(f"n / {unit} = {n // unit} has no divisor that keeps two nodes")
    small_shape = ClusterShape(n_red, k)
    small = build(name, small_shape)
    round_map = tuple(range(small.period))
    return Reduction(name, shape, small_shape, small, round_map, _Modulo(n_red), group_scale=group_scale)


def bit_fold_quotient(
    name: str, shape: ClusterShape, build: BuildByName, fold: BlockFold, rounds_per_bit: int = 1
) -> Reduction:
    """The topology at (unit << fold.bits) ranks, its rounds over block bit i played by those over the
    folded bit (rounds_per_bit consecutive rounds per bit)."""
    small_shape = ClusterShape(fold.unit << fold.bits, shape.gpus_per_node)
    small = build(name, small_shape)
    round_map = tuple(
        rounds_per_bit * fold.bit(i) + h for i in range(fold.full_bits) for h in range(rounds_per_bit)
    )
    return Reduction(name, shape, small_shape, small, round_map, fold)

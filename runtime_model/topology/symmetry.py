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

The folds, per topology (k GPUs per node, m nodes):
- ring: phi(r) = r mod n' (n' a multiple of lcm(2, k) dividing n).
- one-peer-exp, base-2 at n = 2^a q: rank = block x U + position; the block index's bits below the node
  (U 2^c a multiple of k) are kept, the higher ones folded: bit i -> c + (i - c) mod (a' - c). A hypercube
  round over bit i becomes the reduced round over its folded bit (XOR is linear, so phi is a homomorphism).
- alternating-exp-ring: the same fold on node bits, keeping bits 0 and 1 (they decide which node pairs run
  their inter-node iteration first).
- complete: phi(r) = r mod n'; the one group spans every node, so its cost is the reduced group's shape
  scaled back to n ranks on m nodes (the NIC sharing, a per-node property, is kept).
- static-exp: no groups; its cost is computed for the full graph (static_graph_comm_s, O(log n)), and the
  recurrence runs on n' ranks with the offsets 2^j folded the same way (mod n', zero offsets folded back).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from runtime_model.core.scenario import ClusterShape, GroupShape
from runtime_model.topology.schedule import Round, Schedule, StaticGraph

# Up to this n every rank is simulated (the reference); above it the reduced system answers. 4,096 keeps
# today's predictions (n = 64 among them) bit for bit and bounds a reduced simulation's work.
FULL_MAX_N = 4096
# Ranks a reduced system holds at most (with variance); the Monte-Carlo error the simulation reports is
# the one of this size. Without variance the smallest quotient is used (it is exact).
REDUCED_RANKS = 1024
# base-2's quotient keeps whole blocks of its odd part q (2^(c+1) of them, k = 2^c d): the ranks it may
# hold at most (a per-rank run of that size takes ~1.5 s and ~300 MB). Inside a block no two positions
# play the same part in every round (the coarsest partition the rounds respect has q classes: tests), so
# no smaller system is exact: above this rtmodel says it cannot predict base-2 there.
BASE2_MAX_RANKS = 1 << 16


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


def _fold_bit(i: int, keep: int, bits: int) -> int:
    """Bit i of a full index -> its bit in a `bits`-bit reduced index (bits below `keep` unchanged)."""
    if i < bits:
        return i
    return keep + (i - keep) % (bits - keep)


def _fold_index(hi: np.ndarray, full_bits: int, keep: int, bits: int) -> np.ndarray:
    """phi on a block/node index: XOR of the folded bits (a GF(2)-linear map, identity below 2^bits)."""
    hi = np.asarray(hi, dtype=np.int64)
    out = hi & ((1 << bits) - 1)
    for i in range(bits, full_bits):
        out ^= ((hi >> i) & 1) << _fold_bit(i, keep, bits)
    return out


def _bits_for(units: int, unit_ranks: int, keep: int, full_bits: int, target: int) -> int:
    """Reduced number of index bits: as many as `target` ranks allow, at least keep + 1, at most full."""
    room = max(target // unit_ranks, 1)
    return int(min(full_bits, max(keep + 1, room.bit_length() - 1)))


def _log2(x: int) -> int:
    return x.bit_length() - 1


def reduce(schedule_name: str, shape: ClusterShape, build, target: int = REDUCED_RANKS) -> Reduction:
    """The reduced system of topology `schedule_name` at `shape` with about `target` ranks or fewer.

    `build(name, small_shape)` builds the topology (topologies.build_schedule). Raises NoReduction when
    the topology has no known quotient at this shape (base-2 at an n with a large odd part).
    """
    n, k, m = shape.gpus, shape.gpus_per_node, shape.nodes
    name = schedule_name
    if name in ("complete", "ring", "static-exp"):
        unit = k if name != "ring" else k * 2 // math.gcd(2, k)
        n_red = _largest_divisor_multiple(n, unit, max(target, 2 * unit))  # two nodes at least
        if n_red < min(n, 2 * unit):
            raise NoReduction(f"n / {unit} = {n // unit} has no divisor that keeps two nodes")
        small_shape = ClusterShape(n_red, k)
        small = build(name, small_shape)

        def mod(r, n_red=n_red):
            return np.asarray(r, dtype=np.int64) % n_red

        if name == "static-exp":
            tau = (n - 1).bit_length()
            offsets = tuple(1 << i for i in range(tau))
            folded = _folded_offsets(offsets, n_red)
            graph = StaticGraph(n_red, folded, 1.0 / (tau + 1))
            placeholder = Round(np.arange(n_red, dtype=np.int64), np.ones(n_red))
            small = Schedule(
                small.name,
                (placeholder,),
                small.description,
                None,
                graph,
                small.decent_dp_note,
                small.exchange,
            )
            return Reduction(name, shape, small_shape, small, (0,), mod, static_offsets=offsets)
        round_map = tuple(range(small.period))
        return Reduction(name, shape, small_shape, small, round_map, mod, group_scale=(name == "complete"))
    if name in ("one-peer-exp", "sgp-exp", "osgp-exp", "alternating-exp-ring"):  # SGP's: one-peer-exp's graph
        if name == "alternating-exp-ring":
            full_bits, unit, keep = _log2(m), k, min(2, _log2(m))
        else:
            full_bits, unit, keep = _log2(n), 1, _log2(k)
        bits = _bits_for(1 << full_bits, unit, keep, full_bits, target)
        if name == "alternating-exp-ring" and full_bits > bits:
            bits = max(bits, 3)
        small_shape = ClusterShape(unit << bits, k)
        small = build(name, small_shape)
        if name == "alternating-exp-ring":
            round_map = tuple(2 * _fold_bit(i, keep, bits) + h for i in range(full_bits) for h in (0, 1))
        else:
            round_map = tuple(_fold_bit(i, keep, bits) for i in range(full_bits))

        def fold(r, full_bits=full_bits, unit=unit, keep=keep, bits=bits):
            hi, lo = np.divmod(np.asarray(r, dtype=np.int64), unit)
            return _fold_index(hi, full_bits, keep, bits) * unit + lo

        return Reduction(name, shape, small_shape, small, round_map, fold)
    if name == "base-2":
        return _reduce_base2(shape, build, target)
    raise NoReduction(f"{name}: no symmetry known")


# Topologies with no reduced system: above FULL_MAX_N rtmodel says it cannot predict them there (the
# row is not applicable, with the reason). BlueFog's inner-outer graph: its period lcm(k, log2 m, ...)
# changes with the number of nodes, so no smaller system plays its rounds in the same order.
UNREDUCED = ("bluefog-dynamic-exp",)


def _reduce_base2(shape: ClusterShape, build, target: int) -> Reduction:
    """Base-2 at n = 2^a q: hypercube rounds over the 2^a blocks of q ranks (topology_builders._base2_pairs)
    after the simple Base-2 rounds inside each block; the block bits are folded like one-peer-exp's."""
    from runtime_model.topology.topology_builders import _hypercube_len, _simple_base2_len

    n, k = shape.gpus, shape.gpus_per_node
    a = _log2(n & -n)
    q = n >> a
    if q > 1 and _simple_base2_len(n) < _simple_base2_len(q) + _hypercube_len(1 << a):  # n odd
        if n > max(target, BASE2_MAX_RANKS):
            raise NoReduction(
                f"base-2 at odd n = {n} is one simple Base-2 graph whose ranks all play different parts, "
                f"so only all {n} ranks reproduce it (at most {BASE2_MAX_RANKS} are simulated)"
            )
        small = build("base-2", shape)  # no quotient: the system itself, rank by rank
        return Reduction("base-2", shape, shape, small, tuple(range(small.period)), _identity)
    c = _log2(k & -k)  # k = 2^c d with d | q: 2^c blocks of q ranks hold whole nodes
    unit, keep = q, c  # (q = 1: a power of 2, the simple graph is the hypercube on all ranks)
    bits = _bits_for(1 << a, unit, keep, a, target)
    if q > 1:
        bits = max(bits, min(a, keep + 1))
    small_shape = ClusterShape(unit << bits, k)
    if small_shape.gpus > max(target, BASE2_MAX_RANKS):
        raise NoReduction(
            f"base-2 at n = {n} = 2^{a} x {q}: its exact quotient keeps whole blocks of the odd part {q} "
            f"({small_shape.gpus} ranks, over the {BASE2_MAX_RANKS} simulated), and no two ranks of a block play "
            "the same part in every round, so no smaller system reproduces it"
        )
    small = build("base-2", small_shape)
    inner = 0 if q == 1 else _simple_base2_len(q)
    round_map = tuple(range(inner)) + tuple(inner + _fold_bit(i, keep, bits) for i in range(a))
    if q == 1:
        round_map = tuple(_fold_bit(i, keep, bits) for i in range(a))
    if len(round_map) == 0 or max(round_map) >= small.period:
        raise NoReduction("base-2: the reduced schedule does not have the folded rounds")

    def fold(r, a=a, unit=unit, keep=keep, bits=bits):
        hi, lo = np.divmod(np.asarray(r, dtype=np.int64), unit)
        return _fold_index(hi, a, keep, bits) * unit + lo

    return Reduction("base-2", shape, small_shape, small, round_map, fold)


def _identity(r) -> np.ndarray:
    return np.asarray(r, dtype=np.int64)


def _largest_divisor_multiple(n: int, unit: int, limit: int) -> int:
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


def _folded_offsets(offsets: tuple[int, ...], n_red: int) -> tuple[int, ...]:
    """Offsets 2^j taken mod n'; one that wraps to 0 (a rank would be its own peer) is folded onto a
    small power of 2 instead, so every rank keeps as many distinct draws among its peers as it can."""
    bits = max(1, (n_red - 1).bit_length())
    out = []
    for j, off in enumerate(offsets):
        o = off % n_red
        out.append(o if o else (1 << (j % bits)) % n_red or 1)
    return tuple(out)

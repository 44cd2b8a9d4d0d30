"""The gossip schedule builders: Decent-DP's four built-ins, exactly as it builds them, plus two any-n ones.

Why rebuild Decent-DP's topologies instead of importing them: runtime_model never imports torch, and
Decent-DP's `Topology` needs an initialised torch.distributed. So each builder here reproduces the
group membership, round order and weights of `decent_dp/topo.py` (0.2.3); tests compare them against
Decent-DP's own `_get_topo_edges`. Everything is vectorised over ranks (the advisor sweeps n up to
65,536): a round is built from a per-rank "group key" (the smallest rank of the rank's group).

Beyond Decent-DP:
- `base-2`: the 1-peer Base-2 graph (Base-(k+1) graph with k = 1, Takezawa et al., NeurIPS 2023),
  exact average in finitely many rounds for ANY n. Every round is pairs and singletons; each pair's two
  members keep the same weight, so it is expressible as Decent-DP groups with one keep-weight each.
- `static-exp`: the static exponential graph (Ying et al., 2021). It is not a set of disjoint groups,
  so it is a `StaticGraph` (offsets 2^0 .. 2^(ceil(log2 n) - 1), weight 1 / (ceil(log2 n) + 1)) and its
  one Round is a placeholder.

Every schedule's `decent_dp_note` is decided here, before it is constructed: Decent-DP 0.2.3 scales by
(1 - w) / (|group| - 1), so a 1-rank group (base-2 at most n, AER with one GPU per node, complete at
n = 1) raises ZeroDivisionError there unless patched.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable

import numpy as np

from runtime_model.core.scenario import ClusterShape, ScenarioError
from runtime_model.topology.schedule import Round, Schedule, StaticGraph


class TopologyError(ScenarioError):
    """A topology name or shape the user asked for cannot be built."""


class TopologyNotApplicable(TopologyError):
    """The topology exists but cannot be formed on this cluster shape (the message says why)."""


def _is_pow2(x: int) -> bool:
    return x >= 1 and (x & (x - 1)) == 0


def _log2(x: int) -> int:
    return x.bit_length() - 1


# Rounds built alike are one object while any schedule holds them: one-peer-exp, base-2 (at n = 2^p), SGP and
# OSGP play the very same rounds, and a round's placements and cost shapes are kept per round object
# (Round.group_placement): a sweep placed 647 rounds, 295 of them again.
_BUILT: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _round_from_keys(key: np.ndarray, keep: np.ndarray) -> Round:
    """Round from key[r] = smallest rank of r's group (groups numbered by that rank) and per-rank keep-weight;
    a round equal to one already built and still held is that one (its arrays read-only: shared)."""
    ranks = np.arange(key.size)
    leader = key == ranks
    gid = np.cumsum(leader) - 1
    labels, weights = gid[key].astype(np.int64), np.asarray(keep, dtype=float)[leader]
    digest = hashlib.blake2b(labels, digest_size=16)  # the arrays' own buffers (contiguous), not copies
    digest.update(weights)
    found = _BUILT.get((labels.size, digest.digest()))
    if found is None:
        labels.flags.writeable = weights.flags.writeable = False
        found = _BUILT[(labels.size, digest.digest())] = Round(labels, weights)
    return found


def _round_from_partners(partner: np.ndarray, keep: np.ndarray) -> Round:
    """Round of pairs and singletons: partner[r] = r's peer (r itself when alone); keep = per-rank weight."""
    return _round_from_keys(np.minimum(np.arange(partner.size), partner), keep)


_ONE_RANK_GROUPS_NOTE = (
    "has 1-rank groups: Decent-DP 0.2.3 computes (1 - w) / (|group| - 1) and raises "
    "ZeroDivisionError for them unless patched"
)
_STATIC_GRAPH_NOTE = (
    "a static graph with several peers per iteration is not a Decent-DP "
    "topology (one group per rank per iteration)"
)


def _schedule(
    name: str,
    rounds: tuple[Round, ...],
    description: str,
    decent_dp_name: str | None,
    static_graph: StaticGraph | None = None,
    decent_dp_note: str | None = None,
) -> Schedule:
    """A validated Schedule whose Decent-DP verdict is decided before construction: 1-rank groups
    divide by zero there, unless a note (why it cannot run at all) is given already."""
    if decent_dp_note is None and any(r.group_sizes().min() == 1 for r in rounds):
        decent_dp_note = _ONE_RANK_GROUPS_NOTE
    schedule = Schedule(name, rounds, description, decent_dp_name, static_graph, decent_dp_note)
    schedule.validate()
    return schedule


def require_applicable(applicability: Callable[[ClusterShape], str | None], shape: ClusterShape) -> None:
    reason = applicability(shape)
    if reason is not None:
        raise TopologyNotApplicable(reason)


# ---------------------------------------------------------------- applicability


def ring_applicability(shape: ClusterShape) -> str | None:
    if shape.gpus % 2:
        return f"ring needs an even number of GPUs; n = {shape.gpus}"
    return None


def one_peer_exp_applicability(shape: ClusterShape) -> str | None:
    n = shape.gpus
    if not _is_pow2(n):
        return f"one-peer-exp needs n to be a power of 2; n = {n}"
    if n == 1:
        return "one-peer-exp needs at least 2 GPUs (Decent-DP builds zero rounds at n = 1)"
    return None


def aer_applicability(shape: ClusterShape) -> str | None:
    m = shape.nodes
    if not _is_pow2(m) or m < 2:
        return (
            "alternating-exp-ring needs the number of nodes to be a power of 2 and at least 2; "
            f"nodes = {m} (n = {shape.gpus}, {shape.gpus_per_node} GPUs per node)"
        )
    return None


def always_applicable(shape: ClusterShape) -> str | None:
    return None


# ---------------------------------------------------------------- Decent-DP built-ins


def build_complete(shape: ClusterShape) -> Schedule:
    """One group of all n ranks, w = 1/n (Decent-DP `complete`)."""
    n = shape.gpus
    rnd = Round(np.zeros(n, dtype=np.int64), np.array([1.0 / n]))
    return _schedule(
        "complete", (rnd,), "all n ranks average every iteration (global all-reduce)", "complete"
    )


def build_ring(shape: ClusterShape) -> Schedule:
    """Decent-DP `ring`: round 0 pairs (2j, 2j+1), round 1 pairs (2j, 2j-1 mod n); w = 1/2.

    At n = 2 both rounds are the same pair (0, 1), as in Decent-DP.
    """
    require_applicable(ring_applicability, shape)
    n = shape.gpus
    ranks = np.arange(n)
    half = np.full(n, 0.5)
    r0 = _round_from_partners(ranks ^ 1, half)
    # round 1: even 2j with 2j-1 (mod n), i.e. odd r with r+1 (mod n)
    p1 = np.where(ranks % 2 == 0, (ranks - 1) % n, (ranks + 1) % n)
    r1 = _round_from_partners(p1, half)
    return _schedule(
        "ring", (r0, r1), "one peer per iteration, alternating left and right ring neighbour", "ring"
    )


def build_one_peer_exp(shape: ClusterShape) -> Schedule:
    """Decent-DP `one-peer-exp`: round i pairs j with j + 2^i greedily (= j XOR 2^i for n = 2^p); w = 1/2."""
    require_applicable(one_peer_exp_applicability, shape)
    n = shape.gpus
    ranks = np.arange(n)
    half = np.full(n, 0.5)
    rounds = tuple(_round_from_partners(ranks ^ (1 << i), half) for i in range(_log2(n)))
    return _schedule(
        "one-peer-exp",
        rounds,
        "one peer per iteration at distance 2^i (hypercube); exact average after log2 n iterations",
        "one-peer-exp",
    )


def build_alternating_exp_ring(shape: ClusterShape) -> Schedule:
    """Decent-DP `alternating-exp-ring`: per node-pair round i two iterations, intra (w = 1/k) and
    inter (2k ranks, w = 1/(2k)); node pairs are j, j + 2^i (greedy = XOR); the order of the two
    iterations alternates with Decent-DP's running pair counter `cnt` (even: intra first).
    """
    require_applicable(aer_applicability, shape)
    n, k, m = shape.gpus, shape.gpus_per_node, shape.nodes
    ranks = np.arange(n)
    node = ranks // k
    intra_key = node * k
    intra_w = 1.0 / k
    inter_w = 1.0 / k / 2.0  # Decent-DP's literal expression
    rounds: list[Round] = []
    for i in range(_log2(m)):
        bit = 1 << i
        lead = node & ~bit  # the pair's smaller node: its bit i is 0
        # index of the pair among this round's pairs in Decent-DP's scan order (ascending lead node)
        q = ((lead >> (i + 1)) << i) | (lead & (bit - 1))
        inter_first = (i * (m // 2) + q) % 2 == 1
        inter_key = lead * k
        first_key = np.where(inter_first, inter_key, intra_key)
        second_key = np.where(inter_first, intra_key, inter_key)
        first_w = np.where(inter_first, inter_w, intra_w)
        second_w = np.where(inter_first, intra_w, inter_w)
        rounds.append(_round_from_keys(first_key, first_w))
        rounds.append(_round_from_keys(second_key, second_w))
    return _schedule(
        "alternating-exp-ring",
        tuple(rounds),
        "node pairs at distance 2^i; each pair alternates an intra-node and a two-node average",
        "alternating-exp-ring",
    )


# ---------------------------------------------------------------- Base-2 graph (Takezawa et al. 2023)

_Pairs = tuple[np.ndarray, np.ndarray]  # (partner, keep) over local indices 0..size-1


def _hypercube_pairs(size: int, bit: int) -> _Pairs:
    local = np.arange(size)
    if size == 1:
        return local, np.ones(1)
    return local ^ (1 << bit), np.full(size, 0.5)


def _hypercube_len(size: int) -> int:
    return 1 if size == 1 else _log2(size)


def _simple_base2_len(n: int) -> int:
    return _hypercube_len(n) if _is_pow2(n) else 2 * _log2(n) + 1


def _simple_base2(n: int) -> list[_Pairs]:
    """The Simple Base-2 graph: split n into its binary blocks 2^p0 > 2^p1 > ... (consecutive ranks).

    Rounds 0..p0-1: every block runs hypercube rounds (smaller blocks repeat theirs).
    Round p0 + r, for each block r but the last: every rank of the smaller blocks r+1.. pairs with a
    rank of block r, taken from its end, with keep-weight 1 - s_r / (s_r + s_{r+1} + ...); the rest of
    block r pairs up (w = 1/2). Blocks before r re-run their hypercube rounds. After block r receives,
    its mean is the global mean, so its hypercube rounds finish the job: 2 p0 + 1 rounds in all.
    """
    if _is_pow2(n):
        return [_hypercube_pairs(n, b) for b in range(_hypercube_len(n))]
    sizes = [1 << b for b in reversed(range(n.bit_length())) if (n >> b) & 1]
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    nblocks, p0 = len(sizes), _log2(sizes[0])
    rounds: list[_Pairs] = []
    for m in range(2 * p0 + 1):
        partner = np.arange(n)
        keep = np.ones(n)
        r = m - p0
        for blk, (size, off) in enumerate(zip(sizes, offs, strict=True)):
            if m < p0:
                step = m
            elif blk > r or (blk == r and blk != nblocks - 1):
                continue  # sending to / receiving at block r: set below
            else:  # re-averaging: count of this block's earlier hypercube rounds since it received
                step = m - p0 - blk - (0 if blk == nblocks - 1 else 1)
            local, w = _hypercube_pairs(size, step % _hypercube_len(size))
            partner[off : off + size] = off + local
            keep[off : off + size] = w
        if 0 <= r < nblocks - 1:
            senders = np.concatenate(
                [np.arange(offs[b], offs[b] + sizes[b]) for b in range(nblocks - 1, r, -1)]
            )
            receivers = offs[r] + sizes[r] - 1 - np.arange(senders.size)
            w_pair = 1.0 - sizes[r] / sum(sizes[r:])
            partner[senders], partner[receivers] = receivers, senders
            keep[senders] = keep[receivers] = w_pair
            idle = np.arange(offs[r], offs[r] + sizes[r] - senders.size)
            a, b = idle[0 : idle.size - 1 : 2], idle[1 : idle.size : 2]
            partner[a], partner[b] = b, a
            keep[a] = keep[b] = 0.5
        rounds.append((partner, keep))
    return rounds


def _base2_pairs(n: int) -> list[_Pairs]:
    """Base-2 graph: n = 2^a q (q odd). Either the simple graph on all n, or (when shorter, which is
    whenever a >= 1 and q > 1) the simple graph on each of the 2^a consecutive q-blocks followed by a
    hypercube over the 2^a blocks (rank r pairs with the same position in block (r // q) XOR 2^i).
    """
    a = _log2(n & -n)
    q = n >> a
    if _simple_base2_len(n) < _simple_base2_len(q) + _hypercube_len(1 << a):
        return _simple_base2(n)
    blocks = np.arange(1 << a)[:, None] * q
    rounds = [((blocks + p[None, :]).ravel(), np.tile(w, 1 << a)) for p, w in _simple_base2(q)]
    ranks = np.arange(n)
    blk, pos = divmod(ranks, q)
    for b in range(a):  # a >= 1 here: the composite is only shorter when n is even and not 2^a
        rounds.append(((blk ^ (1 << b)) * q + pos, np.full(n, 0.5)))
    return rounds


def build_base2(shape: ClusterShape) -> Schedule:
    """1-peer Base-2 graph (Base-(k+1) with k = 1): exact average in at most 2 log2 n + 1 rounds for any n."""
    n = shape.gpus
    rounds = tuple(_round_from_partners(p, w) for p, w in _base2_pairs(n))
    return _schedule(
        "base-2",
        rounds,
        "one peer per iteration, any n: Base-2 graph (Takezawa et al. 2023), exact average in finite rounds",
        None,
    )


# ---------------------------------------------------------------- static exponential graph (Ying et al. 2021)


def build_static_exp(shape: ClusterShape) -> Schedule:
    """Static exponential graph: every iteration rank i averages itself with ranks i + 2^0 .. i + 2^(tau-1)
    (mod n), tau = ceil(log2 n), all weights 1/(tau + 1). Not disjoint groups, so a StaticGraph (module doc).
    """
    n = shape.gpus
    tau = (n - 1).bit_length()  # ceil(log2 n); 0 at n = 1
    graph = StaticGraph(n, tuple(1 << i for i in range(tau)), 1.0 / (tau + 1))
    placeholder = Round(np.arange(n, dtype=np.int64), np.ones(n))
    return _schedule(
        "static-exp",
        (placeholder,),
        f"static exponential graph: every iteration each rank sends to and receives from {tau} peers",
        None,
        static_graph=graph,
        decent_dp_note=_STATIC_GRAPH_NOTE,
    )

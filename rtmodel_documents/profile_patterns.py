"""Which collectives the communication benchmark runs: group patterns and message sizes (no torch).

Why patterns and not just "all ranks": Decent-DP all-reduces on sub-groups (pairs, one node, two
nodes), and what a group costs depends on where its ranks sit and how many flows share a NIC. Every
pattern runs all its disjoint groups at once, as training does, so NIC sharing is in the numbers.
An inter-node pattern whose groups share a NIC is also run with its first group alone (`...-alone`):
the pair tells a per-flow cap (one TCP stream, link-aggregation hashing) from the NIC's capacity.
Ranks are node-major: rank = node * k + local.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_model.core.scenario import ClusterShape
from runtime_model.topology.schedule import Round

ALONE = "-alone"
PATTERN_NAMES = (
    "pair-intra",
    "pair-inter",
    "pair-inter-alone",
    "node",
    "two-nodes",
    "two-nodes-alone",
    "all",
)
KIB = 1024
MIN_MESSAGE_BYTES = 4 * KIB


@dataclass(frozen=True)
class Pattern:
    """One pattern's disjoint groups on an n-rank, k-per-node cluster and the shape one group has."""

    name: str
    groups: tuple[tuple[int, ...], ...]
    group_size: int
    nodes_spanned: int
    nic_sharing: int

    def group_of(self, rank: int) -> int | None:
        for i, g in enumerate(self.groups):
            if rank in g:
                return i
        return None


def _groups(name: str, n: int, k: int) -> list[list[int]]:
    if name.endswith(ALONE):
        return _groups(name.removesuffix(ALONE), n, k)[:1]
    m = n // k
    if name == "pair-intra":
        return (
            [[node * k + 2 * i, node * k + 2 * i + 1] for node in range(m) for i in range(k // 2)]
            if k >= 2
            else []
        )
    if name == "pair-inter":
        return [[2 * j * k + r, (2 * j + 1) * k + r] for j in range(m // 2) for r in range(k)]
    if name == "node":
        return [list(range(node * k, node * k + k)) for node in range(m)] if k >= 2 else []
    if name == "two-nodes":
        return [list(range(2 * j * k, 2 * j * k + 2 * k)) for j in range(m // 2)]
    if name == "all":
        return [list(range(n))] if n >= 2 else []
    raise ValueError(f"unknown pattern {name!r}")


def patterns_for(n: int, k: int) -> list[Pattern]:
    """All patterns an n-rank cluster with k ranks per node can form, in PATTERN_NAMES order.

    The group shape (size, nodes spanned, NIC sharing) comes from runtime_model's
    Round.group_shapes, so the profile and the model count NIC sharing the same way.
    """
    shape = ClusterShape(n, k)
    out: list[Pattern] = []
    for name in PATTERN_NAMES:
        groups = _groups(name, n, k)
        if not groups:
            continue
        if name.endswith(ALONE):
            base = next((p for p in out if p.name == name.removesuffix(ALONE)), None)
            if base is None or base.nic_sharing < 2:  # alone would repeat the base shape's measurement
                continue
        members = {r for g in groups for r in g}
        singles = [[r] for r in range(n) if r not in members]  # idle ranks this pattern
        shapes = Round.from_groups(n, groups + singles).group_shapes(shape)
        real = [s for s in shapes if s.size >= 2]
        # all groups of a pattern are alike by construction; take the busiest if that ever changes
        gs = max(real, key=lambda s: (s.nic_sharing, s.nodes))
        out.append(Pattern(name, tuple(tuple(g) for g in groups), gs.size, gs.nodes, gs.nic_sharing))
    return out


def message_sizes(largest_bucket_bytes: int, factor: int) -> list[int]:
    """4 KiB, 4 KiB * factor, ... until a size >= the largest bucket (at least two sizes).

    Sizes are multiples of 4 bytes (fp32 elements)."""
    if factor < 2:
        raise ValueError("size factor must be >= 2")
    sizes = [MIN_MESSAGE_BYTES]
    while sizes[-1] < largest_bucket_bytes or len(sizes) < 2:
        sizes.append(sizes[-1] * factor)
    return sizes


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"

"""Collective costs in the Hockney alpha-beta model (Thakur, Rabenseifner & Gropp 2005).

Ring all-reduce over p ranks: 2(p-1) steps; every step every rank sends S/p bytes to its ring
neighbour, so a step lasts as long as the slowest hop: the inter-node link once the ring leaves a
node, where q flows leaving one NIC at once share it (effective beta = q * beta_inter).

    AR_p(S) = 2(p-1) * alpha + 2(p-1)/p * S * beta_bottleneck

When calibration measured the exact group shape, that measurement is used instead.
"""

from __future__ import annotations

from runtime_model.scenario import GroupShape, Network


def ring_allreduce_s(p: int, nbytes: float, latency_s: float, seconds_per_byte: float) -> float:
    """Ring all-reduce of nbytes over p ranks with one link's alpha and beta."""
    if p <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (p - 1) * latency_s + 2 * (p - 1) / p * nbytes * seconds_per_byte


def allreduce_parts_s(group: GroupShape, nbytes: float, network: Network) -> tuple[float, float]:
    """(latency part, bandwidth part) of one all-reduce; a measured fit for the exact shape wins."""
    if group.size <= 1 or nbytes <= 0:
        return 0.0, 0.0
    fit = network.group_costs.get(group.key)
    if fit is not None:
        return fit.fixed_s, max(0.0, fit.time_s(nbytes) - fit.fixed_s)
    if group.nodes == 1:
        link, share = network.intra, 1
    else:
        link, share = network.inter, group.nic_sharing
    fixed = ring_allreduce_s(group.size, 1.0, link.latency_s, 0.0)
    return fixed, ring_allreduce_s(group.size, nbytes, 0.0, share / link.bandwidth_Bps)


def allreduce_s(group: GroupShape, nbytes: float, network: Network) -> float:
    """All-reduce on one group placed as `group` says; uses a measured fit for that shape if present."""
    return sum(allreduce_parts_s(group, nbytes, network))


def serial_allreduces_s(group: GroupShape, sizes, network: Network) -> float:
    """Several all-reduces back to back on one group: their transfers share the links, and with a
    backend that keeps two in flight (gloo) only the first one's latency is exposed."""
    parts = [allreduce_parts_s(group, s, network) for s in sizes]
    if not parts:
        return 0.0
    if network.concurrent_collectives > 1:
        return max(f for f, _ in parts) + sum(b for _, b in parts)
    return sum(f + b for f, b in parts)


def global_allreduce_shape(gpus: int, gpus_per_node: int) -> GroupShape:
    """The group DDP all-reduces over: all n ranks, one ring, one flow per NIC."""
    return GroupShape(size=gpus, nodes=max(1, gpus // gpus_per_node), nic_sharing=1)


def busbw_Bps(p: int, nbytes: float, seconds: float) -> float:
    """nccl-tests bus bandwidth for all-reduce: algbw * 2(p-1)/p."""
    return (nbytes / seconds) * 2 * (p - 1) / p if seconds > 0 and p > 1 else 0.0

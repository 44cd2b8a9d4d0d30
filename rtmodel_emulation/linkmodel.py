"""When a packet crossing the emulated inter-node network is delivered (pure; no I/O).

Every node has one NIC: a transmit link shared by all flows leaving the node and a receive link shared
by all flows entering it (a non-blocking switch between them). A packet of s bytes from node a to b

    leaves a's NIC at   tx = max(now, tx_free[a]) + s/B              (a's uplink serialises)
    clears b's port at  rx = max(tx, rx_free[b] + s/B)               (b's downlink serialises; cut-through,
                                                                      so a lone flow pays s/B only once)
    is delivered at     rx + delay                                   (one-way propagation)

so k ranks of a node sharing its NIC, and incast, both see the per-node bandwidth B, as on a real cluster.
With rate_Bps=None the links are not serialised (bandwidth shaped elsewhere, e.g. by tc tbf).
"""

from __future__ import annotations


class LinkModel:
    """Per-node tx/rx link state; `deliver_at` returns a packet's release time (seconds, same clock as now)."""

    def __init__(self, nodes: int, rate_Bps: float | None, delay_s: float):
        if rate_Bps is not None and rate_Bps <= 0:
            raise ValueError("rate_Bps must be positive or None")
        if delay_s < 0:
            raise ValueError("delay_s must be >= 0")
        self.rate_Bps = rate_Bps
        self.delay_s = delay_s
        self.tx_free = [0.0] * nodes
        self.rx_free = [0.0] * nodes

    def deliver_at(self, src: int, dst: int, nbytes: int, now: float) -> float:
        if self.rate_Bps is None:
            return now + self.delay_s
        ser = nbytes / self.rate_Bps
        tx_done = max(now, self.tx_free[src]) + ser
        self.tx_free[src] = tx_done
        rx_done = max(tx_done, self.rx_free[dst] + ser)
        self.rx_free[dst] = rx_done
        return rx_done + self.delay_s

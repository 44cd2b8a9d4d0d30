"""A per-flow rate cap for the forwarder: one TCP/UDP stream may not send faster than `rate_Bps` (pure).

Why: on a real cluster one stream often cannot fill a NIC (a sender's core per stream, a NIC's per-queue
limit, link-aggregation hashing), so NCCL's socket transport opens NCCL_NSOCKS_PERTHREAD x
NCCL_SOCKET_NTHREADS streams per peer (nccl src/transport/net_socket.cc). This kernel has no fq (whose
`maxrate` caps each flow, Linux net/sched/sch_fq.c), so the forwarder caps each flow itself. A flow is a
serialiser of rate r in front of its node's NIC (rate B), cut-through as the NIC and the receiver's port
already are (rtmodel_emulation.linkmodel):

    the flow has produced a packet of s bytes at   done = max(arrival, flow's previous done) + s / r
    and the packet enters the NIC at               max(arrival, done - s / B)

so the NIC, busy s / B with it, finishes it no earlier than `done`. A lone flow then delivers S bytes
in S / min(r, B) (plus the delay), also when S is a single 64 KB packet, as a stream limited by per-byte
work does; k flows out of one NIC get min(r, B / k) each. (fq's pacing instead spaces packets after the
first, so a one-packet message would pass at the NIC's rate.) A flow is (src ip, dst ip, protocol, src
port, dst port) from the IPv4 header and the TCP/UDP header; each direction of a connection is its own.

A TCP packet without payload (a pure ACK, no SYN/FIN/RST) is not held: in a kernel the per-flow queue
is kept to about two packets by TCP small queues (net/ipv4/tcp_output.c tcp_small_queue_check), so an ACK
waits for little; in the forwarder the queue is invisible to TCP and holds up to a window of data, behind
which the reverse direction's ACKs would wait (the bidirectional unfairness MEASUREMENTS.md shows for the
forwarder's own NIC queue). Passing queued data is harmless to TCP: the data segments carry older,
already-known acknowledgements.
"""

from __future__ import annotations

import struct

TCP, UDP = 6, 17
_NOT_PURE_ACK = 0x07  # FIN | SYN | RST: they occupy sequence space or end the flow; keep them in order


def flow_key(pkt: bytes) -> tuple[bytes, int, int] | None:
    """(src+dst address bytes, protocol, ports as one int) of an IPv4 packet; None when not IPv4.
    Ports are 0 for other protocols and for fragments after the first (no transport header there)."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4:
        return None
    ihl = (pkt[0] & 0x0F) * 4
    proto = pkt[9]
    ports = 0
    first_fragment = (struct.unpack_from("!H", pkt, 6)[0] & 0x1FFF) == 0
    if proto in (TCP, UDP) and first_fragment and len(pkt) >= ihl + 4:
        ports = struct.unpack_from("!I", pkt, ihl)[0]
    return pkt[12:20], proto, ports


def is_pure_ack(pkt: bytes) -> bool:
    """A TCP segment with no payload and none of SYN/FIN/RST (IPv4 total length - IP header - TCP header)."""
    if len(pkt) < 20 or pkt[9] != TCP:
        return False
    ihl = (pkt[0] & 0x0F) * 4
    if len(pkt) < ihl + 14:
        return False
    doff = (pkt[ihl + 12] >> 4) * 4
    total = struct.unpack_from("!H", pkt, 2)[0]
    return total - ihl - doff == 0 and not pkt[ihl + 13] & _NOT_PURE_ACK


class FlowPacer:
    """Per-flow serialiser state; `eligible_at` returns when a packet may enter its sender's NIC (seconds).
    nic_Bps: the NIC's rate the forwarder serialises at next (None: it does not, the packet goes at `done`)."""

    def __init__(self, rate_Bps: float, nic_Bps: float | None = None):
        if not rate_Bps > 0:
            raise ValueError("rate_Bps must be positive")
        if nic_Bps is not None and not nic_Bps > 0:
            raise ValueError("nic_Bps must be positive or None")
        self.rate_Bps = rate_Bps
        self.nic_Bps = nic_Bps
        self.done_s: dict[tuple, float] = {}  # flow -> when it has produced its latest packet

    def eligible_at(self, pkt: bytes, now: float) -> float:
        key = flow_key(pkt)
        if key is None or is_pure_ack(pkt):
            return now
        done = max(now, self.done_s.get(key, now)) + len(pkt) / self.rate_Bps
        self.done_s[key] = done
        return max(now, done - (len(pkt) / self.nic_Bps if self.nic_Bps else 0.0))

    def forget_idle(self, now: float) -> None:
        """Drop flows that are idle (their next packet would start at once): bounded memory."""
        self.done_s = {k: t for k, t in self.done_s.items() if t > now}

"""What one emulated node's NIC carried: the kernel's interface counters and TCP's retransmissions.

Why the kernel's counters: they count every IP packet the node handed to (tx) or took from (rx) its
inter-node interface, whatever library sent it, so the bytes a training puts on the wire are measured,
not inferred from the library's code. Ranks of one node reach each other over loopback, so tun0 carries
only inter-node traffic. Read from /proc/self/net/dev and /proc/self/net/snmp, which show the network
namespace of the reading process (an emulated node's), with no root and no `ip` call. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NET_DEV = Path("/proc/self/net/dev")
NET_SNMP = Path("/proc/self/net/snmp")


class CounterError(RuntimeError):
    """The interface or the counter is not where the kernel should show it."""


@dataclass(frozen=True)
class WireCounters:
    """Cumulative counters of one interface plus the namespace's TCP retransmitted segments."""

    tx_bytes: int
    rx_bytes: int
    tx_packets: int
    rx_packets: int
    tcp_retransmitted_segments: int

    def since(self, earlier: WireCounters) -> WireCounters:
        """The traffic between two readings (each counter's difference)."""
        return WireCounters(*(a - b for a, b in zip(self.as_tuple(), earlier.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[int, ...]:
        return (
            self.tx_bytes,
            self.rx_bytes,
            self.tx_packets,
            self.rx_packets,
            self.tcp_retransmitted_segments,
        )


def parse_net_dev(text: str, ifname: str) -> tuple[int, int, int, int]:
    """(tx_bytes, rx_bytes, tx_packets, rx_packets) of `ifname` from /proc/net/dev's text.

    Layout (linux net/core/net-procfs.c): two header lines, then `name: rx_bytes rx_packets errs drop fifo
    frame compressed multicast tx_bytes tx_packets ...`."""
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        if sep and name.strip() == ifname:
            fields = rest.split()
            if len(fields) < 10:
                raise CounterError(f"/proc/net/dev line of {ifname} has {len(fields)} fields, expected 16")
            rx_bytes, rx_packets, tx_bytes, tx_packets = (int(fields[i]) for i in (0, 1, 8, 9))
            return tx_bytes, rx_bytes, tx_packets, rx_packets
    raise CounterError(f"no interface {ifname!r} in this network namespace")


def parse_retransmitted_segments(text: str) -> int:
    """TCP's RetransSegs from /proc/net/snmp's text (a `Tcp:` header line, then its `Tcp:` values line)."""
    rows = [line.split()[1:] for line in text.splitlines() if line.startswith("Tcp:")]
    if len(rows) < 2 or "RetransSegs" not in rows[0]:
        raise CounterError("no TCP RetransSegs counter in /proc/net/snmp")
    return int(rows[1][rows[0].index("RetransSegs")])


def read_counters(ifname: str) -> WireCounters:
    """This network namespace's counters of `ifname`, now."""
    tx_bytes, rx_bytes, tx_packets, rx_packets = parse_net_dev(NET_DEV.read_text(), ifname)
    return WireCounters(
        tx_bytes, rx_bytes, tx_packets, rx_packets, parse_retransmitted_segments(NET_SNMP.read_text())
    )

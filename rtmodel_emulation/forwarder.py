"""User-space "switch" between the emulated nodes: delays (and optionally rate-limits) every packet.

Why user space: this kernel has no netem, but TUN works. One process enters each node's namespace
(setns), attaches to the node's TUN device `tun0` (IFF_TUN|IFF_NO_PI) and returns to its own namespace;
the node's only route to other nodes points at tun0, so every inter-node IP packet is read here, routed by
destination IP to the destination node's TUN and written there at the time LinkModel gives (serialisation
on the sender's and receiver's NIC, then the one-way delay; with a per-flow cap each flow is first
serialised at that rate, rtmodel_emulation.flows). Unknown destinations are dropped: nothing can
leave the emulated network. Large MTU (~64 KB) keeps the packet rate, and so the CPU cost, low.

Run by EmulatedCluster as `python -m rtmodel_emulation.forwarder <config.json>`; prints `ready` once attached.
"""

from __future__ import annotations

import ctypes
import fcntl
import heapq
import json
import os
import select
import signal
import socket
import struct
import sys
import time

from rtmodel_emulation.flows import FlowPacer
from rtmodel_emulation.linkmodel import LinkModel
from rtmodel_util.files import write_json_atomic
from rtmodel_util.process_control import set_parent_death_signal

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PR_SET_TIMERSLACK = 29
MAX_QUEUED_BYTES = 256 * 2**20  # a safety cap, not a switch buffer: the emulated fabric is lossless
EARLY_S = 20e-6  # release this early rather than pay another select() wake-up


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def attach_tuns(namespaces: list[str], ifname: str = "tun0") -> list[int]:
    """Open `ifname` inside each named namespace; the fds keep working after we return to our namespace."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fds = []
    try:
        for ns in namespaces:
            nsfd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
            try:
                _setns(nsfd)
                fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
                fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", ifname.encode(), IFF_TUN | IFF_NO_PI))
                fds.append(fd)
            finally:
                os.close(nsfd)
    finally:
        _setns(home)
        os.close(home)
    return fds


def _tune_process(owner_pid: int, realtime: bool) -> str:
    """Die with the owner; wake up promptly (real-time priority if allowed) so delays stay accurate."""
    if not set_parent_death_signal(signal.SIGTERM, expected_parent=owner_pid):
        sys.exit("owner exited before the forwarder started")
    _libc.prctl(PR_SET_TIMERSLACK, 1)
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(20))
            return "SCHED_FIFO"
        except (OSError, AttributeError):
            pass
    try:
        os.nice(-10)
        return "nice-10"
    except OSError:
        return "normal"


class Stats:
    """Counters plus release lateness (actual - scheduled write time), dumped as JSON for the owner."""

    def __init__(self, path: str | None, policy: str):
        self.path = path
        self.policy = policy
        self.packets = self.bytes = self.dropped = 0
        self.late_max_s = self.late_sum_s = 0.0
        self.late_over_100us = 0
        self.max_queued_bytes = 0
        self._last_dump = 0.0

    def released(self, late_s: float) -> None:
        self.late_sum_s += late_s
        if late_s > self.late_max_s:
            self.late_max_s = late_s
        if late_s > 100e-6:
            self.late_over_100us += 1

    def dump(self, now: float, force: bool = False) -> None:
        if self.path is None or (not force and now - self._last_dump < 1.0):
            return
        self._last_dump = now
        doc = {"packets": self.packets, "bytes": self.bytes, "dropped": self.dropped,
               "late_mean_s": self.late_sum_s / max(1, self.packets), "late_max_s": self.late_max_s,
               "late_over_100us": self.late_over_100us, "max_queued_bytes": self.max_queued_bytes,
               "scheduling": self.policy}
        write_json_atomic(self.path, doc, indent=None, durable=False)


def serve(fds: list[int], addrs: list[str], model: LinkModel, stats: Stats,
          pacer: FlowPacer | None = None) -> None:
    """Forward until SIGTERM/SIGINT. Order is kept per (src, dst) pair: release times are FIFO per pair;
    with a per-flow cap, per flow (a pure ACK may pass its flow's queued data, rtmodel_emulation.flows).

    With `pacer`, a packet first waits in `paced` until its flow has produced it (rtmodel_emulation.flows), and
    only then is it given to the link model, in the order of those times: the NICs serve packets in
    the order they become eligible, so a held-back flow does not hold up the others. A packet read later
    is eligible no earlier than it was read, so every packet eligible by `now` can be handed on."""
    node_of = {socket.inet_aton(a): i for i, a in enumerate(addrs)}
    fd_node = {fd: i for i, fd in enumerate(fds)}
    heap: list[tuple[float, int, int, bytes]] = []
    paced: list[tuple[float, int, int, int, bytes]] = []  # (eligible, seq, src, dst, packet)
    seq = queued = 0
    clock = time.monotonic
    forgotten_at = clock()
    while True:
        timeout = 1.0  # wake up now and then so the stats file stays fresh
        if heap:
            timeout = max(0.0, heap[0][0] - clock() - EARLY_S)
        if paced:
            timeout = min(timeout, max(0.0, paced[0][0] - clock()))
        ready, _, _ = select.select(fds, [], [], timeout)
        now = clock()
        for fd in ready:
            src = fd_node[fd]
            for _ in range(256):
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                dst = node_of.get(pkt[16:20]) if len(pkt) >= 20 and pkt[0] >> 4 == 4 else None
                if dst is None or dst == src or queued + len(pkt) > MAX_QUEUED_BYTES:
                    stats.dropped += 1
                    continue
                if pacer is None:
                    heapq.heappush(heap, (model.deliver_at(src, dst, len(pkt), now), seq, dst, pkt))
                else:
                    heapq.heappush(paced, (pacer.eligible_at(pkt, now), seq, src, dst, pkt))
                seq += 1
                queued += len(pkt)
            stats.max_queued_bytes = max(stats.max_queued_bytes, queued)
        if paced:
            now = clock()
            while paced and paced[0][0] <= now:
                eligible, order, src, dst, pkt = heapq.heappop(paced)
                heapq.heappush(heap, (model.deliver_at(src, dst, len(pkt), eligible), order, dst, pkt))
        now = clock()
        while heap and heap[0][0] <= now + EARLY_S:
            due, _, dst, pkt = heapq.heappop(heap)
            try:
                os.write(fds[dst], pkt)
            except OSError:
                stats.dropped += 1
            queued -= len(pkt)
            stats.packets += 1
            stats.bytes += len(pkt)
            stats.released(max(0.0, now - due))
        stats.dump(now)
        if pacer is not None and now - forgotten_at > 1.0:
            pacer.forget_idle(now)
            forgotten_at = now


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as fh:
        cfg = json.load(fh)
    policy = _tune_process(cfg["owner_pid"], cfg.get("realtime", True))
    fds = attach_tuns(cfg["namespaces"], cfg.get("ifname", "tun0"))
    rate = cfg.get("rate_Bps")
    model = LinkModel(len(fds), rate, cfg["delay_s"])
    flow_rate = cfg.get("flow_rate_Bps")
    pacer = FlowPacer(flow_rate, rate) if flow_rate is not None else None
    stats = Stats(cfg.get("stats_path"), policy)

    def _stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print("ready", flush=True)
    try:
        serve(fds, cfg["addresses"], model, stats, pacer)
    finally:
        stats.dump(time.monotonic(), force=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

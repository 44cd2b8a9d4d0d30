"""Checks that the emulated network does what it was configured to do: ICMP ping RTT and TCP throughput.

Two halves: functions run INSIDE a node (`python -m rtmodel_emulation.probe ping|sink|send ...`, printing JSON),
and helpers run outside that start them on the right nodes of an EmulatedCluster. No ping binary needed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import time

from rtmodel_emulation.errors import EmulationError


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def ping(host: str, count: int = 10, interval_s: float = 0.02, timeout_s: float = 2.0) -> list[float]:
    """ICMP echo RTTs in seconds (raw socket, needs root); a lost echo raises."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sock.settimeout(timeout_s)
    ident = os.getpid() & 0xFFFF
    rtts = []
    for seq in range(count):
        payload = b"rtmemu-probe".ljust(56, b"\0")
        header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        packet = struct.pack("!BBHHH", 8, 0, _checksum(header + payload), ident, seq) + payload
        t0 = time.perf_counter()
        sock.sendto(packet, (host, 0))
        while True:
            data = sock.recv(2048)
            ihl = (data[0] & 0x0F) * 4
            typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if typ == 0 and rid == ident and rseq == seq:
                rtts.append(time.perf_counter() - t0)
                break
        time.sleep(interval_s)
    sock.close()
    return rtts


def sink(port: int, nbytes: int) -> dict:
    """Accept one connection, read nbytes, answer one byte (so the sender's clock covers delivery)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    print("listening", flush=True)
    conn, _ = srv.accept()
    got, buf = 0, bytearray(1 << 20)
    view = memoryview(buf)
    while got < nbytes:
        n = conn.recv_into(view)
        if n == 0:
            raise EmulationError(f"sender closed after {got} of {nbytes} bytes")
        got += n
    conn.sendall(b"k")
    conn.close()
    srv.close()
    return {"received_bytes": got}


def send(host: str, port: int, nbytes: int, start_at: float | None = None) -> dict:
    """Send nbytes and wait for the sink's 1-byte reply: elapsed = nbytes/B + about one RTT.
    start_at (time.time() epoch) lines up concurrent senders whose processes start at different times."""
    conn = socket.create_connection((host, port), timeout=60)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    chunk = b"\0" * (1 << 20)
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    t0 = time.perf_counter()
    left = nbytes
    while left > 0:
        conn.sendall(chunk[:min(left, len(chunk))])
        left -= min(left, len(chunk))
    if conn.recv(1) != b"k":
        raise EmulationError("sink did not acknowledge")
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"bytes": nbytes, "elapsed_s": elapsed}


# ---- helpers run outside the nodes ------------------------------------------------------------------------
def _json_from(proc: subprocess.Popen, what: str, timeout_s: float) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise EmulationError(f"{what} timed out after {timeout_s:.0f}s: {err.strip()[-500:]}") from None
    if proc.returncode != 0:
        raise EmulationError(f"{what} failed: {err.strip()[-500:]}")
    return json.loads(out.strip().splitlines()[-1])


def measure_rtt(cluster, src: int, dst: int, count: int = 10) -> list[float]:
    """Ping RTTs (s) from node src to node dst."""
    proc = cluster.run_on_node(src, [cluster.python, "-P", "-m", "rtmodel_emulation.probe", "ping", cluster.node_ip(dst),
                                     "--count", str(count)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    return _json_from(proc, "ping", 30)["rtts_s"]


def measure_throughput(cluster, src: int, dst: int, nbytes: int = 8 << 20, port: int = 5201) -> dict:
    """TCP transfer src -> dst; returns bytes, elapsed_s and rate_Bps (after subtracting one ping RTT)."""
    rx = cluster.run_on_node(dst, [cluster.python, "-P", "-m", "rtmodel_emulation.probe", "sink", "--port", str(port),
                                   "--bytes", str(nbytes)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    if rx.stdout.readline().strip() != "listening":
        raise EmulationError(f"sink failed to start: {rx.stderr.read().strip()[-500:]}")
    tx = cluster.run_on_node(src, [cluster.python, "-P", "-m", "rtmodel_emulation.probe", "send", cluster.node_ip(dst),
                                   "--port", str(port), "--bytes", str(nbytes)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    res = _json_from(tx, "send", 120)
    _json_from(rx, "sink", 10)
    rtt = 2 * cluster.inter_delay_ms / 1e3
    res["rate_Bps"] = nbytes / max(1e-9, res["elapsed_s"] - rtt)
    return res


def measure_concurrent(cluster, pairs: list[tuple[int, int]], nbytes: int = 4 << 20,
                       base_port: int = 5300) -> list[float]:
    """Run one TCP transfer per (src, dst) pair at the same time; returns each flow's rate (Bytes/s).
    Shows NIC sharing (two flows out of one node) and bidirectional traffic (0->1 with 1->0)."""
    sinks = []
    for k, (_, dst) in enumerate(pairs):
        proc = cluster.run_on_node(dst, [cluster.python, "-P", "-m", "rtmodel_emulation.probe", "sink", "--port",
                                         str(base_port + k), "--bytes", str(nbytes)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() != "listening":
            raise EmulationError(f"sink failed to start: {proc.stderr.read().strip()[-500:]}")
        sinks.append(proc)
    start_at = time.time() + 1.0 + 0.1 * len(pairs)  # after every sender's interpreter is up
    senders = [cluster.run_on_node(src, [cluster.python, "-P", "-m", "rtmodel_emulation.probe", "send", cluster.node_ip(dst),
                                         "--port", str(base_port + k), "--bytes", str(nbytes),
                                         "--start-at", repr(start_at)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for k, (src, dst) in enumerate(pairs)]
    results = [_json_from(tx, "send", 120) for tx in senders]
    for rx in sinks:
        _json_from(rx, "sink", 10)
    rtt = 2 * cluster.inter_delay_ms / 1e3
    return [nbytes / max(1e-9, r["elapsed_s"] - rtt) for r in results]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rtmodel_emulation.probe", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ping")
    p.add_argument("host")
    p.add_argument("--count", type=int, default=10)
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--bytes", type=int, required=True)
    t = sub.add_parser("send")
    t.add_argument("host")
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--bytes", type=int, required=True)
    t.add_argument("--start-at", type=float, default=None, help="epoch seconds to start sending at")
    args = ap.parse_args(argv)
    if args.cmd == "ping":
        out = {"rtts_s": ping(args.host, args.count)}
    elif args.cmd == "sink":
        out = sink(args.port, args.bytes)
    else:
        out = send(args.host, args.port, args.bytes, args.start_at)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

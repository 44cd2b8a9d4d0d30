"""Accuracy check of the emulation: gloo all_reduce on the emulated network vs the ring model.

    model(p, S) = 2(p-1) * RTT + 2(p-1)/p * S / B        RTT = 2 x configured one-way delay

Also reports ping RTT, a TCP throughput probe and what the forwarder costs in CPU. Used by
`rtmodel emulate measure`; the numbers in MEASUREMENTS.md come from it.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from rtmodel_emulation.cluster import EmulatedCluster
from rtmodel_emulation.errors import EmulationError
from rtmodel_emulation.probe import measure_concurrent, measure_rtt, measure_throughput

DEFAULT_SIZES = (4096, 1 << 20, 16 << 20)
DEFAULT_SETTINGS = ((100.0, 1.0), (1000.0, 0.2))


def ring_model_s(p: int, nbytes: float, rtt_s: float, rate_Bps: float) -> float:
    return 2 * (p - 1) * rtt_s + 2 * (p - 1) / p * nbytes / rate_Bps


@dataclass
class SettingResult:
    bandwidth_mbit: float
    delay_ms: float
    shaping: str
    mtu: int
    ranks: int
    ping_rtt_ms: float
    probe_mbit: float
    allreduce: list[dict]  # bytes, measured_s, model_s
    forwarder_cpu_s: float
    bench_wall_s: float
    forwarded_bytes: int
    forwarder_late_max_ms: float
    shared_nic_mbit: list[float]  # two flows node0 -> node1 at once (each should get B/2)
    bidirectional_mbit: list[float]  # node0 -> node1 and node1 -> node0 at once (each should get B)


def allreduce_on(cluster: EmulatedCluster, sizes, repeats: int = 5,
                 timeout_s: float = 300.0) -> tuple[list[dict], float]:
    """Run rtmodel_emulation.allreduce_bench over all ranks; returns (rank-0 results, wall seconds)."""
    args = ["-m", "rtmodel_emulation.allreduce_bench", "--sizes", ",".join(str(s) for s in sizes),
            "--repeats", str(repeats)]
    if cluster.ranks_per_node == 1:
        world = cluster.nodes
        cmds = [cluster.exec_prefix(n, {"RANK": str(n), "LOCAL_RANK": "0", "WORLD_SIZE": str(world),
                                        "MASTER_ADDR": cluster.node_ip(0), "MASTER_PORT": "29500"})
                + [cluster.python, *args] for n in range(cluster.nodes)]
        res = cluster.launch(cmds, timeout_s)
    else:
        res = cluster.launch_torchrun(args, timeout_s)
    for line in res.stdout[0].splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])["results"], res.elapsed_s
    raise EmulationError(f"no RESULT line from node0; stdout tail: {res.stdout[0][-500:]}")


def measure_setting(bandwidth_mbit: float, delay_ms: float, shaping: str = "tbf+forwarder", nodes: int = 2,
                    ranks_per_node: int = 1, sizes=DEFAULT_SIZES, mtu: int = 65520) -> SettingResult:
    with EmulatedCluster(nodes, ranks_per_node, bandwidth_mbit, delay_ms, shaping=shaping, mtu=mtu) as c:
        rtt = statistics.median(measure_rtt(c, 0, 1, count=20))
        nbytes = max(4 << 20, int(bandwidth_mbit * 1e6 / 8 * 0.5))
        probe = measure_throughput(c, 0, 1, nbytes=nbytes)
        shared = measure_concurrent(c, [(0, 1), (0, 1)], nbytes // 2)
        bidir = measure_concurrent(c, [(0, 1), (1, 0)], nbytes)
        cpu0, bytes0 = c.forwarder_cpu_s(), (c.forwarder_stats() or {}).get("bytes", 0)
        results, wall = allreduce_on(c, sizes)
        cpu1 = c.forwarder_cpu_s()
    stats = c.last_forwarder_stats or {}
    p = nodes * ranks_per_node
    rate = bandwidth_mbit * 1e6 / 8
    rows = [{"bytes": r["bytes"], "measured_s": r["median_s"], "correct": r["correct"],
             "model_s": ring_model_s(p, r["bytes"], 2 * delay_ms / 1e3, rate)} for r in results]
    return SettingResult(bandwidth_mbit, delay_ms, shaping, mtu, p, rtt * 1e3, probe["rate_Bps"] * 8 / 1e6, rows,
                         cpu1 - cpu0, wall, stats.get("bytes", 0) - bytes0, stats.get("late_max_s", 0.0) * 1e3,
                         [r * 8 / 1e6 for r in shared], [r * 8 / 1e6 for r in bidir])


def measure_floor(ranks: int = 2, sizes=DEFAULT_SIZES) -> dict[int, float]:
    """All-reduce time with all ranks in ONE namespace (loopback only): the software floor of gloo and
    this machine, which the network model does not contain. Returned as {bytes: seconds}."""
    with EmulatedCluster(1, ranks, 1000.0, 0.0) as c:
        results, _ = allreduce_on(c, sizes)
    return {r["bytes"]: r["median_s"] for r in results}


def _fmt_bytes(n: int) -> str:
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"


def markdown(results: list[SettingResult], floor: dict[int, float] | None = None) -> str:
    """Two tables: all_reduce vs model (and minus the loopback floor when given), forwarder cost."""
    floor = floor or {}
    lines = ["| link | shaping | ping RTT ms (2×delay) | TCP probe Mbit/s | size | all_reduce ms | model ms | "
             "measured/model | loopback floor ms | (measured−floor)/model |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in results:
        for r in s.allreduce:
            f = floor.get(r["bytes"])
            extra = (f"{f * 1e3:.2f} | {(r['measured_s'] - f) / r['model_s']:.3f}" if f is not None else "– | –")
            lines.append(f"| {s.bandwidth_mbit:g} Mbit, {s.delay_ms:g} ms | {s.shaping}, MTU {s.mtu} | {s.ping_rtt_ms:.2f} "
                         f"({2 * s.delay_ms:g}) | {s.probe_mbit:.1f} | {_fmt_bytes(r['bytes'])} | "
                         f"{r['measured_s'] * 1e3:.2f} | {r['model_s'] * 1e3:.2f} | "
                         f"{r['measured_s'] / r['model_s']:.3f} | {extra} |")
    lines += ["", "| link | shaping | 2 flows out of one NIC, Mbit/s each (B/2) | bidirectional, Mbit/s each (B) |",
              "|---|---|---|---|"]
    for s in results:
        lines.append(f"| {s.bandwidth_mbit:g} Mbit, {s.delay_ms:g} ms | {s.shaping}, MTU {s.mtu} | "
                     f"{' / '.join(f'{x:.1f}' for x in s.shared_nic_mbit)} | "
                     f"{' / '.join(f'{x:.1f}' for x in s.bidirectional_mbit)} |")
    lines += ["", "| link | shaping | forwarder CPU s | bench wall s | CPU % of one core | CPU ms per forwarded MB "
              "| max release lateness ms |", "|---|---|---|---|---|---|---|"]
    for s in results:
        mb = max(1e-9, s.forwarded_bytes / 2**20)
        lines.append(f"| {s.bandwidth_mbit:g} Mbit, {s.delay_ms:g} ms | {s.shaping}, MTU {s.mtu} | {s.forwarder_cpu_s:.2f} | "
                     f"{s.bench_wall_s:.1f} | {100 * s.forwarder_cpu_s / s.bench_wall_s:.1f} | "
                     f"{1e3 * s.forwarder_cpu_s / mb:.3f} | {s.forwarder_late_max_ms:.2f} |")
    return "\n".join(lines)

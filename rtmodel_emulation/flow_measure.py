"""Measure what a per-flow cap does on the emulated network, before anything is modelled.

    sudo python -m rtmodel_emulation.flow_measure [--nic-mbit 1000] [--flow-mbit 300] [--delay-ms 0.5]

(a) TCP: one flow node0 -> node1 alone, then k concurrent flows between the same nodes, and one flow
    each way; expected each: min(NIC / k, cap).
(b) gloo all_reduce (DDP's ring) over 2 nodes x 1 and 2 nodes x 2 ranks; each node's NIC carries one
    ring flow each way, so expected the ring model at bandwidth min(NIC, cap):
    2(p-1) RTT + 2(p-1)/p S / min(NIC, cap).
(c) concurrent process groups exchanging at once (Decent-DP's rounds): q flows leave each NIC, so
    expected 2 RTT + S / min(NIC / q, cap) for each group's 2-rank all_reduce.
Prints the Markdown tables of MEASUREMENTS.md "Per-flow cap" and the raw numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from rtmodel_emulation.cluster import EmulatedCluster
from rtmodel_emulation.groups_bench import parse_groups
from rtmodel_emulation.measure import allreduce_on, ring_model_s
from rtmodel_emulation.probe import measure_concurrent, measure_throughput

MBIT_Bps = 1e6 / 8


def expected_flow_Bps(nic_mbit: float, cap_mbit: float | None, flows: int) -> float:
    """What each of `flows` flows out of one NIC gets: min(NIC / flows, cap)."""
    per = nic_mbit / flows
    return (per if cap_mbit is None else min(per, cap_mbit)) * MBIT_Bps


def tcp_rows(c: EmulatedCluster, cap_mbit: float | None, seconds: float = 1.0) -> list[dict]:
    rows = []
    nbytes = int(expected_flow_Bps(c.inter_bandwidth_mbit, cap_mbit, 1) * seconds)
    alone = measure_throughput(c, 0, 1, nbytes=nbytes)["rate_Bps"]
    rows.append({"case": "1 flow alone", "flows": 1, "measured_mbit": [alone / MBIT_Bps]})
    for k in (2, 3, 4):
        each = int(expected_flow_Bps(c.inter_bandwidth_mbit, cap_mbit, k) * seconds)
        rates = measure_concurrent(c, [(0, 1)] * k, each)
        rows.append(
            {"case": f"{k} flows node0 -> node1", "flows": k, "measured_mbit": [r / MBIT_Bps for r in rates]}
        )
    rates = measure_concurrent(c, [(0, 1), (1, 0)], nbytes)
    rows.append({"case": "1 flow each way", "flows": 1, "measured_mbit": [r / MBIT_Bps for r in rates]})
    for r in rows:
        r["expected_mbit"] = expected_flow_Bps(c.inter_bandwidth_mbit, cap_mbit, r["flows"]) / MBIT_Bps
    return rows


def allreduce_rows(c: EmulatedCluster, cap_mbit: float | None, sizes: tuple[int, ...]) -> list[dict]:
    results, _ = allreduce_on(c, sizes, repeats=5)
    p = c.nodes * c.ranks_per_node
    bw = expected_flow_Bps(c.inter_bandwidth_mbit, cap_mbit, 1)
    rtt = 2 * c.inter_delay_ms / 1e3
    return [
        {
            "case": f"all_reduce {c.nodes}x{c.ranks_per_node}",
            "bytes": r["bytes"],
            "measured_ms": r["median_s"] * 1e3,
            "expected_ms": ring_model_s(p, r["bytes"], rtt, bw) * 1e3,
            "correct": r["correct"],
        }
        for r in results
    ]


def groups_rows(
    c: EmulatedCluster,
    cap_mbit: float | None,
    cases: list[tuple[str, str, int]],
    nbytes: int,
    timeout_s: float = 300.0,
) -> list[dict]:
    """cases: (label, --groups, q flows per NIC); every group is a 2-rank group spanning the 2 nodes."""
    rows = []
    rtt = 2 * c.inter_delay_ms / 1e3
    for port, (label, groups, q) in enumerate(cases, start=29700):
        args = [
            "-m",
            "rtmodel_emulation.groups_bench",
            "--groups",
            groups,
            "--bytes",
            str(nbytes),
            "--repeats",
            "5",
            "--iters",
            "2",
        ]
        if c.ranks_per_node == 1:
            cmds = [
                c.exec_prefix(
                    n,
                    {
                        "RANK": str(n),
                        "LOCAL_RANK": "0",
                        "WORLD_SIZE": str(c.nodes),
                        "MASTER_ADDR": c.node_ip(0),
                        "MASTER_PORT": str(port),
                    },
                )
                + [c.python, *args]
                for n in range(c.nodes)
            ]
            res = c.launch(cmds, timeout_s)
        else:
            res = c.launch_torchrun(args, timeout_s, master_port=port)
        per_rank = [
            json.loads(line[len("RESULT ") :])
            for out in res.stdout
            for line in out.splitlines()
            if line.startswith("RESULT ")
        ]
        times = [r["median_s"] for r in per_rank if r["median_s"] is not None]
        n_groups = len(parse_groups(groups))
        expected = 2 * rtt + nbytes / expected_flow_Bps(c.inter_bandwidth_mbit, cap_mbit, q)
        rows.append(
            {
                "case": f"{label} ({c.nodes}x{c.ranks_per_node}, {n_groups} groups)",
                "flows": q,
                "bytes": nbytes,
                "measured_ms": statistics.median(times) * 1e3,
                "measured_range_ms": [min(times) * 1e3, max(times) * 1e3],
                "expected_ms": expected * 1e3,
            }
        )
    return rows


def measure(
    nic_mbit: float, cap_mbit: float | None, delay_ms: float, sizes: tuple[int, ...], group_bytes: int
) -> dict:
    out: dict = {"nic_mbit": nic_mbit, "flow_mbit": cap_mbit, "delay_ms": delay_ms, "started": time.ctime()}
    with EmulatedCluster(2, 1, nic_mbit, delay_ms, flow_mbit=cap_mbit) as c:
        out["tcp"] = tcp_rows(c, cap_mbit)
        out["allreduce"] = allreduce_rows(c, cap_mbit, sizes)
        out["groups"] = groups_rows(
            c,
            cap_mbit,
            [
                ("1 group", "0-1", 1),
                ("2 groups, same pair", "0-1,0-1", 2),
                ("4 groups, same pair", "0-1,0-1,0-1,0-1", 4),
            ],
            group_bytes,
        )
        out["forwarder"] = c.forwarder_stats()
    with EmulatedCluster(2, 2, nic_mbit, delay_ms, flow_mbit=cap_mbit) as c:
        out["allreduce"] += allreduce_rows(c, cap_mbit, sizes)
        out["groups"] += groups_rows(
            c,
            cap_mbit,
            [("pair-inter, 1 group alone", "0-2", 1), ("pair-inter, both groups", "0-2,1-3", 2)],
            group_bytes,
        )
        out["forwarder_2x2"] = c.forwarder_stats()
    return out


def markdown(res: dict) -> str:
    head = f"NIC {res['nic_mbit']:g} Mbit/s, per-flow cap {res['flow_mbit']} Mbit/s, {res['delay_ms']:g} ms one-way"
    lines = [
        head,
        "",
        "| TCP case | Mbit/s each, measured | expected min(NIC/k, cap) | measured/expected (mean) |",
        "|---|---|---|---|",
    ]
    for r in res["tcp"]:
        m = r["measured_mbit"]
        lines.append(
            f"| {r['case']} | {' / '.join(f'{x:.0f}' for x in m)} | {r['expected_mbit']:.0f} | "
            f"{statistics.mean(m) / r['expected_mbit']:.3f} |"
        )
    lines += [
        "",
        "| gloo case | size | measured ms | expected ms | measured/expected |",
        "|---|---|---|---|---|",
    ]
    for r in res["allreduce"] + res["groups"]:
        lines.append(
            f"| {r['case']} | {r['bytes'] / 2**20:g} MiB | {r['measured_ms']:.1f} | {r['expected_ms']:.1f} | "
            f"{r['measured_ms'] / r['expected_ms']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rtmodel_emulation.flow_measure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--nic-mbit", type=float, default=1000.0)
    ap.add_argument("--flow-mbit", type=float, default=300.0, help="the per-flow cap; 0: none")
    ap.add_argument("--delay-ms", type=float, default=0.5)
    ap.add_argument("--sizes", default=f"{1 << 20},{16 << 20}")
    ap.add_argument("--group-bytes", type=int, default=8 << 20)
    ap.add_argument("--json", default=None, help="also write the raw numbers here")
    args = ap.parse_args(argv)
    res = measure(
        args.nic_mbit,
        args.flow_mbit or None,
        args.delay_ms,
        tuple(int(s) for s in args.sizes.split(",")),
        args.group_bytes,
    )
    print(markdown(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

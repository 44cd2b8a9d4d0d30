"""Bytes on the wire: what each emulated node's NIC carried per iteration for DDP and every Decent-DP
topology (gloo), next to the model's `nic_bytes_per_iteration` (runtime_model.prediction.link_bytes).

Why: a time can be right for the wrong reason; bytes settle whether the model charges a NIC what the
libraries really send. Each cluster (nodes x ranks per node) runs `benchmarks.wire_bytes_rank` under
torchrun in every namespace; each node's first rank reads the kernel's counters of its inter-node
interface (rtmodel_emulation.wire_counters) after every step of a whole number of gossip periods. Measured: tx
bytes per iteration (the slope of the cumulative count) of the busiest node (the model's figure is the busiest NIC's sends), every node's tx and rx,
and TCP retransmissions (which would inflate tx: none expected on the lossless forwarder).

    python -m benchmarks.wire_bytes                      # every cluster (needs root; ~4 min on 2 cores)
    python -m benchmarks.wire_bytes --clusters 2x2       # one cluster
    python -m benchmarks.wire_bytes --rescore            # the model again on the committed measurements

Results: benchmarks/results/wire-bytes.json (raw counters, host, versions, date) and wire-bytes.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_JSON = RESULTS_DIR / "wire-bytes.json"
RESULTS_MD = RESULTS_DIR / "wire-bytes.md"
CLUSTERS = ("2x1", "2x2", "4x1", "4x2", "2x4")
BANDWIDTH_MBIT, DELAY_MS = 1000.0, 0.1
# The cluster's default shaping, as the accuracy benchmark runs. Retransmitted segments are counted twice
# on the wire and are reported beside the bytes: none with 2 or 4 ranks, 25-86 per run with 8 ranks on 2
# cores (spurious timeouts while ranks wait for a core; the forwarder alone, lossless, gave as many).
SHAPING = "tbf+forwarder"
PARAM_MB, LAYERS = 4.0, 4
TOLERANCE = 0.02  # the bar: the model's bytes within 2 % of the measured ones


def parse_cluster(text: str) -> tuple[int, int]:
    """'NxK' -> (nodes, ranks per node)."""
    try:
        nodes, ranks = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"error: cluster {text!r} is not NODESxRANKS (e.g. 2x2)") from None
    if nodes < 2 or ranks < 1:
        raise SystemExit(f"error: cluster {text!r} needs at least 2 nodes and 1 rank per node")
    return nodes, ranks


def decent_dp_runs(gpus: int, gpus_per_node: int) -> list[str]:
    """Every topology Decent-DP runs on this shape (its built-ins and rtmodel's registered rounds)."""
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.topology.exchange import DECENT_DP
    from runtime_model.topology.registry import TopologyNotApplicable, build_schedule, topology_names

    runs = []
    for name in topology_names():
        try:
            schedule = build_schedule(name, ClusterShape(gpus, gpus_per_node))
        except TopologyNotApplicable:
            continue
        if schedule.static_graph is None and schedule.exchange is DECENT_DP and not schedule.decent_dp_note:
            runs.append(name)
    return runs


def model_nic_bytes(
    run: str, gpus: int, gpus_per_node: int, message_bytes: float, nics_per_node: int = 1
) -> float:
    """The model's bytes through the busiest NIC per iteration for DDP ("allreduce") or a topology."""
    from benchmarks.wire_bytes_rank import ALLREDUCE
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.prediction.link_bytes import allreduce_nic_bytes, gossip_nic_bytes
    from runtime_model.topology.registry import build_schedule

    shape = ClusterShape(gpus, gpus_per_node)
    if run == ALLREDUCE:
        return allreduce_nic_bytes(shape, nics_per_node, message_bytes)
    return gossip_nic_bytes(build_schedule(run, shape), shape, nics_per_node, message_bytes)


def measure_cluster(nodes: int, ranks: int, runs: list[str] | None = None, timeout_s: float = 900.0) -> dict:
    """Run DDP and each Decent-DP topology (default: every one that applies) once on an emulated cluster;
    the rank-0 RESULT document with the cluster's settings."""
    from benchmarks.wire_bytes_rank import ALLREDUCE
    from rtmodel_emulation.cluster import EmulatedCluster
    from rtmodel_emulation.errors import EmulationError

    runs = runs or [ALLREDUCE, *decent_dp_runs(nodes * ranks, ranks)]
    args = [
        "-m",
        "benchmarks.wire_bytes_rank",
        "--runs",
        ",".join(runs),
        "--param-mb",
        str(PARAM_MB),
        "--layers",
        str(LAYERS),
    ]
    with EmulatedCluster(nodes, ranks, BANDWIDTH_MBIT, DELAY_MS, shaping=SHAPING) as cluster:
        res = cluster.launch_torchrun(args, timeout_s)
    for line in res.stdout[0].splitlines():
        if line.startswith("RESULT "):
            return {
                "nodes": nodes,
                "ranks_per_node": ranks,
                "bandwidth_mbit": BANDWIDTH_MBIT,
                "delay_ms": DELAY_MS,
                "elapsed_s": round(res.elapsed_s, 1),
                **json.loads(line[len("RESULT ") :]),
            }
    raise EmulationError(f"no RESULT line from node0; stdout tail: {res.stdout[0][-500:]}")


def bytes_per_iteration(cumulative: list[int]) -> float:
    """Least-squares slope of the bytes counted since the window opened, one reading per iteration: each
    reading catches a gossip partly sent, and the slope lets that wobble move the rate far less than the
    difference of the first and last readings would (benchmarks/wire_bytes_rank.py)."""
    import numpy as np

    return float(np.polyfit(np.arange(len(cumulative)), np.asarray(cumulative, dtype=float), 1)[0])


def scored_rows(document: dict) -> list[dict]:
    """One row per (cluster, run): measured bytes per iteration (busiest node's tx, every node's tx and
    rx, retransmissions) beside the model's, and their ratio."""
    rows = []
    for cluster in document["clusters"]:
        gpus, k = cluster["world_size"], cluster["gpus_per_node"]
        for run in cluster["runs"]:
            tx = [bytes_per_iteration(n["counted"]["tx_bytes"]) for n in run["nodes"]]
            rx = [bytes_per_iteration(n["counted"]["rx_bytes"]) for n in run["nodes"]]
            model = model_nic_bytes(run["run"], gpus, k, run["message_bytes"])
            rows.append(
                {
                    "cluster": f"{cluster['nodes']}x{cluster['ranks_per_node']}",
                    "run": run["run"],
                    "period": run["period"],
                    "iterations": run["iterations"],
                    "message_bytes": run["message_bytes"],
                    "measured_tx_max": max(tx),
                    "measured_tx_per_node": tx,
                    "measured_rx_per_node": rx,
                    "retransmitted_segments": sum(
                        n["counted"]["tcp_retransmitted_segments"] for n in run["nodes"]
                    ),
                    "model_nic_bytes": model,
                    "model_over_measured": model / max(tx) if max(tx) else float("nan"),
                }
            )
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"Bytes on the wire per iteration, emulated cluster ({meta['bandwidth_mbit']:g} Mbit/s, "
        f"{meta['delay_ms']:g} ms, {meta['shaping']} shaping; synthetic {PARAM_MB:g} MiB fp32 in {LAYERS} layers; gloo; "
        f"{meta['date']}, {meta['host']}, torch {meta['torch']}, decent-dp {meta['decent_dp']}).",
        "",
        "| cluster | run | period | iterations | message MB | measured tx MB/it (busiest node) | "
        "tx MB/it per node | rx MB/it per node | retransmits | model MB/it | model / measured |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = " / ".join(f"{x / 1e6:.3f}" for x in r["measured_tx_per_node"])
        per_rx = " / ".join(f"{x / 1e6:.3f}" for x in r["measured_rx_per_node"])
        lines.append(
            f"| {r['cluster']} | {r['run']} | {r['period']} | {r['iterations']} | "
            f"{r['message_bytes'] / 1e6:.3f} | {r['measured_tx_max'] / 1e6:.3f} | {per} | {per_rx} | "
            f"{r['retransmitted_segments']} | {r['model_nic_bytes'] / 1e6:.3f} | {r['model_over_measured']:.4f} |"
        )
    worst = max(abs(r["model_over_measured"] - 1) for r in rows)
    lines += [
        "",
        f"{len(rows)} runs; largest |model / measured - 1|: {100 * worst:.2f} % "
        f"(bar: {100 * TOLERANCE:g} %).",
    ]
    return "\n".join(lines)


def host_meta() -> dict:
    import importlib.metadata as md

    return {
        "date": time.strftime("%Y-%m-%d"),
        "host": f"{platform.node()} ({platform.machine()}, "
        f"{__import__('os').cpu_count()} cores, Linux {platform.release()})",
        "python": platform.python_version(),
        "torch": md.version("torch"),
        "decent_dp": md.version("decent-dp"),
        "bandwidth_mbit": BANDWIDTH_MBIT,
        "delay_ms": DELAY_MS,
        "shaping": SHAPING,
        "param_mb": PARAM_MB,
        "layers": LAYERS,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.wire_bytes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--clusters", default=",".join(CLUSTERS), help="comma-separated NODESxRANKS")
    ap.add_argument(
        "--rescore", action="store_true", help="score the committed measurements again, run nothing"
    )
    ap.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = ap.parse_args(argv)
    if args.rescore:
        document = json.loads(RESULTS_JSON.read_text())
    else:
        document = {"meta": host_meta(), "clusters": []}
        for text in args.clusters.split(","):
            nodes, ranks = parse_cluster(text)
            print(f"[wire-bytes] {nodes}x{ranks} ...", file=sys.stderr, flush=True)
            document["clusters"].append(measure_cluster(nodes, ranks))
    rows = scored_rows(document)
    table = markdown(rows, document["meta"])
    print(table)
    if not args.rescore:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / RESULTS_JSON.name).write_text(json.dumps(document, indent=1) + "\n")
    (args.out_dir / RESULTS_MD.name).write_text(table + "\n")
    return 0 if all(abs(r["model_over_measured"] - 1) <= TOLERANCE for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

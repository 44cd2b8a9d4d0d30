"""Speed benchmark of the advisor (goals from the issue: advise <= 0.3 s, sweep <= 1 s, consensus <= 0.1 s).

    python -m benchmarks.speed      # prints a table and writes benchmarks/results/speed.json

Timings are medians of several runs on this machine; they are for the README, not for tests.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "speed.json"


def _median_time(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def advise_cli_s(repeats: int = 5) -> float:
    """Wall time of the whole `rtmodel advise --gpus 64` process (interpreter start and imports included)."""
    cmd = [sys.executable, "-m", "rtmodel_cli", "advise", "--gpus", "64", "--format", "json"]
    return _median_time(lambda: subprocess.run(cmd, check=True, capture_output=True), repeats)


def sweep_s(repeats: int = 3) -> tuple[float, int]:
    """advise() over n = 1, 2, 4, ..., 65,536 (8 GPUs per node) with every topology."""
    from runtime_model import presets
    from runtime_model.advisor import advise

    ns = [2**i for i in range(17)]
    scenarios = [presets.scenario_from_choice(presets.resolve(n, gpus_per_node=min(8, n))) for n in ns]

    def run():
        for sc in scenarios:
            advise(sc)

    return _median_time(run, repeats), len(ns)


def consensus_s(n: int = 65_536, k: int = 8) -> dict[str, float]:
    from runtime_model.consensus import consensus_metrics
    from runtime_model.scenario import ClusterShape
    from runtime_model.topologies import TopologyNotApplicable, build_schedule, topology_names

    shape = ClusterShape(n, k)
    out = {}
    for name in topology_names():
        try:
            sch = build_schedule(name, shape)
        except TopologyNotApplicable:
            continue
        out[name] = _median_time(lambda sch=sch: consensus_metrics(sch), 3)
    return out


def main() -> None:
    res = {"advise_cli_s": advise_cli_s()}
    res["sweep_s"], res["sweep_points"] = sweep_s()
    res["consensus_65536_s"] = consensus_s()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(f"rtmodel advise --gpus 64 (whole process): {res['advise_cli_s']:.3f} s (goal 0.3 s)")
    print(f"sweep n = 1..65,536 ({res['sweep_points']} sizes) x all topologies: {res['sweep_s']:.3f} s (goal 1 s)")
    for name, s in res["consensus_65536_s"].items():
        print(f"consensus metrics at n = 65,536, {name}: {s * 1e3:.1f} ms (goal 100 ms)")


if __name__ == "__main__":
    main()

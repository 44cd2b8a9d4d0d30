"""Speed benchmark of the advisor (goals from the issues: advise <= 0.3 s, sweep <= 1 s, consensus <= 0.1 s;
issue 14: `advise --gpus 1048576` <= 2x the wall time of `--gpus 64` and <= 300 MB, `--gpus 16777216`
answers, `plot speedup --gpus-range 8:65536` <= 1.3x the time of `--gpus-range 8:16`).

    python -m benchmarks.speed        # prints a table and writes benchmarks/results/speed.json
    python -m benchmarks.speed --cpu  # only issue 51's CPU ratios (advise against its import floor)
    python -m benchmarks.speed --cost # only issue 47's CPU ratios (advise at n against n = 64, the sweep's)

Timings are medians of several runs on this machine, and the scale goals are ratios measured in one run
(interleaved, so a noisy machine slows both sides alike); they are for docs/scale.md, not for tests.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
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
    from runtime_model.advice.advisor import advise
    from runtime_model.presets import to_model as presets

    ns = [2**i for i in range(17)]
    scenarios = [
        presets.scenario_from_choice(
            presets.resolve(presets.PresetRequest(n, gpus_per_node=min(8, n), global_batch=float(1 << 24)))
        )
        for n in ns
    ]  # the batch: one token per GPU at 65,536 (GLOBAL_BATCH's reason)

    def run():
        for sc in scenarios:
            advise(sc)

    return _median_time(run, repeats), len(ns)


def _process(args: list[str]) -> float:
    """Wall time of one whole `rtmodel ...` process, interpreter start and imports included."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rtmodel_cli", *args], check=True, capture_output=True)
    return time.perf_counter() - t0


def _peak_mib(args: list[str]) -> float:
    """Peak RSS (MiB) of one `rtmodel ...` process alone: the only child of a fresh interpreter."""
    code = (
        "import resource, subprocess, sys; "
        f"subprocess.run([sys.executable, '-m', 'rtmodel_cli', *{args!r}], check=True, capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return int(out.strip()) / 1024.0


# A global batch of at least one token per GPU at every n measured (the model's default, 25,000 tokens, is
# refused beyond 25,000 GPUs): Llama 3 405B's 16M tokens per step. The tool's speed does not depend on it.
GLOBAL_BATCH = ["--global-batch", str(1 << 24)]


def scale(repeats: int = 5) -> dict:
    """Issue 14's ratios, each side measured alternately in one run (median of `repeats`)."""
    advise = ["advise", "--format", "json", *GLOBAL_BATCH, "--gpus"]
    walls: dict[str, list[float]] = {"64": [], "1048576": []}
    for _ in range(repeats):
        for n in walls:
            walls[n].append(_process([*advise, n]))
    with tempfile.TemporaryDirectory() as tmp:
        sweeps: dict[str, list[float]] = {"8:16": [], "8:65536": []}
        for _ in range(repeats):
            for g in sweeps:
                sweeps[g].append(
                    _process(["plot", "speedup", *GLOBAL_BATCH, "--gpus-range", g, "--out", f"{tmp}/s.png"])
                )
    t0 = time.perf_counter()
    _process([*advise, str(1 << 24)])
    big_s = time.perf_counter() - t0
    med = {k: statistics.median(v) for k, v in {**walls, **sweeps}.items()}
    return {
        "advise_64_s": med["64"],
        "advise_1048576_s": med["1048576"],
        "advise_ratio_1048576_vs_64": med["1048576"] / med["64"],
        "advise_64_peak_mib": _peak_mib([*advise, "64"]),
        "advise_1048576_peak_mib": _peak_mib([*advise, "1048576"]),
        "advise_16777216_s": big_s,
        "advise_16777216_peak_mib": _peak_mib([*advise, str(1 << 24)]),
        "sweep_8_16_s": med["8:16"],
        "sweep_8_65536_s": med["8:65536"],
        "sweep_ratio_65536_vs_16": med["8:65536"] / med["8:16"],
    }


# Issue 51's goals, in CPU time (the box is shared): `advise --gpus 64` <= 2x importing what it needs, and
# `advise --profile` of a quick 2-node x 2-rank profile <= 2.5x `advise --gpus 64`.
QUICK_PROFILES = {
    "synthetic_2x2": Path(__file__).resolve().parents[1] / "tests" / "data" / "synthetic_profile_2x2.json",
    "quick_2x2": RESULTS.parent / "quick-profile-2x2.json",
}


# As a user's install runs: with its bytecode cached (this sandbox sets PYTHONDONTWRITEBYTECODE, which would
# charge every run the compilation of every module it imports).
_AS_INSTALLED = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu_s(argv: list[str], env: dict[str, str] | None = None) -> float:
    """User + system CPU seconds of one child process (resource's children's counters around it)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, capture_output=True, env=_AS_INSTALLED if env is None else env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_floor(repeats: int = 11) -> dict:
    """CPU time of `advise --gpus 64` and of `advise --profile` against `python -c "import numpy, typer"`,
    each side measured alternately in one run (median of `repeats`). The ratios are medians of each
    round's own ratio (its sides measured back to back): a shared VM slows a whole round at once, so a
    ratio of two medians taken at different moments moves more than the code does. rtmodel loads its
    BLAS with one thread (runtime_model/core/blas_threads.py) where the plain floor starts one per core, so
    the floor is also measured as rtmodel loads it (`floor_one_blas_thread`): the like-for-like ratio."""
    rtmodel = [sys.executable, "-m", "rtmodel_cli", "advise"]
    floor = [sys.executable, "-c", "import numpy, typer"]
    sides = {"floor": floor, "floor_one_blas_thread": floor, "advise_64": [*rtmodel, "--gpus", "64"]}
    envs = {"floor_one_blas_thread": dict(_AS_INSTALLED, OPENBLAS_NUM_THREADS="1")}
    sides.update(
        {
            f"advise_profile_{k}": [*rtmodel, "--profile", str(p)]
            for k, p in QUICK_PROFILES.items()
            if p.exists()
        }
    )
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    for k, argv in sides.items():  # once untimed: the bytecode caches written, as after any first run
        _cpu_s(argv, envs.get(k))
    for _ in range(repeats):
        for k, argv in sides.items():
            cpu[k].append(_cpu_s(argv, envs.get(k)))
    out: dict = {f"{k}_cpu_s": statistics.median(v) for k, v in cpu.items()}
    ratios = {
        "advise_64_vs_floor": _round_ratios(cpu["advise_64"], cpu["floor"]),
        "advise_64_vs_floor_one_blas_thread": _round_ratios(cpu["advise_64"], cpu["floor_one_blas_thread"]),
    }
    for k in QUICK_PROFILES:
        if f"advise_profile_{k}" in cpu:
            ratios[f"advise_profile_{k}_vs_advise_64"] = _round_ratios(
                cpu[f"advise_profile_{k}"], cpu["advise_64"]
            )
    for name, values in ratios.items():
        q1, med, q3 = statistics.quantiles(values, n=4)
        out[name], out[f"{name}_quartiles"] = med, [q1, q3]
    out["rounds"] = repeats
    return out


# Issue 47's cost goals, in CPU time: advise at any n <= 1.5x n = 64 (the sizes where its work changes
# kind: full schedules up to 4,096, BlueFog's long periods at powers of 4, reduced systems above), and
# `plot speedup --gpus-range 8:65536` <= 1.3x `--gpus-range 8:16`.
COST_GPUS = (256, 1024, 2048, 4096, 8192, 65_536, 1 << 20)


def cost_ratios(repeats: int = 7) -> dict:
    """Each side measured alternately in one round; per-round ratios, their median and quartiles (as
    import_floor: a shared VM slows a whole round at once)."""
    advise = [sys.executable, "-m", "rtmodel_cli", "advise", "--format", "json", *GLOBAL_BATCH, "--gpus"]
    plot = [sys.executable, "-m", "rtmodel_cli", "plot", "speedup", *GLOBAL_BATCH, "--gpus-range"]
    with tempfile.TemporaryDirectory() as tmp:
        sides = {str(n): [*advise, str(n)] for n in (64, *COST_GPUS)}
        sides.update({g: [*plot, g, "--out", f"{tmp}/s.png"] for g in ("8:16", "8:65536")})
        for argv in sides.values():  # once untimed: bytecode caches written
            _cpu_s(argv)
        cpu: dict[str, list[float]] = {k: [] for k in sides}
        for _ in range(repeats):
            for k, argv in sides.items():
                cpu[k].append(_cpu_s(argv))
    out: dict = {"advise_64_cpu_s": statistics.median(cpu["64"]), "rounds": repeats}
    pairs = {f"advise_{n}_vs_64": (str(n), "64") for n in COST_GPUS}
    pairs["plot_8_65536_vs_8_16"] = ("8:65536", "8:16")
    for name, (top, bottom) in pairs.items():
        q1, med, q3 = statistics.quantiles(_round_ratios(cpu[top], cpu[bottom]), n=4)
        out[name], out[f"{name}_quartiles"] = med, [q1, q3]
    return out


def _round_ratios(top: list[float], bottom: list[float]) -> list[float]:
    return [a / b for a, b in zip(top, bottom, strict=True)]


def consensus_s(n: int = 65_536, k: int = 8) -> dict[str, float]:
    from runtime_model.convergence.consensus import consensus_metrics
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.topology.registry import TopologyNotApplicable, build_schedule, topology_names

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
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed",
        description="The advisor's speed goals; writes benchmarks/results/speed.json (minutes of CPU).",
    )
    part = parser.add_mutually_exclusive_group()
    part.add_argument(
        "--cpu", action="store_true", help="only issue 51's CPU ratios (advise against its import floor)"
    )
    part.add_argument(
        "--cost", action="store_true", help="only issue 47's CPU ratios (advise at n against 64, the sweep)"
    )
    args = parser.parse_args()
    key = "cpu" if args.cpu else "cost" if args.cost else None
    if key:  # one part, merged into the committed results
        measure = {"cpu": import_floor, "cost": cost_ratios}[key]
        res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        res[key] = measure()
        RESULTS.write_text(json.dumps(res, indent=2) + "\n")
        print(json.dumps(res[key], indent=2))
        return
    res = {"advise_cli_s": advise_cli_s()}
    res["sweep_s"], res["sweep_points"] = sweep_s()
    res["consensus_65536_s"] = consensus_s()
    res["scale"] = scale()
    res["cpu"] = import_floor()
    res["cost"] = cost_ratios()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(f"rtmodel advise --gpus 64 (whole process): {res['advise_cli_s']:.3f} s (goal 0.3 s)")
    print(
        f"sweep n = 1..65,536 ({res['sweep_points']} sizes) x all topologies: {res['sweep_s']:.3f} s (goal 1 s)"
    )
    for name, s in res["consensus_65536_s"].items():
        print(f"consensus metrics at n = 65,536, {name}: {s * 1e3:.1f} ms (goal 100 ms)")
    sc = res["scale"]
    print(
        f"advise --gpus 1048576: {sc['advise_1048576_s']:.2f} s = {sc['advise_ratio_1048576_vs_64']:.2f}x "
        f"--gpus 64 ({sc['advise_64_s']:.2f} s) (goal 2x); peak {sc['advise_1048576_peak_mib']:.0f} MiB (goal 300)"
    )
    print(
        f"advise --gpus 16777216: {sc['advise_16777216_s']:.2f} s, peak {sc['advise_16777216_peak_mib']:.0f} MiB"
    )
    print(
        f"plot speedup --gpus-range 8:65536: {sc['sweep_8_65536_s']:.2f} s = {sc['sweep_ratio_65536_vs_16']:.2f}x "
        f"--gpus-range 8:16 ({sc['sweep_8_16_s']:.2f} s) (goal 1.3x)"
    )


if __name__ == "__main__":
    main()

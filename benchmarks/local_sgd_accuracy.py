"""Local-SGD accuracy benchmark: DiLoCo run for real on emulated multi-node clusters, predicted vs measured.

The pipeline of benchmarks/accuracy.py (its workload, iteration counts and launcher): per emulated cluster
  profile (torchrun in every namespace) -> calibrate -> `rtmodel validate --local-sgd-h H ...` per
  local-SGD configuration (DDP, Decent-DP on ring, then local SGD, torchrun in every namespace),
then the mean time per inner step predicted (runtime_model.prediction.local_sgd, recomputed from the profile with the
current model, as accuracy.py re-scores) next to the measured one. The acceptance bound is 10 % per run.

    python -m benchmarks.local_sgd_accuracy            # needs root; ~15 min on 2 cores
    python -m benchmarks.local_sgd_accuracy --keep DIR # keep (or reuse) profiles and validation documents

Results: benchmarks/results/local-sgd.{json,md,csv}; raw runs (profiles, records, every rank's per-step
times) in benchmarks/results/local-sgd-runs/.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import socket
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.accuracy import (
    ITERATIONS,
    PROFILE_REPS,
    RESULTS_DIR,
    WARMUP,
    ClusterConfig,
    _launch_with_one_retry,
    _progress,
)
from rtmodel_validation.results import ValidationResult

BOUND = 0.10  # the acceptance criterion: |error| per run
DECENT_DP_TOPOLOGY = "ring"  # validate always runs Decent-DP too; ring is the cheapest to run here


@dataclass(frozen=True)
class LocalSgdRun:
    """One local-SGD configuration, as validate's --local-sgd-* options."""

    inner_steps: int
    overlap_steps: int = 0
    fragments: int = 1
    bits: int | None = None
    replica: str = "node"

    @property
    def name(self) -> str:
        from runtime_model.prediction.local_sgd import LocalSgd

        return LocalSgd(**asdict(self)).name

    def args(self) -> list[str]:
        flags = ["--local-sgd-h", str(self.inner_steps), "--local-sgd-overlap", str(self.overlap_steps)]
        flags += ["--local-sgd-fragments", str(self.fragments), "--local-sgd-replica", self.replica]
        return flags + (["--local-sgd-bits", str(self.bits)] if self.bits else [])

    def slug(self) -> str:
        return self.name.replace("local-sgd ", "").replace(" ", "_").replace("=", "")


# 200 Mbit: the 4 MiB all-reduce (~250 ms) is several inner steps (~55 ms), the regime local SGD is for;
# 1 Gbit: it is about one step, so H=4 puts it at a fifth of the period.
CLUSTERS: tuple[tuple[ClusterConfig, tuple[LocalSgdRun, ...]], ...] = (
    (
        ClusterConfig(2, 2, 200, 0.5, (DECENT_DP_TOPOLOGY,)),
        (LocalSgdRun(4), LocalSgdRun(8), LocalSgdRun(8, overlap_steps=1, fragments=2)),
    ),
    (
        ClusterConfig(2, 2, 1000, 0.5, (DECENT_DP_TOPOLOGY,)),
        (LocalSgdRun(4, replica="gpu"), LocalSgdRun(4, bits=16)),
    ),
)


@dataclass
class Row:
    cluster: str
    config: str
    predicted_ms: float
    measured_ms: float
    error: float
    measured_se_ms: float  # standard error of the measured mean (batch means)
    predicted_at_run_ms: float  # what validate predicted during the run (same model unless it changed since)
    allreduce_pred_ms: float
    allreduce_meas_ms: float
    period_pred_ms: float
    outer_comm_pred_ms: float  # per period: the fragments' all-reduces
    exposed_comm_pred_ms: float  # per period: what of them nothing hides
    inner_step_pred_ms: float
    timed_steps: int
    inner_step_meas_ms: float  # mean of the plain steps: none launches, waits for or follows an outer sync
    outer_pred_ms: float  # per period: predicted period - H x predicted inner step (sync, outer step, wait)
    outer_meas_ms: float  # per period: measured period - H x measured plain inner step


def _measure(cfg: ClusterConfig, runs: tuple[LocalSgdRun, ...], workdir: Path, timeout_s: float) -> None:
    """Profile the cluster once, then validate each local-SGD configuration not yet in workdir."""
    from rtmodel_emulation.cluster import EmulatedCluster

    profile = workdir / f"{cfg.name}.profile.json"
    todo = [r for r in runs if not _doc_path(workdir, cfg, r).exists()]
    if not todo:
        _progress(f"{cfg.name}: reusing the runs in {workdir}")
        return
    with EmulatedCluster(cfg.nodes, cfg.ranks_per_node, cfg.bandwidth_mbit, cfg.delay_ms) as cluster:
        if not profile.exists():
            _progress(f"{cfg.name}: profiling")
            _launch_with_one_retry(cluster, 29500, _profile_args(cfg, profile), timeout_s)
        for port, run in enumerate(todo, start=29600):
            _progress(f"{cfg.name}: validating {run.name}")
            result = _launch_validate(cluster, port, cfg, run, profile, workdir, timeout_s)
            _doc_path(workdir, cfg, run).write_text(_rank0_document(result))


def _profile_args(cfg: ClusterConfig, profile: Path) -> list[str]:
    return [
        "-m",
        "rtmodel_cli",
        "profile",
        "--out",
        str(profile),
        "--model",
        "synthetic",
        *cfg.model_args(),
        "--iterations",
        "30",
        "--warmup",
        "3",
        "--reps",
        str(PROFILE_REPS),
        "--quiet",
        "--timeout-s",
        "300",
    ]


def _launch_validate(cluster, port, cfg, run: LocalSgdRun, profile: Path, workdir: Path, timeout_s: float):
    """validate --format json on every node; returns the launch whose rank 0 printed the document."""
    args = [
        "-m",
        "rtmodel_cli",
        "validate",
        "--profile",
        str(profile),
        "--topology",
        DECENT_DP_TOPOLOGY,
        "--iterations",
        str(ITERATIONS),
        "--warmup",
        str(WARMUP),
        "--results",
        str(workdir / f"{cfg.name}.validations.jsonl"),
        "--format",
        "json",
        "--timeout-s",
        "300",
        "--quiet",
        *run.args(),
    ]
    try:
        return cluster.launch_torchrun(args, timeout_s=timeout_s, master_port=port)
    except Exception as exc:  # noqa: BLE001 - accuracy.py's policy: one retry, said, then the error
        _progress(f"run failed, retrying once: {str(exc).splitlines()[0]}")
        return cluster.launch_torchrun(args, timeout_s=timeout_s, master_port=port + 100)


def _rank0_document(result) -> str:
    """The JSON document validate printed on node 0 (rank 0's node)."""
    text = result.stdout[0]
    doc, _ = json.JSONDecoder().raw_decode(text[text.index("{") :])
    return json.dumps(doc)


def _doc_path(workdir: Path, cfg: ClusterConfig, run: LocalSgdRun) -> Path:
    return workdir / f"{cfg.name}.{run.slug()}.json"


def _analyse(cfg: ClusterConfig, runs: tuple[LocalSgdRun, ...], workdir: Path) -> list[Row]:
    """Predictions recomputed from the profile with the current model; measurements from the documents."""
    from calibration import calibrate
    from calibration.profile_view import load_profile
    from runtime_model.core.scenario import ClusterShape
    from runtime_model.prediction.iteration import allreduce_prediction
    from runtime_model.prediction.local_sgd import LocalSgd, local_sgd_prediction
    from runtime_model.presets.to_model import network_preset

    # as accuracy.py: a link class the profile cannot measure (1 rank per node) is never used there
    fallback = network_preset("tcp-25g", "pcie4")
    cal = calibrate(load_profile(workdir / f"{cfg.name}.profile.json"), fallback_network=fallback)
    shape = ClusterShape(cfg.nodes * cfg.ranks_per_node, cfg.ranks_per_node)
    scenario = cal.scenario(shape)
    ar_pred = allreduce_prediction(scenario).mean_s
    rows = []
    for run in runs:
        # validate --format json: the record and its per-iteration times
        res = ValidationResult.from_record(json.loads(_doc_path(workdir, cfg, run).read_text()))
        pred = local_sgd_prediction(scenario, LocalSgd(**asdict(run)))
        meas = res.local_sgd.measured
        rows.append(Row(
            cfg.name, run.name, pred.mean_s * 1e3, meas.mean_s * 1e3, (pred.mean_s - meas.mean_s) / meas.mean_s,
            meas.mean_se_s * 1e3, res.local_sgd.predicted_mean_s * 1e3, ar_pred * 1e3,
            res.allreduce.measured.mean_s * 1e3, pred.period_s * 1e3, pred.outer_comm_s * 1e3,
            pred.exposed_comm_s * 1e3, pred.inner_step_s * 1e3, res.local_sgd_run.iterations,
            *_split_ms(run, res, pred),
        ))  # fmt: skip
    return rows


def plain_positions(run: LocalSgdRun) -> list[int]:
    """Steps of the period (0-based) that neither launch, wait for, nor follow an outer sync."""
    from rtmodel_harness.local_sgd import launch_step

    h = run.inner_steps
    launches = {launch_step(p, h, run.fragments) for p in range(run.fragments)}
    lands = {(s + run.overlap_steps) % h for s in launches}
    busy = launches | lands | {(s + 1) % h for s in lands}
    return [k for k in range(h) if k not in busy]


def _split_ms(run: LocalSgdRun, res: ValidationResult, pred) -> tuple[float, float, float]:
    """(measured plain inner step, predicted and measured outer part per period): where an error lies."""
    import numpy as np

    h, warmup = run.inner_steps, res.local_sgd_run.warmup
    times = np.asarray(res.times_s["local_sgd"], dtype=float)
    position = (warmup + np.arange(times.shape[1])) % h
    inner = float(times[:, np.isin(position, plain_positions(run))].mean())
    period = float(times.mean()) * h
    return inner * 1e3, (pred.period_s - h * pred.inner_step_s) * 1e3, (period - h * inner) * 1e3


def to_markdown(rows: list[Row], meta: dict) -> str:
    head = (
        f"Local SGD (DiLoCo) on emulated clusters, {meta['date']}, host {meta['host']}, torch "
        f"{meta['torch']}; workload: synthetic {meta['workload']}.\n\n"
        "| cluster | config | predicted ms | measured ms (±1 se) | error | DDP pred ms | DDP meas ms "
        "| inner step pred / meas ms | outer part pred / meas ms | outer all-reduce pred ms |\n"
        + "|---" * 10
        + "|\n"
    )
    body = "".join(
        f"| {r.cluster} | {r.config} | {r.predicted_ms:.1f} | {r.measured_ms:.1f} ± {r.measured_se_ms:.1f} | "
        f"{r.error:+.1%}{'' if abs(r.error) <= BOUND else ' MISS'} | {r.allreduce_pred_ms:.1f} | "
        f"{r.allreduce_meas_ms:.1f} | {r.inner_step_pred_ms:.1f} / {r.inner_step_meas_ms:.1f} | "
        f"{r.outer_pred_ms:.0f} / {r.outer_meas_ms:.0f} | {r.outer_comm_pred_ms:.1f} |\n"
        for r in rows
    )
    s = meta["summary"]
    foot = (
        f"\n{s['runs']} runs: mean |error| {s['mean_abs_error']:.1%}, max |error| {s['max_abs_error']:.1%}; "
        f"{s['within_bound']}/{s['runs']} within {BOUND:.0%}. Times are per inner step, averaged over whole "
        "periods of H (measured: every rank's timed inner steps pooled). Where an error lies: the inner step "
        "(measured: the mean of the steps that neither launch, wait for, nor follow an outer sync) and the "
        "outer part per period (the period less H inner steps: the exposed all-reduce, the outer step, the "
        "wait for the slowest replica and what a sync costs the step after it).\n"
    )
    return head + body + foot


def _meta(rows: list[Row]) -> dict:
    import torch

    from benchmarks.accuracy import WORKLOAD

    errors = [abs(r.error) for r in rows]
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "host": f"{socket.gethostname()} ({platform.machine()}, {os.cpu_count()} cores)",
        "torch": torch.__version__,
        "workload": WORKLOAD,
        "iterations": ITERATIONS,
        "summary": {
            "runs": len(rows),
            "mean_abs_error": sum(errors) / len(errors),
            "max_abs_error": max(errors),
            "within_bound": sum(e <= BOUND for e in errors),
            "bound": BOUND,
        },
    }


def write_results(rows: list[Row], out_dir: Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = _meta(rows)
    with open(out_dir / "local-sgd.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(asdict(rows[0])))
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
    (out_dir / "local-sgd.md").write_text(to_markdown(rows, meta))
    doc = {**meta, "rows": [asdict(r) for r in rows]}
    (out_dir / "local-sgd.json").write_text(json.dumps(doc, indent=2) + "\n")
    return meta


def run(out_dir: Path = RESULTS_DIR, keep: Path | None = None, timeout_s: float = 600) -> list[Row]:
    from rtmodel_emulation import available

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="rtmodel-local-sgd-") as tmp:
        workdir = keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for cfg, runs in CLUSTERS:
            if not all(_doc_path(workdir, cfg, r).exists() for r in runs):
                ok, why = available()
                if not ok:
                    raise SystemExit(f"error: the emulated cluster is not available here: {why}")
            _measure(cfg, runs, workdir, timeout_s)
            rows.extend(_analyse(cfg, runs, workdir))
            write_results(rows, out_dir)  # nothing lost if a later cluster fails
        meta = write_results(rows, out_dir)
        print(to_markdown(rows, meta))
        if keep is None or keep.resolve() != (out_dir / "local-sgd-runs").resolve():
            shutil.copytree(workdir, out_dir / "local-sgd-runs", dirs_exist_ok=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=RESULTS_DIR, help="where local-sgd.{json,md,csv} go")
    ap.add_argument(
        "--keep", type=Path, default=None, help="keep (and reuse) profiles and runs in this folder"
    )
    args = ap.parse_args(argv)
    run(args.out_dir, args.keep)


if __name__ == "__main__":
    main()

"""Re-predict a GPU accuracy benchmark's runs with today's model, without a GPU.

Why: `benchmarks.gpu_accuracy` keeps each configuration's profile beside its results (runs/), and a lent
GPU's time is short and rare; the model changes between runs. Predicting the measured runs again from
their own profiles, exactly as `rtmodel validate` predicts (rtmodel_validation.plan.validation_inputs), is how a
session without a GPU checks a model change against GPU measurements, as `benchmarks.accuracy --keep`
does for the emulated cluster. The advisor's pick is re-made from the same scenario.

    python -m benchmarks.gpu_accuracy_rescore DIR [--md FILE]   # DIR holds gpu-accuracy.json and runs/
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields, replace
from pathlib import Path

from benchmarks.gpu_accuracy import RESULTS_DIR, Config, Run, config_result, summarise, to_markdown
from runtime_model.advice.held_out import leave_one_source_out


def rescore_config(entry: dict, runs_dir: Path) -> dict:
    """One configuration's entry with every run re-predicted from its profile and the pick re-made."""
    from calibration.profile_view import load_profile
    from rtmodel_validation.plan import choose_topology, run_shape, validation_inputs
    from runtime_model.prediction.iteration import allreduce_prediction, gossip_prediction
    from runtime_model.topology.registry import build_schedule

    cfg = Config(**{**entry["config"], "topologies": tuple(entry["config"]["topologies"])})
    shape = run_shape(cfg.ranks, cfg.ranks)  # every configuration's ranks are on this one machine
    scenario, margin = validation_inputs(load_profile(runs_dir / f"profile-{cfg.name}.json"), shape)
    predicted_s = {"allreduce": allreduce_prediction(scenario).mean_s}
    runs = []
    for measured in entry["runs"]:
        run = Run(**{f.name: measured[f.name] for f in fields(Run)})
        if run.method not in predicted_s:
            predicted_s[run.method] = gossip_prediction(scenario, build_schedule(run.method, shape)).mean_s
        runs.append(replace(run, predicted_ms=predicted_s[run.method] * 1e3))
    _, _, advisor, _ = choose_topology(None, True, scenario, margin)  # as `validate --recommended` picks
    return config_result(entry["config"], runs, advisor.recommendation, advisor.too_close_to_call)


def speedup_errors(doc: dict) -> list[float]:
    """predicted / measured - 1 of each validate run's speedup over All-Reduce (its own DDP run beside
    it: the runs come in (All-Reduce, topology) pairs)."""
    return [e for _, e in sourced_speedup_errors(doc)]


def sourced_speedup_errors(doc: dict) -> list[tuple[str, float]]:
    """speedup_errors with the configuration each came from: the source a held-out interval leaves out."""
    out = []
    for c in doc["configs"]:
        runs = c["runs"]
        for ar, topo in zip(runs[0::2], runs[1::2], strict=True):
            if ar["method"] != "allreduce":
                raise ValueError(f"{c['config']}: runs are not (All-Reduce, topology) pairs")
            predicted = ar["predicted_ms"] / topo["predicted_ms"]
            measured = ar["measured_ms"] / topo["measured_ms"]
            out.append((c["config"], predicted / measured - 1.0))
    return out


def shared_gpu_evidence(root: Path = RESULTS_DIR) -> dict:
    """The measured error of calibrated profiles whose ranks share a GPU (over gloo, through host
    copies), validated on that host: every kept GPU accuracy run with its profiles (root/*/runs),
    re-predicted with today's model. The figures preset_data/accuracy.toml keeps as that source's margin
    (runtime_model/advice/confidence.py); a test recomputes them."""
    times, sourced, dirs = [], [], []
    for d in sorted(p for p in root.iterdir() if (p / "runs").is_dir()):
        doc = rescore(json.loads((d / "gpu-accuracy.json").read_text()), d / "runs")
        times += [abs(r["error"]) for c in doc["configs"] for r in c["runs"]]
        sourced += [(f"{d.name}/{name}", e) for name, e in sourced_speedup_errors(doc)]
        dirs.append(d.name)
    speedups = [abs(e) for _, e in sourced]
    held = leave_one_source_out(sourced)
    return {
        "mean_abs_error": sum(times) / len(times),
        "max_abs_error": max(times),
        "predictions": len(times),
        "speedup_mean_abs_error": sum(speedups) / len(speedups),
        "speedup_max_abs_error": max(speedups),
        "speedups": len(speedups),
        "speedup_interval": held.interval,
        "speedup_held_out_factor": held.factor,
        "speedup_held_out_coverage": held.coverage,
        "speedup_sources": held.sources,
        "results": dirs,
    }


def rescore(doc: dict, runs_dir: Path) -> dict:
    """The benchmark's document with today's predictions, picks and summary (measurements unchanged)."""
    configs = [rescore_config(entry, runs_dir) for entry in doc["configs"]]
    return doc | {"configs": configs, "summary": summarise(configs), "rescored": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_accuracy_rescore", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "results_dir", type=Path, help="a gpu_accuracy --out-dir: gpu-accuracy.json and runs/"
    )
    parser.add_argument("--md", type=Path, help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    from rtmodel_documents.profile_checks import ProfileError

    source = args.results_dir / "gpu-accuracy.json"
    unreadable = (OSError, ValueError, KeyError, TypeError, ProfileError)  # missing, or not this benchmark's
    try:
        doc = rescore(json.loads(source.read_text()), args.results_dir / "runs")
    except unreadable as exc:
        print(f"error: {source}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    text = "Re-predicted with today's model (`python -m benchmarks.gpu_accuracy_rescore`).\n\n"
    text += to_markdown(doc)
    print(text, end="")
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Re-predict a GPU compute benchmark's measured points with today's runtime model, without a GPU.

Why: a committed `benchmarks.gpu_compute` run keeps what was measured (wall time per point, the host's
`opcount --dispatch` figure, the preset GPU); the model changes after it. Re-scoring any run, ours or
one from another GPU host, shows the model's error on it now, given only that host's dispatch figure,
as a user with `--dispatch-us` would get it.

    python -m benchmarks.gpu_compute_rescore                       # the committed H100 run
    python -m benchmarks.gpu_compute_rescore other-host.json --md rescored.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks.gpu_compute import RESULTS
from benchmarks.gpu_compute_passes import by_point
from benchmarks.gpu_compute_predict import predict

COLUMNS = (
    "model",
    "units",
    "precision",
    "wrapper",
    "device-busy share",
    "measured ms",
    "passes",
    "spread %",
    "predicted ms",
    "error %",
)


def rescore(doc: dict) -> list[dict]:
    """One row per measured point with a preset model: measured ms (the median over the run's passes,
    gpu_compute_passes) and their spread, re-predicted ms, signed error."""
    dispatch = doc["dispatch"]["us_per_op"]
    gpu = doc["header"]["gpu_preset"]
    rows = []
    for group in by_point(doc["points"]):
        p, wall = group["point"], group["wall_ms"]
        prediction = predict(p["model"], p["units"], p["precision"], gpu, dispatch)
        if prediction is None:
            continue
        predicted = prediction[f"{p['wrapper']}_ms"]
        rows.append({
            "model": p["model"], "units": p["units"], "precision": p["precision"], "wrapper": p["wrapper"],
            "device_busy_share": p.get("device_busy_share"), "measured_ms": wall, "predicted_ms": predicted,
            "passes": len(group["walls_ms"]), "spread": group["spread"], "error": (predicted - wall) / wall,
        })  # fmt: skip
    return rows


def summary(rows: list[dict]) -> dict:
    errors = [abs(r["error"]) for r in rows]
    return {
        "points": len(rows),
        "mean_abs_error": statistics.fmean(errors),
        "max_abs_error": max(errors),
        "max_spread": max(r["spread"] for r in rows),
    }


def render(doc: dict, rows: list[dict]) -> str:
    h, s = doc["header"], summary(rows)
    host_moved = doc["dispatch"].get("passes_us_per_op")
    lines = [
        f"Re-predicted with today's model (`python -m benchmarks.gpu_compute_rescore`): {h['gpu']} "
        f"(preset {h['gpu_preset']}), host {h['host_cpu']}, dispatch {doc['dispatch']['us_per_op']:.1f} us/op, "
        f"measured {h['date_utc']}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in rows:
        share = "-" if r["device_busy_share"] is None else f"{r['device_busy_share']:.2f}"
        spread = f"{r['spread'] * 100:.0f}" if r["passes"] > 1 else "-"
        lines.append(
            f"| {r['model']} | {r['units']} | {r['precision']} | {r['wrapper']} | {share} | "
            f"{r['measured_ms']:.1f} | {r['passes']} | {spread} | {r['predicted_ms']:.1f} | "
            f"{r['error'] * 100:+.0f} |"
        )
    lines += [
        "",
        f"{s['points']} points: mean |error| {s['mean_abs_error']:.1%}, max {s['max_abs_error']:.1%}"
        + (
            f"; passes of one point differ by up to {s['max_spread']:.0%}"
            if max(r["passes"] for r in rows) > 1
            else ""
        )
        + ".",
        "",
    ]
    if host_moved:
        figures = ", ".join("-" if us is None else f"{us:.1f}" for us in host_moved)
        lines += [f"The host's dispatch figure at the start of each pass: {figures} us/op.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_compute_rescore", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("results", nargs="?", default=str(RESULTS / "gpu-compute.json"))
    parser.add_argument("--md", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    try:
        doc = json.loads(Path(args.results).read_text())
        rows = rescore(doc)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {args.results}: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"error: {args.results}: no measured point of a preset model", file=sys.stderr)
        return 2
    text = render(doc, rows)
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

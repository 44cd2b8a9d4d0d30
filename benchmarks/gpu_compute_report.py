"""The GPU compute benchmark's markdown: the results table (also printed last) and README.md around it."""

from __future__ import annotations

COLUMNS = (
    "model", "units", "precision", "wrapper", "measured ms", "device-busy ms", "host issue ms",
    "us/op fwd", "us/op bwd", "us/op scaler", "us/op opt", "predicted ms", "error %", "pass",
)  # fmt: skip


def _f(value, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _row(p: dict) -> list[str]:
    per_op = p.get("host_us_per_op") or {}
    return [
        p["model"], str(p["units"]), p["precision"], p["wrapper"],
        _f(p.get("wall_ms")), _f(p.get("device_busy_ms")), _f(p.get("host_issue_ms")),
        *(_f(per_op.get(phase)) for phase in ("forward", "backward", "scaler", "optimizer")),
        _f(p.get("predicted_ms")), _f(p.get("error_pct"), "+.0f"), str(p.get("pass", 0) + 1),
    ]  # fmt: skip


def render_table(doc: dict) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_row(p)) + " |" for p in doc["points"]]
    return "\n".join(lines) + "\n"


def render_readme(doc: dict) -> str:
    h, d = doc["header"], doc.get("dispatch") or {}
    tiny = f", tiny models (width / {h['width_div']})" if h["tiny"] else ""
    dispatch = f"{d['us_per_op']:.1f} us/op" if "us_per_op" in d else f"not measured ({d.get('error')})"
    if d.get("passes_us_per_op"):
        dispatch += " (at the start of each pass: " + ", ".join(_f(us) for us in d["passes_us_per_op"]) + ")"
    lines = [
        "# GPU compute: measured iterations vs the runtime model",
        "",
        f"Measured by `{h['command']}` on {h['gpu'] or 'CPU'} (preset {h['gpu_preset']}), host CPU "
        f"{h['host_cpu']} ({h['cpu_count']} cores, {h['cpus_usable']} usable), torch {h['torch']}, "
        f"CUDA {h['cuda']}, cuDNN {h['cudnn']}, NCCL {h['nccl']}, Python {h['python']}, {h['date_utc']}"
        f"{tiny}.",
        "",
        f"This host's dispatch cost (`python -m profiler.opcount --model transformer-base --dispatch`): "
        f"{dispatch}; the predictions use it in place of the preset's dispatch_us.",
        "",
        "measured ms: median wall time of one synchronized iteration (the paper's recipe: TF32 on, fp16 =",
        "autocast + GradScaler, bf16 = autocast, tf32 = fp32; foreach Adam; loss.item() each step).",
        "device-busy ms: union of the kernels' intervals per iteration (torch.profiler). host issue ms: the",
        "host's time in forward + backward + GradScaler + optimizer, without the recipe's waits. us/op: a",
        "phase's host time / its kernel-launching aten ops (profiler.op_tally); an upper bound where the",
        "device is busy most of the iteration (device_busy_share in the JSON). predicted ms: the preset",
        "GPU's compute (runtime_model.presets.to_model.iteration_work) bare, or DDP's (ddp_compute); error =",
        "(predicted - measured) / measured, by the model at the time of the run: `python -m",
        "benchmarks.gpu_compute_rescore` re-predicts it with today's (rescore.md). pass: which of the",
        f"run's {h.get('repeats', 1)} pass(es) over the points measured the row (every other pass in reverse",
        "order; the rescore takes the median over passes). Method: benchmarks/gpu_compute.py.",
        "",
        render_table(doc),
    ]
    if doc.get("skipped"):
        lines += ["Skipped (budget): " + ", ".join(
            f"{s['model']} {s['units']} {s['precision']} {s['wrapper']}" for s in doc["skipped"]) + "", ""]  # fmt: skip
    failed = [p for p in doc["points"] if p.get("errors")]
    if failed:
        lines += ["Errors:", ""]
        lines += [
            f"- {p['model']} {p['units']} {p['precision']} {p['wrapper']}: "
            + "; ".join(f"{k}: {v}" for k, v in p["errors"].items())
            for p in failed
        ]
        lines.append("")
    return "\n".join(lines)

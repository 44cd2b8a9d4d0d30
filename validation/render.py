"""Rich tables for a validation result and for the accuracy summary of a results file."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from validation.results import ResultsSummary, ValidationResult


def _ms(x: float) -> str:
    return f"{x * 1e3:.2f} ms"


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:+.1%}"


def render_result(res: ValidationResult, console: Console) -> None:
    s = res.shape
    t = Table(
        title=f"Validation on {s.gpus} ranks ({s.nodes} node(s) x {s.gpus_per_node}), "
        f"{res.workload['model']}, {res.iterations} timed iterations after {res.warmup} warm-up",
        title_justify="left",
    )
    for col in ("run", "predicted mean", "measured mean", "error", "predicted p50", "measured p50",
                "measured p90", "rank spread"):
        t.add_column(col, justify="left" if col == "run" else "right")
    for label, c in (("allreduce (DDP)", res.allreduce), (f"{res.topology} (Decent-DP)", res.decentralized)):
        t.add_row(label, _ms(c.predicted_mean_s), _ms(c.measured.mean_s), _pct(c.error), _ms(c.predicted_p50_s),
                  _ms(c.measured.p50_s), _ms(c.measured.p90_s), f"{c.measured.rank_spread:.3f}")
    console.print(t)
    console.print("error = (predicted - measured) / measured on the mean iteration time (= throughput); "
                  "rank spread = max / min of per-rank medians",
                  style="dim", highlight=False)
    v = res.verdict
    mark = "[green]held[/]" if v.held else "[red]did not hold[/]"
    console.print(
        f"speedup of {res.topology} over All-Reduce: predicted {v.predicted_speedup:.3f}x, measured "
        f"{v.measured_speedup:.3f}x; verdict ({v.predicted} predicted, {v.measured} measured, margin "
        f"{v.margin:.0%}): {mark}",
        highlight=False,
    )
    if res.advisor:
        console.print(f"advisor: {res.advisor['verdict']}", highlight=False)
    d = res.distance_to_consensus
    console.print(f"distance to consensus after the Decent-DP run: max {d['max']:.3g}, mean {d['mean']:.3g}",
                  highlight=False)
    for note in res.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)


def render_summary(summary: ResultsSummary, console: Console) -> None:
    t = Table(
        title=f"Model accuracy over {summary.records} validation(s) in {summary.path} "
        f"(shapes: {', '.join(summary.shapes)})",
        title_justify="left",
    )
    for col in ("run", "n", "mean |error|", "max |error|", "mean signed error"):
        t.add_column(col, justify="left" if col == "run" else "right")
    for name, st in summary.by_run.items():
        t.add_row(name, str(st.n), f"{st.mean_abs_error:.1%}", f"{st.max_abs_error:.1%}", _pct(st.mean_signed_error))
    o = summary.overall
    t.add_row("[bold]all[/]", str(o.n), f"{o.mean_abs_error:.1%}", f"{o.max_abs_error:.1%}", _pct(o.mean_signed_error))
    console.print(t)
    console.print(f"advisor verdict held in {summary.verdicts_held} of {summary.records} validation(s)", highlight=False)
    if summary.skipped_lines:
        console.print(f"[yellow]note:[/] skipped {summary.skipped_lines} line(s) that are not validation records",
                      highlight=False)

"""Rich tables for a validation result and for the accuracy summary of a results file.

Both fit the terminal (rich's width: the terminal's, $COLUMNS, or 80 when piped): the columns that fit
are chosen by priority (`rtmodel_cli.fitted_tables`, as for the advise table), nothing is cut
mid-word, and a dim line names what was left out (`--format json` has everything).
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.markup import escape

from rtmodel_cli.fitted_tables import fitted_table, print_dropped
from rtmodel_validation.results import ResultsSummary, ValidationResult


def _fitted(
    console: Console, title: str, columns: list[tuple[str, int]], rows: list[list[str]], last_style: str = ""
) -> list[str]:
    """Prints a table of the columns (header, priority) that fit, and which were left out; returns the
    headers shown. The first column is text that may wrap, the others numbers."""
    headers = [h for h, _ in columns]
    numbers = [i > 0 for i in range(len(columns))]
    styles = [None] * (len(rows) - 1) + [last_style or None]
    table, dropped = fitted_table(
        console, title, headers, rows, [p for _, p in columns], [not n for n in numbers], numbers, styles
    )
    console.print(table)
    print_dropped(console, dropped, "--format json")
    return [h for h in headers if h not in dropped]


def _ms(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x * 1e3:.2f} ms"  # n/a: a run the model does not predict


def _gib(peaks: tuple[int | None, ...] | None) -> str:
    """The largest rank's peak memory, in GiB ("n/a" where none was measured)."""
    known = [p for p in peaks or () if p is not None]
    return f"{max(known) / 2**30:.3g} GiB" if known else "n/a"


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:+.1%}"


def render_result(res: ValidationResult, console: Console) -> None:
    s = res.shape
    cols = [
        ("run", 0),
        ("predicted mean", 0),
        ("measured mean", 0),
        ("error", 0),
        ("predicted p50", 3),
        ("measured p50", 3),
        ("measured p90", 4),
        ("rank spread", 2),
        ("peak memory", 1),
    ]
    runs = [("allreduce (DDP)", res.allreduce), (f"{res.topology} (Decent-DP)", res.decentralized)]
    if res.fsdp is not None:
        runs.append(("fsdp (FSDP2, ZeRO-3)", res.fsdp))
    rows = [
        [
            label,
            _ms(c.predicted_mean_s),
            _ms(c.measured.mean_s),
            _pct(c.error),
            _ms(c.predicted_p50_s),
            _ms(c.measured.p50_s),
            _ms(c.measured.p90_s),
            f"{c.measured.rank_spread:.3f}",
            _gib(c.peak_memory_bytes),
        ]
        for label, c in runs
    ]
    title = (
        f"Validation on {s.gpus} ranks ({s.nodes} node(s) x {s.gpus_per_node}), {res.workload.model}, "
        f"{res.iterations} timed iterations after {res.warmup} warm-up"
    )
    shown = _fitted(console, title, cols, rows)
    source = res.allreduce.peak_memory_source
    console.print(
        "error = (predicted - measured) / measured on the mean iteration time (= throughput)"
        + ("; rank spread = max / min of per-rank medians" if "rank spread" in shown else "")
        + (f"; peak memory = the largest rank's ({source})" if "peak memory" in shown and source else ""),
        style="dim",
        highlight=False,
    )
    v = res.verdict
    mark = "[green]held[/]" if v.held else "[red]did not hold[/]"
    console.print(
        f"speedup of {escape(res.topology)} over All-Reduce: predicted {v.predicted_speedup:.3f}x, measured "
        f"{v.measured_speedup:.3f}x; verdict ({v.predicted} predicted, {v.measured} measured, margin "
        f"{v.margin:.0%}): {mark}",
        highlight=False,
    )
    console.print(
        f"run-to-run spread: measured speedup {v.measured_speedup:.3f}x ± {v.measured_speedup_rel_se:.1%} "
        "(1 sigma, batch means within each run)",
        highlight=False,
    )
    if not v.settled:
        console.print(
            "[yellow]warning: one run cannot settle this verdict: the measured speedup's ±2 sigma reaches "
            "across the margin; run again or raise --iterations[/]",
            highlight=False,
        )
    if res.drift is not None:
        from rtmodel_validation.drift import drift_line

        line = drift_line(res.drift, res.topology, res.allreduce.error, res.decentralized.error)
        console.print(f"[yellow]{line}[/]" if res.drift.beyond else line, highlight=False)
    if res.advisor:
        console.print(f"advisor: {res.advisor.verdict}", highlight=False)
    d = res.distance_to_consensus
    console.print(
        f"distance to consensus after the Decent-DP run: max {d.max:.3g}, mean {d.mean:.3g}",
        highlight=False,
    )
    for note in res.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)


def render_summary(summary: ResultsSummary, console: Console) -> None:
    title = (
        f"Model accuracy over {summary.records} validation(s) in {summary.path} "
        f"(shapes: {', '.join(summary.shapes)})"
    )
    cols = [("run", 0), ("n", 0), ("mean |error|", 0), ("max |error|", 1), ("mean signed error", 2)]
    rows = [
        [name, str(st.n), f"{st.mean_abs_error:.1%}", f"{st.max_abs_error:.1%}", _pct(st.mean_signed_error)]
        for name, st in summary.by_run.items()
    ]
    o = summary.overall
    rows.append(
        ["all", str(o.n), f"{o.mean_abs_error:.1%}", f"{o.max_abs_error:.1%}", _pct(o.mean_signed_error)]
    )
    _fitted(console, title, cols, rows, last_style="bold")
    console.print(
        f"advisor verdict held in {summary.verdicts_held} of {summary.records} validation(s)", highlight=False
    )
    if summary.skipped_lines:
        console.print(
            f"[yellow]note:[/] skipped {summary.skipped_lines} line(s) that are not validation records",
            highlight=False,
        )

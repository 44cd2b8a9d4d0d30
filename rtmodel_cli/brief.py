"""`rtmodel advise --brief`: the answer in at most BRIEF_MAX_LINES lines at the terminal's width.

Why a view of its own: the full answer (table, why, where it flips, sources, notes) runs to 60-80
lines; a user who asks "which one, how much faster, what do I run" needs three things: the verdict with
its margin, the few rows it was chosen from, and the lines to run. Everything else is one flag away
(the default view, --verbose, --format json).
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from rtmodel_util.shown import shown
from runtime_model.advice.advisor import Advice
from runtime_model.advice.columns import NO_FIT_MARK
from runtime_model.advice.confidence import speedup_uncertainty
from runtime_model.advice.crossover import named_option, settle_line
from runtime_model.core.errors import UserError

BRIEF_MAX_LINES = 15
MARKS = ("  <- pick", "  <- validate")  # the row the verdict names: the pick, a too-close verdict's candidate
BRIEF_TOPOLOGIES = 3  # the fastest runnable topologies listed under All-Reduce (the pick always among them)


def brief_lines(advice: Advice, width: int, assumed: str | None = None) -> list[str]:
    """The brief answer as lines of at most `width` columns (where a word fits), BRIEF_MAX_LINES at most:
    the settle line and then rows are dropped before the verdict, what it assumed or the lines to run."""
    from rtmodel_cli.tables import code_lines, shell_lines

    rec = advice.recommendation
    tuned = advice.tuned_ddp
    first = (
        f"Tune DDP first: {tuned.setting} takes All-Reduce from {tuned.today_s * 1e3:.1f} to "
        f"{tuned.tuned_s * 1e3:.1f} ms; then "
        if tuned is not None and tuned.changes_verdict
        else ""
    )
    verdict = _wrapped(first + _verdict(advice), width) + (_wrapped(assumed, width) if assumed else [])
    run = ["Run it with:", *code_lines(rec.code_line, width), *shell_lines(rec.torchrun_line, width)]
    hint = _wrapped("(without --brief: the full table, why, where it flips and the sources)", width)
    rows = _rows(advice)
    settle = _wrapped(settle_line(advice) or "", width) if advice.crossovers else []
    while len(verdict) + len(rows) + len(settle) + len(run) + len(hint) > BRIEF_MAX_LINES:
        if settle:
            settle = []
        elif len(rows) > 2:
            rows = _without_one(rows)
        else:
            hint = []
            break
    return [*verdict, *rows, *settle, *run, *hint]


def refuse_beside(verbose: bool, other_format: str | None) -> None:
    """--brief is the table view's short form: with --verbose or another --format it means nothing."""
    if verbose or other_format is not None:
        clash = "--verbose" if verbose else f"--format {other_format}"
        raise UserError(f"--brief is the table view's short form: it cannot be used with {clash}")


def render_brief(advice: Advice, console: Console, assumed=None) -> None:
    """`assumed` (a preset answer's assumptions.Assumptions): its short line follows the verdict."""
    for line in brief_lines(advice, max(console.width, 20), None if assumed is None else assumed.short()):
        console.print(Text(shown(line)), soft_wrap=True)


def _verdict(advice: Advice) -> str:
    """One sentence: the pick, its speedup with the stated uncertainty, or why All-Reduce stays."""
    rec, ar, sc = advice.recommendation, advice.allreduce, advice.scenario
    nodes = f"{sc.shape.nodes} node{'' if sc.shape.nodes == 1 else 's'}"
    head = f"{sc.shape.gpus} GPUs ({nodes} x {sc.shape.gpus_per_node}), {sc.network.name}: "
    rows = {r.topology: r for r in advice.rows if r.prediction is not None}
    name = named_option(advice)
    row = rows.get(name)
    if row is None:
        return head + f"keep {_baseline_name(advice)} ({ar.mean_s * 1e3:.1f} ms per iteration). " + (
            f"{rec.verdict.split('. ')[0]}."
        )
    unc = speedup_uncertainty(row, ar, advice.allreduce_uncertainty_s, advice.verdict_margin)
    speed = (
        f"{row.speedup:.2f}x All-Reduce ({row.prediction.mean_s * 1e3:.1f} vs {ar.mean_s * 1e3:.1f} ms per "
        f"iteration, ±{unc:.0%} on the speedup)"
    )
    if rec.too_close_to_call:
        return head + f"too close to call: {name} would run at {speed}; validate before you switch."
    if rec.topology == "allreduce":
        return head + f"keep All-Reduce; the fastest other, {name}, runs at {speed}."
    fastest = min(rows.values(), key=lambda r: r.prediction.mean_s)
    why = (
        f" Not the fastest ({fastest.topology}, {fastest.prediction.mean_s * 1e3:.1f} ms) but within the "
        f"±{advice.margin:.0%} margin of it, with the better consensus."
        if fastest.topology != name and fastest.runnable
        else ""
    )
    return head + f"use {name}: {speed}.{why}"


def _rows(advice: Advice) -> list[str]:
    """All-Reduce and the fastest runnable topologies, one line each, the option the verdict names marked
    as the full view names it (crossover.named_option): the pick, or a too-close verdict's candidate."""
    rec, ar = advice.recommendation, advice.allreduce
    ranked = sorted(
        (r for r in advice.rows if r.prediction is not None and r.runnable), key=lambda r: r.prediction.mean_s
    )
    shown = ranked[:BRIEF_TOPOLOGIES]
    named = named_option(advice)
    pick = next((r for r in ranked if r.topology == named), None)
    if pick is not None and pick not in shown:
        shown = [*shown[: BRIEF_TOPOLOGIES - 1], pick]
    lines = [f"  {_baseline_name(advice):<22}{ar.mean_s * 1e3:>10.1f} ms   1.00x"]
    for r in shown:
        mark = MARKS[rec.too_close_to_call] if r is pick else ("" if r.fits else f"  {NO_FIT_MARK}")
        lines.append(f"  {r.topology:<22}{r.prediction.mean_s * 1e3:>10.1f} ms {r.speedup:>6.2f}x{mark}")
    return lines


def _baseline_name(advice: Advice) -> str:
    """The All-Reduce-family row the answer is against: 'allreduce (DDP)', or the sharded one that fits
    where DDP does not ('zero2 (sharded)')."""
    row = next((r for r in advice.baselines if r.method == advice.baseline), None)
    return "allreduce (DDP)" if row is None or row.method == "ddp" else f"{row.method} (sharded)"


def _without_one(rows: list[str]) -> list[str]:
    """The rows less the last one the verdict does not name (All-Reduce's, the first, stays): a brief
    that must shorten never drops the row it marks."""
    i = max(i for i, line in enumerate(rows) if i > 0 and not line.endswith(MARKS))
    return rows[:i] + rows[i + 1 :]


def _wrapped(text: str, width: int) -> list[str]:
    """`text` filled into lines of at most `width` columns (tables.wrap_words); none for no text."""
    from rtmodel_cli.tables import wrap_words

    return wrap_words(text.split(), width, " ", "", "") if text.strip() else []

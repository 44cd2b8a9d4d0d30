"""Terminal rendering of the advice and the topology list (rich). The numbers and their formatting
come from `runtime_model.columns`, the same list the CSV uses."""

from __future__ import annotations

import shutil

from rich.console import Console
from rich.table import Table

from runtime_model.advisor import Advice
from runtime_model.columns import MODEL_ONLY, TABLE_COLUMNS, consensus_text
from runtime_model.defaults import MIB
from runtime_model.report import advice_to_dict
from runtime_model.scenario import ClusterShape


def wide_console() -> Console:
    """Rich falls back to 80 columns when piped; tables need more to stay readable."""
    return Console(width=max(150, shutil.get_terminal_size((150, 40)).columns))


def _plain(console: Console, text: str, style: str | None = None) -> None:
    console.print(text, style=style, markup=False, highlight=False)


def render_advice(advice: Advice, console: Console, header: str = "") -> None:
    """The human view: one row per topology, then the verdict and the exact lines to run it."""
    sc = advice.scenario
    title = header or (
        f"{sc.shape.gpus} GPUs = {sc.shape.nodes} nodes x {sc.shape.gpus_per_node}, network {sc.network.name}"
    )
    t = Table(title=title, show_lines=False)
    for col in TABLE_COLUMNS:
        t.add_column(col.label, justify="right" if col.numeric else "left", no_wrap=col.label != "runs on")
    for entry in advice_to_dict(advice)["predictions"]:
        if not entry["applicable"]:
            blanks = [""] * (len(TABLE_COLUMNS) - 2)
            t.add_row(entry["topology"], *blanks, f"[yellow]not applicable: {entry['reason']}[/]")
            continue
        cells = [col.table(entry) for col in TABLE_COLUMNS]
        if cells[-1] == MODEL_ONLY:
            cells[-1] = f"[yellow]{cells[-1]}[/]"
        t.add_row(*cells)
    console.print(t)
    for r in advice.rows:
        if r.applicable and not r.runnable:
            console.print(f"{r.topology}: model only: {r.reason}", style="yellow", markup=False)
    comp = sc.compute
    console.print(
        f"compute per worker: forward {comp.forward_s * 1e3:.2f} ms, backward {comp.backward_s * 1e3:.2f} ms, "
        f"optimizer {comp.optimizer_s * 1e3:.2f} ms, {comp.distribution.describe()}; "
        f"message {sc.buckets.message_bytes / MIB:.1f} MiB in {len(sc.buckets.gossip)} buckets"
    )
    console.print(
        "factors = ms of All-Reduce's time each factor removes (positive = gossip faster); they sum to the gap."
    )
    for k, v in advice.provenance.items():
        _plain(console, f"{k}: {v}", "dim")
    for note in advice.notes:
        _plain(console, f"note: {note}", "dim")
    rec = advice.recommendation
    _plain(console, rec.verdict, "yellow" if rec.too_close_to_call else "bold green")
    console.print("Run it with:")
    _plain(console, rec.code_line)
    _plain(console, rec.torchrun_line)


def render_topologies(rows: list[dict], shape: ClusterShape, show_rounds: bool) -> None:
    console = wide_console()
    t = Table(title=f"Gossip schedules for n = {shape.gpus} ({shape.nodes} nodes x {shape.gpus_per_node})")
    for col in ("topology", "rounds/period", "group sizes", "consensus", "Decent-DP", "description / reason"):
        t.add_column(col)
    for r in rows:
        if not r["applicable"]:
            t.add_row(r["topology"], "", "", "", "", f"[yellow]not applicable: {r['reason']}[/]")
            continue
        t.add_row(
            r["topology"],
            str(r["period"]),
            ",".join(map(str, r["group_sizes"])),
            consensus_text(r),
            r["decent_dp_name"] or "registered by rtmodel",
            r["description"],
        )
    console.print(t)
    if show_rounds:
        for r in rows:
            if r.get("rounds"):
                console.print(f"[bold]{r['topology']}[/]")
                for i, groups in enumerate(r["rounds"]):
                    _plain(console, f"  round {i}: {groups}")

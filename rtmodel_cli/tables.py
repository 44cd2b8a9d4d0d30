"""Terminal rendering of the advice and the topology list (rich). The numbers and their formatting
come from `runtime_model.advice.columns`, the same list the CSV uses.

The tables fit the terminal (rich's width: the terminal's, else $COLUMNS, else 80 when piped): the
columns that fit are chosen by priority (`rtmodel_cli.fitted_tables`), nothing is cut mid-word, and a dim line
names what was left out (the JSON and CSV always have it). Words a reader cannot know get one dim
legend line each under the table, only when they appear.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from rtmodel_cli.fitted_tables import Cell, fitted_table, print_dropped, shown_text
from rtmodel_cli.shown_console import terminal_console
from runtime_model.advice.advisor import Advice
from runtime_model.advice.columns import (
    EQUIVALENT_MARK,
    MODEL_ONLY,
    NOT_APPLICABLE,
    TABLE_COLUMNS,
    consensus_text,
    runs_on_text,
)
from runtime_model.advice.crossover import crossover_sentence, settle_line
from runtime_model.advice.report import advice_to_dict
from runtime_model.core.defaults import MIB
from runtime_model.core.scenario import ClusterShape

# (word as it appears in the output, its legend line): printed only when the word appears
LEGEND = (
    (
        "rho=",
        "rho = consensus contraction factor per period: ||W_L...W_1 - J||_2, how much one full period "
        "of gossip rounds shrinks the distance to the average (smaller = faster mixing; 0 = exact).",
    ),
    (
        "exact in ",
        "exact in N rounds = the average is reached exactly after N gossip rounds, from any start.",
    ),
    (
        "worst round",
        "worst round = max over single rounds r of ||W_r - J||_2: 1 = some disagreement survives a "
        "round untouched, so with gradient steps between rounds even exact schedules have a "
        "transient stage (JSON/CSV also give tau_over_p, Koloskova et al. 2020).",
    ),
    (
        EQUIVALENT_MARK,
        "\u2248 best = mean iteration time within the advisor's margin ({margin}) of the fastest "
        "runnable one: equivalent within the model's accuracy; among them the best consensus is picked. best = "
        "the option the verdict names (a too-close verdict's candidate too), or the fastest where that is not "
        "within the margin of it.",
    ),
    (
        "agreement",
        "agreement = what the consensus costs in iterations (Koloskova et al. 2020): exact (All-Reduce's "
        "iterations), measured (within what the paper measured to keep accuracy), extrapolated (beyond "
        "it), hopeless (an order of magnitude beyond it); where known, the time to All-Reduce's loss as a "
        "multiple of All-Reduce's (JSON/CSV: the transient ratio and the time's lower bound elsewhere).",
    ),
    (
        "runs on",
        "runs on = what runs it: Decent-DP (a built-in); Decent-DP + rtmodel (after `import "
        "rtmodel_decentdp`); SGP / SGP --overlap (facebookresearch/stochastic_gradient_push) and BlueFog "
        "(neighbor_allreduce): shown to compare, picks stay with Decent-DP; local SGD: `rtmodel validate "
        "--profile PROFILE --local-sgd-h 30` runs it with torch.distributed (as OpenDiLoCo and PrimeIntellect's prime do); model "
        "only = predicted, nothing here runs it (why: above).",
    ),
    (
        "local-sgd H=",
        "local-sgd H=N = local SGD (DiLoCo): N inner steps per replica (a node, DDP inside; 'per-gpu': each "
        "GPU), then the pseudo-gradient all-reduced and an outer Nesterov step; P = fragments and overlap = "
        "inner steps an all-reduce runs behind (Streaming DiLoCo); fp16/int8/int4 = bits on the wire; fsdp = "
        "FSDP2 over the node's GPUs inside each replica (torchft's DiLoCo), added where DDP's replica does not "
        "fit. It "
        "changes the training algorithm: compared beside the pick (--local-sgd-h 0 hides it); its agreement "
        "is its loss at All-Reduce's tokens (Charles et al. 2025, Scaling Laws for DiLoCo).",
    ),
    (
        "util %",
        "util % = one GPU's forward + backward + optimizer over the iteration time (compute utilization, "
        "as DiLoCo's sources report it).",
    ),
    (
        "NIC MB/it",
        "NIC MB/it = bytes through the busiest NIC per iteration (All-Reduce: 2(n-1)/n of the message per "
        "rail; local SGD: the pseudo-gradient's every H steps).",
    ),
    (
        "no fit",
        "\u2717 no fit = does not fit in one GPU's memory (predicted peak over the GPU's memory: GiB/GPU, JSON "
        "`memory`): never picked.",
    ),
    (
        "GiB/GPU",
        "GiB/GPU = predicted peak memory per GPU (parameters, gradients, optimizer states, the method's own "
        "buffers, activations: JSON `memory.parts`); +act = activations not known (--activation-gib); "
        "\u2717 A/B = does not fit: A GiB needed of B, never picked.",
    ),
    (
        "zero2",
        "fsdp, zero2, zero1, hsdp = the All-Reduce family sharded, as large-model teams run it: FSDP2 "
        "fully_shard (ZeRO-3), fully_shard(reshard_after_forward=False) (ZeRO-2), DDP + "
        "ZeroRedundancyOptimizer (ZeRO-1), FSDP2 on a (node, GPU) mesh (HSDP: sharded in a node, replicated "
        "across nodes); where DDP does not fit, the verdict is against the fastest of them that fits.",
    ),
    (
        "AccumAdam",
        "AccumAdam = Decent-DP's Adam with gradient accumulation: `from decent_dp.optim import "
        "AccumAdam` (and `from decent_dp.ddp import DecentralizedDataParallel`); `import rtmodel_decentdp` "
        "too: without it decent_dp 0.2.3's AccumAdam fails its first step on torch 2.11.",
    ),
)
FACTORS_LEGEND = (
    "factors = ms of All-Reduce's time each factor removes (positive = gossip faster); they sum to the gap. "
    "uneven = what waiting only for the own group gains where exchanges differ by round or rank."
)
FACTOR_LABELS = ("overlap ms", "links ms", "variance ms", "uneven ms")


def _plain(console: Console, text: str, style: str | None = None) -> None:
    console.print(text, style=style, markup=False, highlight=False)


def _legend(console: Console, printed: str, margin: float | None = None) -> None:
    for word, line in LEGEND:
        if word in printed:
            _plain(console, line.format(margin=f"{margin or 0:.1%}"), "dim")


def wrap_words(words: list[str], width: int, join: str, cont: str, indent: str) -> list[str]:
    """Greedy fill of `words` into lines of at most `width`; every line but the last ends in `cont`."""
    lines, cur = [], ""
    for w in words:
        cand = w if not cur else cur + join + w
        if cur and cell_len(cand + cont) > width:
            lines.append(cur + cont)
            cur = indent + w
        else:
            cur = cand
    return [*lines, cur]


def code_lines(code: str, width: int) -> list[str]:
    """Python lines that stay valid when copied: comments on their own line, breaks after ', ' inside
    the call's parentheses."""
    out = []
    for line in code.splitlines():
        if cell_len(line) > width and "  # " in line:
            stmt, comment = line.split("  # ", 1)
            out.extend(wrap_words(f"# {comment}".split(" "), width, " ", "", "# "))
            line = stmt
        out.extend(
            wrap_words(line.split(", "), width, ", ", ",", "    ") if cell_len(line) > width else [line]
        )
    return out


def shell_lines(cmd: str, width: int) -> list[str]:
    """A command broken before its options with backslash continuations, so it still runs when copied."""
    if cell_len(cmd) <= width:
        return [cmd]
    words: list[str] = []
    for tok in cmd.split(" "):
        if words and words[-1].startswith("--") and " " not in words[-1] and not tok.startswith("-"):
            words[-1] += " " + tok  # an option with its value
        else:
            words.append(tok)
    return wrap_words(words, width, " ", " \\", "    ")


def _flagged(runs_on: str) -> Cell:
    """The "runs on" cell, in yellow when Decent-DP cannot run it (the reason is printed under the table)."""
    return Text(runs_on, style="yellow") if runs_on in (MODEL_ONLY, NOT_APPLICABLE) else runs_on


def _reason_lines(console: Console, entries: list[dict]) -> None:
    """Under the table, why each topology is not applicable or model only (entries: JSON predictions or
    topology rows; both carry topology, applicable, runs_on_decent_dp and reason)."""
    for e in entries:
        runs_on = runs_on_text(e)
        if runs_on in (MODEL_ONLY, NOT_APPLICABLE):
            _plain(console, f"{e['topology']}: {runs_on}: {e['reason']}", "yellow")


def _rest_of_columns(console: Console, headers: list[str], rows: list[list], dropped: list[str]) -> list[str]:
    """--verbose: the columns the table left out, as many more tables as the width needs, each led by
    the topology's name; returns what still did not fit (a column wider than the terminal)."""
    while dropped:
        keep = [0] + [headers.index(h) for h in dropped]
        cols = [TABLE_COLUMNS[i] for i in keep]
        table, still = fitted_table(
            console,
            "",
            [headers[i] for i in keep],
            [[r[i] for i in keep] for r in rows],
            [c.priority for c in cols],
            [not c.numeric for c in cols],
            [c.numeric for c in cols],
        )
        if set(still) == set(dropped):
            break
        console.print(table)
        dropped = still
    return dropped


def render_advice(
    advice: Advice, console: Console, header: str = "", verbose: bool = False, assumed=None
) -> None:
    """The human view: one row per topology, the verdict and the exact lines to run it, then where the
    numbers came from; the notes (a profile has dozens) only with `verbose`, else their count.
    `assumed` (assumptions.Assumptions of a preset answer): its line heads the table, its warnings follow
    the verdict."""
    sc = advice.scenario
    title = header or (
        f"{sc.shape.gpus} GPUs = {sc.shape.nodes} node{'' if sc.shape.nodes == 1 else 's'} x "
        f"{sc.shape.gpus_per_node}, network {sc.network.name}"
    )
    if measured := advice.provenance.get("measured"):
        title += f"; measured: {measured}"
    if assumed is not None:
        title += "\n" + assumed.line()
    entries = advice_to_dict(advice)["predictions"]
    headers = [c.label for c in TABLE_COLUMNS]
    rows = [[_flagged(col.table(e)) for col in TABLE_COLUMNS] for e in entries]
    table, dropped = fitted_table(
        console,
        title,
        headers,
        rows,
        [c.priority for c in TABLE_COLUMNS],
        [not c.numeric for c in TABLE_COLUMNS],
        [c.numeric for c in TABLE_COLUMNS],
    )
    console.print(table)
    printed = shown_text(headers, rows, dropped)
    if verbose:  # every column: those left out, in tables of their own beside the topology's name
        dropped = _rest_of_columns(console, headers, rows, dropped)
        printed += " " + " ".join(headers)
    _reason_lines(console, entries)
    print_dropped(console, dropped, "--format json or csv")
    rec = advice.recommendation
    _plain(console, rec.verdict, "yellow" if rec.too_close_to_call else "bold green")
    if (
        advice.tuned_ddp is not None and not advice.tuned_ddp.changes_verdict
    ):  # else the verdict leads with it
        _plain(console, advice.tuned_ddp.sentence())
    for note in [] if assumed is None else assumed.notes():  # the batch's warning is in the head line
        _plain(console, f"note: {note}", "yellow")
    if advice.crossovers:
        _plain(console, crossover_sentence(advice.crossovers))
        if settle := settle_line(advice):
            _plain(console, settle, "yellow")
    console.print("Run it with:")
    width = max(console.width, 20)
    for line in code_lines(rec.code_line, width) + shell_lines(rec.torchrun_line, width):
        _plain(console, line)
    if advice.family_verdict:
        _plain(console, advice.family_verdict, "bold")
    comp = sc.compute
    where = "" if comp.variation.is_iid else f"; {comp.variation.describe()}"  # where the stragglers sit
    if comp.step_spread is not None:  # drawn per rank and iteration (docs/accuracy.md)
        where += f"; optimizer sd {comp.step_spread.sd_s * 1e3:.2f} ms"
    _plain(
        console,
        f"compute per worker: forward {comp.forward_s * 1e3:.2f} ms, backward {comp.backward_s * 1e3:.2f} ms, "
        f"optimizer {comp.optimizer_s * 1e3:.2f} ms, {comp.distribution.describe()}{where}; "
        f"message {sc.buckets.message_bytes / MIB:.1f} MiB in {len(sc.buckets.gossip)} buckets",
    )
    if any(label not in dropped for label in FACTOR_LABELS):
        _plain(console, FACTORS_LEGEND, "dim")
    for k, v in advice.provenance.items():
        _plain(console, f"{k}: {v}", "dim")
    if verbose:
        for note in advice.notes:
            _plain(console, f"note: {note}", "dim")
    elif advice.notes:
        n = len(advice.notes)
        _plain(
            console,
            f"{n} note{'' if n == 1 else 's'} on the inputs: --verbose shows them (or --format json)",
            "dim",
        )
    _legend(console, printed + " " + rec.code_line, advice.margin)


def render_topologies(
    rows: list[dict], shape: ClusterShape, show_rounds: bool, console: Console | None = None
) -> None:
    console = console or terminal_console()
    headers = ["topology", "rounds/period", "group sizes", "consensus", "runs on", "description"]
    cells: list[list[Cell]] = []
    for r in rows:
        runs = _flagged(runs_on_text(r))
        if not r["applicable"]:
            cells.append([r["topology"], "", "", "", runs, r["description"]])
            continue
        cells.append(
            [
                r["topology"],
                str(r["period"]),
                ",".join(map(str, r["group_sizes"])),
                consensus_text(r),
                runs,
                r["description"],
            ]
        )
    table, dropped = fitted_table(
        console,
        f"Gossip schedules for n = {shape.gpus} ({shape.nodes} nodes x {shape.gpus_per_node})",
        headers,
        cells,
        [0, 2, 3, 1, 0, 4],
        [True, False, False, True, True, True],
        [False] * 6,
    )
    console.print(table)
    _reason_lines(console, rows)
    print_dropped(console, dropped, "--format json or csv")
    printed = shown_text(headers, cells, dropped)
    _legend(console, printed)
    if show_rounds:
        for r in rows:
            if r.get("rounds"):
                console.print(f"[bold]{r['topology']}[/]")
                for i, groups in enumerate(r["rounds"]):
                    _plain(console, f"  round {i}: {groups}")

"""One column list behind the advise table and CSV (as nccl-tests drives its output from one list).

Each column reads one prediction entry of `report.advice_to_dict` (the JSON's `predictions[]`), so the
JSON, the CSV and the table cannot disagree about a number. A column appears in the CSV under `name`
and in the table under `label`; either may be None (CSV only / table only). Values are formatted to
text here; the terminal's colours are the shell's business.

The terminal is as wide as it is: `fit_columns` picks the table columns that fit by `priority` (the
topology, its mean iteration time, speedup and what runs it always; then "vs best", consensus, p50/p99,
the factors) and the shell says which were left out; the JSON and CSV always have everything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _ms(value: float | None, spec: str) -> str:
    return "" if value is None else format(value * 1e3, spec)


MODEL_ONLY = "model only"  # the reason is printed under the table
NOT_APPLICABLE = "not applicable"  # likewise
EQUIVALENT_MARK = "\u2248 best"  # "~ best": mean within the advisor's margin of the best runnable mean


def _num(value: float) -> str:
    return f"{value:.4g}"


def consensus_text(entry: dict) -> str:
    """'exact every iteration' (All-Reduce), 'exact in R rounds' or the per-period contraction rho, then
    the worst single round's contraction ||W_r - J||_2 (see runtime_model.consensus)."""
    c = entry.get("consensus") or {}
    if entry["topology"] == "allreduce":
        return "exact every iteration"
    if not entry["applicable"]:
        return ""
    if c.get("exact_rounds"):
        r = c["exact_rounds"]
        head = f"exact in {r} round{'' if r == 1 else 's'}"
    elif c.get("rho") is not None:
        head = f"rho={_num(c['rho'])}/period"
    else:
        return "-"
    worst = c.get("worst_round_contraction")
    return head if worst is None else f"{head}, worst round {_num(worst)}"


def runs_on_text(entry: dict) -> str:
    """What can run it: PyTorch DDP, Decent-DP (built-in), Decent-DP + rtmodel (rtmodel registers the
    schedule with Decent-DP), or the model only (from Schedule.decent_dp_runnable, the one predicate)."""
    if entry["topology"] == "allreduce":
        return "PyTorch DDP"
    if not entry["applicable"]:
        return NOT_APPLICABLE
    if not entry.get("runs_on_decent_dp"):
        return MODEL_ONLY
    return "Decent-DP" if entry["decent_dp_builtin"] else "Decent-DP + rtmodel"


def vs_best_text(entry: dict) -> str:
    return {"best": "best", "equivalent": EQUIVALENT_MARK}.get(entry.get("vs_best") or "", "")


@dataclass(frozen=True)
class Column:
    name: str | None  # CSV header (None: table only)
    label: str | None  # table header (None: CSV only)
    csv_text: Callable[[dict], str]
    table_text: Callable[[dict], str] | None = None  # default: csv_text
    numeric: bool = True  # right-justified in the table, never wrapped
    priority: int = 0  # table: 0 = always shown; higher numbers are dropped first when the terminal is narrow

    def table(self, entry: dict) -> str:
        return (self.table_text or self.csv_text)(entry)


def _it(key: str, spec: str) -> Callable[[dict], str]:
    return lambda e: _ms((e.get("iteration_s") or {}).get(key), spec)


def _factor(key: str, spec: str) -> Callable[[dict], str]:
    return lambda e: _ms((e.get("factors") or {}).get(key), spec)


def _consensus_field(entry: dict, key: str, spec: str) -> str:
    value = (entry.get("consensus") or {}).get(key)
    return "" if value is None else format(value, spec)


def _speedup(spec: str, suffix: str = "") -> Callable[[dict], str]:
    return lambda e: (
        "" if e.get("speedup_vs_allreduce") is None else f"{e['speedup_vs_allreduce']:{spec}}{suffix}"
    )


ADVICE_COLUMNS: tuple[Column, ...] = (
    Column(
        "topology",
        "topology",
        lambda e: e["topology"],
        lambda e: "allreduce (DDP)" if e["topology"] == "allreduce" else e["topology"],
        numeric=False,
    ),
    Column("applicable", None, lambda e: str(e["applicable"]), numeric=False),
    Column("mean_ms", "mean ms", _it("mean", ".4f"), _it("mean", ".2f")),
    Column("p50_ms", "p50 ms", _it("p50", ".4f"), _it("p50", ".2f"), priority=3),
    Column("p99_ms", "p99 ms", _it("p99", ".4f"), _it("p99", ".2f"), priority=3),
    Column("speedup_vs_allreduce", "speedup", _speedup(".4f"), _speedup(".2f", "x")),
    Column(None, "vs best", vs_best_text, numeric=False, priority=1),
    Column("overlap_ms", "overlap ms", _factor("overlap_s", ".4f"), _factor("overlap_s", "+.2f"), priority=4),
    Column("links_ms", "links ms", _factor("links_s", ".4f"), _factor("links_s", "+.2f"), priority=4),
    Column(
        "variance_ms", "variance ms", _factor("variance_s", ".4f"), _factor("variance_s", "+.2f"), priority=4
    ),
    Column(None, "comm/iter ms", lambda e: _ms(e.get("comm_s"), ".2f"), priority=5),
    Column("exact_rounds", None, lambda e: _consensus_field(e, "exact_rounds", "")),
    Column("rho", None, lambda e: _consensus_field(e, "rho", ".6g")),
    Column(None, "consensus", consensus_text, numeric=False, priority=2),
    Column(None, "runs on", runs_on_text, numeric=False),
    Column("reason", None, lambda e: e.get("reason") or "", numeric=False),
    # added after `reason` so the earlier CSV columns keep their positions
    Column("worst_round_contraction", None, lambda e: _consensus_field(e, "worst_round_contraction", ".6g")),
    Column("tau_over_p", None, lambda e: _consensus_field(e, "tau_over_p", ".6g")),
    Column("vs_best", None, lambda e: e.get("vs_best") or "", numeric=False),
)
CSV_COLUMNS = tuple(c for c in ADVICE_COLUMNS if c.name is not None)
TABLE_COLUMNS = tuple(c for c in ADVICE_COLUMNS if c.label is not None)


# ---------------------------------------------------------------- fitting a table to the terminal


@dataclass(frozen=True)
class FitColumn:
    """One candidate column of a terminal table: its header, its cells (plain text) and how it may shrink."""

    header: str
    cells: tuple[str, ...]
    priority: int = 0  # 0 = always shown; higher = dropped first
    wrap: bool = True  # cells may wrap at spaces (headers always may); numbers should not


def _longest_word(text: str, text_len: Callable[[str], int]) -> int:
    return max((text_len(w) for w in text.split()), default=0)


def fit_columns(
    columns: list[FitColumn], width: int, text_len: Callable[[str], int] = len, comfortable_wrap: int = 20
) -> tuple[list[int], list[int], list[int]]:
    """Which columns fit `width` terminal cells, and how wide each is: (kept indices in their order, their
    widths, dropped indices).

    Nothing is cut mid-word: a column is never narrower than its longest word (its longest cell when it
    does not wrap). A column's comfortable width is its whole header and, when it wraps, its cells up to
    `comfortable_wrap`. Priority-0 columns are always kept; the others are added by priority while every
    kept column fits at its comfortable width. The spare width then widens the kept columns in priority
    order, first to comfortable, then to their natural (unwrapped) width. Layout of rich's default table:
    one border per column plus one, and a space either side of every cell.
    """

    def overhead(count: int) -> int:
        return 3 * count + 1

    lo, easy, hi = [], [], []
    for c in columns:
        cells = [text_len(x) for x in c.cells]
        words = [_longest_word(x, text_len) for x in c.cells] if c.wrap else cells
        lo.append(max([_longest_word(c.header, text_len), *words, 1]))
        hi.append(max([text_len(c.header), *cells, 1]))
        body = min(max(cells, default=0), comfortable_wrap) if c.wrap else max(cells, default=0)
        easy.append(max(lo[-1], text_len(c.header), body))
    order = sorted(range(len(columns)), key=lambda i: (columns[i].priority, i))
    kept = [i for i in order if columns[i].priority == 0]
    for i in order:
        if i not in kept and sum(easy[j] for j in kept) + easy[i] + overhead(len(kept) + 1) <= width:
            kept.append(i)
    kept.sort(key=order.index)
    spare = width - overhead(len(kept)) - sum(lo[i] for i in kept)
    widths = {i: lo[i] for i in kept}
    for target in (easy, hi):
        for i in kept:
            grow = max(0, min(spare, target[i] - widths[i]))
            widths[i] += grow
            spare -= grow
    shown = sorted(kept)
    return shown, [widths[i] for i in shown], [i for i in range(len(columns)) if i not in widths]

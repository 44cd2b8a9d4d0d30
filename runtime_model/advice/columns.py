"""One column list behind the advise table and CSV (as nccl-tests drives its output from one list).

Each column reads one prediction entry of `report.advice_to_dict` (the JSON's `predictions[]`), so the
JSON, the CSV and the table cannot disagree about a number. A column appears in the CSV under `name`
and in the table under `label`; either may be None (CSV only / table only). Values are formatted to
text here; the terminal's colours are the shell's business.

The terminal is as wide as it is: the shell (`rtmodel_cli.fitted_tables`) keeps the table columns that
fit by `priority` (the topology, its mean iteration time, speedup and what runs it always; then
"vs best", consensus, p50/p99, the factors) and says which were left out; the JSON and CSV always have
everything.
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
    the worst single round's contraction ||W_r - J||_2 (see runtime_model.convergence.consensus)."""
    c = entry.get("consensus") or {}
    if entry.get("local_sgd"):
        return f"averaged every {entry['local_sgd']['inner_steps']} steps"
    if entry["topology"] == "allreduce" or entry.get("family") == "all-reduce":
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
    schedule with Decent-DP), another gossip library (SGP, BlueFog), or the model only (from
    Schedule.decent_dp_runnable, the one predicate)."""
    if entry["topology"] == "allreduce" or entry.get("family") == "all-reduce":
        return entry.get("library") or "PyTorch DDP"
    if not entry["applicable"]:
        return NOT_APPLICABLE
    library = entry.get("library", "Decent-DP")
    if library != "Decent-DP":
        return library  # another library runs it (exchange.py); the advisor picks among Decent-DP's only
    if not entry.get("runs_on_decent_dp"):
        return MODEL_ONLY
    return "Decent-DP" if entry["decent_dp_builtin"] else "Decent-DP + rtmodel"


NO_FIT_MARK = "\u2717 no fit"  # a row that does not fit in one GPU's memory: never picked


def vs_best_text(entry: dict) -> str:
    """best / \u2248 best, or '\u2717 no fit' on a row that does not fit in one GPU's memory (shown in this
    narrow column, kept at every width, so a row that cannot run is marked however narrow the terminal)."""
    if (entry.get("memory") or {}).get("fits") is False:
        return NO_FIT_MARK
    return {"best": "best", "equivalent": EQUIVALENT_MARK}.get(entry.get("vs_best") or "", "")


NOT_FIT_MARK = "\u2717"  # in the GiB/GPU column: a row that does not fit (the legend says so)


def memory_table_text(entry: dict) -> str:
    """'12.3', '12.3+act' (activations not known), or '\u2717 61/40' (does not fit: 61 GiB of 40)."""
    m = entry.get("memory")
    if not m:
        return ""
    peak, cap = m["bytes"] / 2**30, m["capacity_bytes"] / 2**30
    if m["fits"] is False:
        return f"{NOT_FIT_MARK} {peak:.3g}/{cap:.3g}"
    return f"{peak:.3g}" + ("" if m["activations_known"] else "+act")


def _memory_field(key: str) -> Callable[[dict], str]:
    def text(entry: dict) -> str:
        m = entry.get("memory")
        if not m or m.get(key) is None:
            return ""
        return str(m[key]) if key == "fits" else f"{m[key] / 2**30:.6g}"

    return text


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


def _agreement_text(entry: dict) -> str:
    """The consensus class, and the time to All-Reduce's loss vs All-Reduce's where it is known
    ("measured 0.83x"; the legend says so)."""
    c = entry.get("convergence") or {}
    if not c:
        return ""
    known = c.get("time_to_loss_vs_allreduce")
    if c.get("loss_ratio") is not None:  # local SGD: its loss at All-Reduce's tokens
        return f"{c['kind']} {100 * (c['loss_ratio'] - 1):+.1f}% loss"
    return c["kind"] if known is None else f"{c['kind']} {known:.2f}x"


def _convergence_number(entry: dict, key: str) -> str:
    value = (entry.get("convergence") or {}).get(key)
    return "" if value is None else format(value, ".6g")


def _fraction(key: str, scale: float, spec: str) -> Callable[[dict], str]:
    return lambda e: "" if e.get(key) is None else format(e[key] * scale, spec)


def _speedup(spec: str, suffix: str = "") -> Callable[[dict], str]:
    return lambda e: (
        "" if e.get("speedup_vs_allreduce") is None else f"{e['speedup_vs_allreduce']:{spec}}{suffix}"
    )


def _crossover(quantity: str) -> Callable[[dict], str]:
    """The pick's crossover in `quantity` (crossover.py), on its own row only; blank elsewhere or where
    it wins (or loses) over the whole range searched."""

    def text(entry: dict) -> str:
        value = (entry.get("crossover") or {}).get(quantity)
        return "" if value is None else f"{value:.6g}"

    return text


ADVICE_COLUMNS: tuple[Column, ...] = (
    Column(
        "topology",
        "topology",
        lambda e: e["topology"],
        lambda e: "allreduce (DDP)" if e["topology"] == "allreduce" else e["topology"],  # fsdp, zero2: their names
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
    Column(
        "convergence",
        "agreement",
        lambda e: (e.get("convergence") or {}).get("kind", ""),
        _agreement_text,
        numeric=False,
        priority=1,
    ),
    Column("transient_ratio", None, lambda e: _convergence_number(e, "transient_ratio")),
    Column("time_to_loss_vs_allreduce", None, lambda e: _convergence_number(e, "time_to_loss_vs_allreduce")),
    Column("uneven_ms", "uneven ms", _factor("uneven_s", ".4f"), _factor("uneven_s", "+.2f"), priority=4),
    Column("family", None, lambda e: e.get("family", ""), numeric=False),
    Column(
        "compute_utilization",
        "util %",
        _fraction("compute_utilization", 1.0, ".4f"),
        _fraction("compute_utilization", 100.0, ".0f"),
        priority=2,
    ),
    Column(
        "nic_mb_per_iteration",
        "NIC MB/it",
        _fraction("nic_bytes_per_iteration", 1e-6, ".4f"),
        _fraction("nic_bytes_per_iteration", 1e-6, ".1f"),
        priority=3,
    ),
    Column("crossover_inter_bandwidth_gbit_s", None, _crossover("inter_bandwidth_gbit_s")),
    Column("crossover_compute_ms", None, _crossover("compute_ms")),
    Column("crossover_compute_cv", None, _crossover("compute_cv")),
    Column("memory_gib", "GiB/GPU", _memory_field("bytes"), memory_table_text, priority=3),
    Column("memory_fits", None, _memory_field("fits"), numeric=False),
)

CSV_COLUMNS = tuple(c for c in ADVICE_COLUMNS if c.name is not None)
TABLE_COLUMNS = tuple(c for c in ADVICE_COLUMNS if c.label is not None)

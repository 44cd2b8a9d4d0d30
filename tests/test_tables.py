"""Terminal tables fit the terminal: advise, topologies and validate at widths 60..200 — no line wider than
the console, no header cut mid-word, the key columns always there, legend lines only for words shown."""

from __future__ import annotations

import io
import re
import shlex

import pytest
from rich.cells import cell_len
from rich.console import Console

from rtmodel_cli.fitted_tables import FitColumn, fit_columns
from rtmodel_cli.tables import code_lines, render_advice, render_topologies, shell_lines
from runtime_model.advice.advisor import advise
from runtime_model.advice.columns import TABLE_COLUMNS
from runtime_model.advice.report import advice_to_dict, topology_rows
from runtime_model.core.scenario import ClusterShape
from runtime_model.presets import to_model as presets

WIDTHS = [60, 80, 100, 150, 200, 240]
KEY_LABELS = ("topology", "mean ms", "speedup", "runs on")


def _console(width: int) -> Console:
    return Console(width=width, record=True, file=io.StringIO(), color_system=None)


def _advice(n=64, k=None, margin=None, **kw):
    scenario = presets.scenario_from_choice(presets.resolve(presets.PresetRequest(n, gpus_per_node=k, **kw)))
    return advise(scenario) if margin is None else advise(scenario, margin=margin)


def _header_text(text: str) -> str:
    """The header rows of the first table: between its top border and the rule under the headers."""
    lines = text.splitlines()
    top = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("┡"))
    return "\n".join(lines[top + 1 : rule])


def _dropped(text: str) -> list[str]:
    m = re.search(r"not shown at this width: (.*?) \(widen", " ".join(text.split()))
    return m.group(1).split(", ") if m else []


def _check_fits(text: str, width: int) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= width, f"{cell_len(line)} > {width}: {line!r}"
    assert "…" not in text  # rich's mark for a cut


def _check_headers_whole(text: str, labels: list[str]) -> list[str]:
    """Every label is shown whole (its words, possibly wrapped at spaces) or named as left out."""
    header = _header_text(text)
    header_words = set(re.findall(r"[^\s┃│]+", header))
    dropped = _dropped(text)
    shown = []
    for label in labels:
        if label in dropped:
            continue
        assert set(label.split()) <= header_words, f"{label!r} cut or missing in\n{header}"
        shown.append(label)
    return shown


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(
    ("n", "k", "kw"), [(64, None, {}), (12, 4, {}), (6, 3, {"compute_cv": 0.2})], ids=["64", "12x4", "6x3"]
)
def test_advise_table_fits_every_width(width, n, k, kw):
    console = _console(width)
    render_advice(_advice(n, k, **kw), console)
    text = console.export_text()
    _check_fits(text, width)
    shown = _check_headers_whole(text, [c.label for c in TABLE_COLUMNS])
    assert set(KEY_LABELS) <= set(shown), shown
    if width >= 120:
        assert {"p50 ms", "p99 ms", "consensus", "vs best"} <= set(shown)
    if width >= 240:  # every column (local SGD's utilization and NIC bytes need 230)
        assert _dropped(text) == [] and "not shown at this width" not in text
    if width >= 80:
        assert "vs best" in shown
    assert "allreduce (DDP)" in text and "Run it with:" in text


def test_advise_at_80_shows_the_mean_and_says_what_it_left_out():
    console = _console(80)
    adv = _advice(64)
    render_advice(adv, console)
    text = console.export_text()
    flat = " ".join(text.split())
    for e in advice_to_dict(adv)["predictions"]:
        assert f"{e['iteration_s']['mean'] * 1e3:.2f}" in text  # the mean, which the advisor ranks on
    assert "not shown at this width" in flat and "--format json or csv" in flat
    assert "p50 ms" in _dropped(text)


def test_equivalent_topologies_are_marked_and_named_in_the_verdict():
    """ring is fastest; complete and alternating-exp-ring lie within the 20 % margin of it: inside the
    margin the best consensus (complete: an exact average, tau/p 1) is picked, the others named
    equivalent (the host-bound compute at 64 GPUs x 390 tokens makes the exchanges nearly free)."""
    adv = _advice(64, 8, margin=0.2)
    doc = advice_to_dict(adv)
    vs = {e["topology"]: e["vs_best"] for e in doc["predictions"]}
    means = {e["topology"]: e["iteration_s"]["mean"] for e in doc["predictions"] if e["iteration_s"]}
    runnable = {t: m for t, m in means.items() if t != "allreduce" and vs[t] in ("best", "equivalent")}
    assert means["ring"] == min(means[t] for t in runnable)
    assert all(m <= 1.2 * means["ring"] for m in runnable.values())
    assert {"complete", "alternating-exp-ring", "ring"} <= set(runnable)
    assert vs["complete"] == "best" and vs["ring"] == vs["alternating-exp-ring"] == "equivalent"
    assert doc["recommendation"]["topology"] == "complete"
    assert set(doc["recommendation"]["equivalent"]) == set(runnable) - {"complete"}
    assert f"fastest, ring at {means['ring'] * 1e3:.1f} ms): ring" in adv.recommendation.verdict
    assert "20.0% margin" in adv.recommendation.verdict
    console = _console(100)
    render_advice(adv, console)
    text = console.export_text()
    ring_line = next(ln for ln in text.splitlines() if "│ ring" in ln)
    assert "≈ best" in ring_line
    assert "≈ best = mean iteration time within the advisor's margin (20.0%)" in " ".join(text.split())


def test_nothing_equivalent_when_the_margin_is_zero():
    adv = advise(presets.scenario_from_choice(presets.resolve(presets.PresetRequest(64))), margin=0.0)
    assert adv.recommendation.equivalent == ()
    assert "equivalent" not in adv.recommendation.verdict
    vs = [e["vs_best"] for e in advice_to_dict(adv)["predictions"]]
    assert vs.count("best") == 1 and "equivalent" not in vs


def _legend_words(text: str) -> set[str]:
    flat = " ".join(text.split())
    found = {
        "rho": "rho = consensus contraction factor per period" in flat,
        "exact": "exact in N rounds = the average is reached exactly" in flat,
        "worst": "worst round = max over single rounds" in flat,
        "runs on": "runs on = what runs it" in flat,
        "AccumAdam": "from decent_dp.optim import AccumAdam" in flat,
        "equiv": "≈ best = " in flat,
    }
    return {k for k, v in found.items() if v}


def test_legend_lines_only_for_words_that_appear():
    wide, narrow = _console(200), _console(80)
    adv = _advice(64, 8, margin=0.2)
    render_advice(adv, wide)
    render_advice(adv, narrow)
    assert _legend_words(wide.export_text()) == {"rho", "exact", "worst", "runs on", "AccumAdam", "equiv"}
    assert _legend_words(narrow.export_text()) == {"runs on", "AccumAdam", "equiv"}  # consensus left out
    only_exact = _console(200)
    render_advice(
        advise(
            presets.scenario_from_choice(presets.resolve(presets.PresetRequest(64))),
            topologies=["one-peer-exp"],
        ),
        only_exact,
    )
    words = _legend_words(only_exact.export_text())
    assert "rho" not in words and {"exact", "worst"} <= words  # no rho= printed, so no rho legend


def test_accumadam_legend_import_is_real():
    """The legend's import line names what decent_dp really ships (read from site-packages, no torch import)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("decent_dp")
    if spec is None:
        pytest.skip("decent_dp is not installed")
    root = Path(spec.submodule_search_locations[0])
    assert re.search(r"^class AccumAdam\(", (root / "optim.py").read_text(), re.M)
    assert re.search(r"^class DecentralizedDataParallel\(", (root / "ddp.py").read_text(), re.M)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("n", "k"), [(6, 3), (16, 4), (64, 8)])
def test_topologies_table_fits_every_width(width, n, k):
    shape = ClusterShape(n, k)
    console = _console(width)
    render_topologies(topology_rows(shape), shape, False, console)
    text = console.export_text()
    _check_fits(text, width)
    labels = ["topology", "rounds/period", "group sizes", "consensus", "runs on", "description"]
    shown = _check_headers_whole(text, labels)
    assert {"topology", "runs on"} <= set(shown)
    if width >= 100:
        assert "consensus" in shown


def test_topologies_table_says_model_only_like_advise():
    """6 GPUs as 2 x 3: base-2 has 1-rank groups, so both tables say "model only" with the same reason
    (once called "registered by rtmodel" in `rtmodel topologies`); static-exp says BlueFog runs it."""
    shape = ClusterShape(6, 3)
    rows = {r["topology"]: r for r in topology_rows(shape)}
    topo_console, adv_console = _console(100), _console(100)
    render_topologies(list(rows.values()), shape, False, topo_console)
    render_advice(_advice(6, 3), adv_console)
    topo_text, adv_text = topo_console.export_text(), adv_console.export_text()
    assert "registered by rtmodel" not in topo_text
    for text in (topo_text, adv_text):
        row = next(ln for ln in text.splitlines() if ln.startswith("│ base-2 "))
        assert "model only" in row
        assert f"base-2: model only: {rows['base-2']['reason']}" in " ".join(text.split())
        # static-exp is BlueFog's graph: the table names what runs it, and no reason line is needed
        row = next(ln for ln in text.splitlines() if ln.startswith("│ static-exp "))
        assert "BlueFog" in row and "static-exp: model only" not in " ".join(text.split())


def test_code_and_shell_lines_stay_runnable_when_wrapped():
    code = (
        "import rtmodel_decentdp  # registers rtmodel's schedules with Decent-DP\n"
        'model = DecentralizedDataParallel(model, optim_fn=lambda p: AccumAdam(p, lr=1e-3), topology="base-2")'
    )
    for width in (40, 60, 80):
        lines = code_lines(code, width)
        assert all(len(ln) <= width for ln in lines), lines
        compile("\n".join(lines), "<wrapped>", "exec")  # still valid Python
    cmd = "torchrun --nnodes 8 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 train.py"
    for width in (40, 60, 80):
        lines = shell_lines(cmd, width)
        assert all(len(ln) <= width for ln in lines), lines
        joined = " ".join(ln.removesuffix(" \\").strip() for ln in lines)
        assert shlex.split(joined) == shlex.split(cmd)
    assert shell_lines(cmd, 200) == [cmd]


def test_fit_columns_priorities_and_minimums():
    cols = [
        FitColumn("name", ("alternating-exp-ring",), 0),
        FitColumn("mean ms", ("937.11",), 0, wrap=False),
        FitColumn("extra wide column", ("x" * 30,), 5, wrap=False),
        FitColumn("note", ("a few words here",), 1),
    ]
    shown, widths, dropped = fit_columns(cols, 60)
    assert shown == [0, 1, 3] and dropped == [2]
    assert sum(widths) + 3 * len(shown) + 1 <= 60
    assert widths[0] >= 20 and widths[1] >= 7  # never below the longest word / the whole header
    shown, widths, dropped = fit_columns(cols, 200)
    assert dropped == [] and widths == [20, 7, 30, 16]


def _validation_result():
    from rtmodel_validation.analysis import compare, measure, verdict
    from rtmodel_validation.record_parts import ConsensusDistance, RecordWorkload
    from rtmodel_validation.results import ValidationResult
    from runtime_model.core.scenario import ClusterShape as Shape
    from runtime_model.prediction.iteration import IterationPrediction

    def pred(mean):
        return IterationPrediction("test", mean, mean * 0.98, mean * 1.3, 0.0, 0.0, 0.0, 0.0)

    ar = compare("allreduce", pred(0.1133), measure([[0.11, 0.12], [0.115, 0.112]]))
    topo = compare("alternating-exp-ring", pred(0.0822), measure([[0.08, 0.09], [0.085, 0.081]]))
    return ValidationResult(
        timestamp_utc="2026-01-01T00:00:00Z",
        profile="p.json",
        shape=Shape(4, 2),
        topology="alternating-exp-ring",
        decent_dp_topology="alternating-exp-ring",
        recommended=False,
        workload=RecordWorkload("synthetic", {}, 8, 25.0),
        iterations=20,
        warmup=5,
        allreduce=ar,
        decentralized=topo,
        verdict=verdict(ar, topo),
        distance_to_consensus=ConsensusDistance.of([0.0] * 4),
        ranks=[],
        device="cpu",
        backend="gloo",
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_validate_result_and_summary_fit_every_width(width):
    from pathlib import Path

    from rtmodel_cli.validation_tables import render_result, render_summary
    from rtmodel_validation.results import summarise_results

    console = _console(width)
    render_result(_validation_result(), console)
    text = console.export_text()
    _check_fits(text, width)
    labels = [
        "run",
        "predicted mean",
        "measured mean",
        "error",
        "predicted p50",
        "measured p50",
        "measured p90",
        "rank spread",
    ]
    shown = _check_headers_whole(text, labels)
    assert {"run", "predicted mean", "measured mean", "error"} <= set(shown)
    if width >= 150:
        assert shown == labels
    examples = Path(__file__).parent.parent / "notebooks" / "data" / "example_validations.jsonl"
    console = _console(width)
    render_summary(summarise_results(examples), console)
    text = console.export_text()
    _check_fits(text, width)
    assert {"run", "n", "mean |error|"} <= set(
        _check_headers_whole(text, ["run", "n", "mean |error|", "max |error|", "mean signed error"])
    )


def test_a_too_close_verdict_marks_its_candidate_best_not_a_slower_all_reduce():
    """Too close to call at 1.3x (a 40 % margin): All-Reduce is kept, but the row marked best is the candidate the verdict
    names, never All-Reduce beyond the margin of the rows marked equivalent (issue 64)."""
    adv = _advice(8, 8, margin=0.4)
    rec = adv.recommendation
    assert rec.too_close_to_call and rec.topology == "allreduce"
    doc = advice_to_dict(adv)
    vs = {e["topology"]: e["vs_best"] for e in doc["predictions"]}
    assert vs[rec.candidate] == "best" and list(vs.values()).count("best") == 1
    means = {e["topology"]: e["iteration_s"]["mean"] for e in doc["predictions"] if e["iteration_s"]}
    if vs["allreduce"] is not None:
        assert means["allreduce"] <= (1 + adv.margin) * min(means.values())
    assert doc["recommendation"]["equivalent"] == [t for t, v in vs.items() if v == "equivalent"]
    console = _console(240)
    render_advice(adv, console)
    line = next(ln for ln in console.export_text().splitlines() if ln.startswith(f"│ {rec.candidate} "))
    assert "│ best " in line

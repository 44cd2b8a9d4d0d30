"""Every view of one answer names the same option (issue 64 C): the table's "vs best" marks, the verdict,
"Where it flips", --brief and the JSON's recommendation and crossover fields.

Why: with All-Reduce kept by a too-close verdict, the table marked All-Reduce "best" while 35 % slower
than rows marked "≈ best", and the verdict named `complete` while "Where it flips" spoke of `ring`. The
option a verdict names is the pick, or a too-close verdict's candidate (crossover.named_option); "best"
marks it wherever it is equivalent to the fastest row, else the fastest row.
"""

from __future__ import annotations

import io
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli_helpers import advise_json, run
from tests.nccl_tests_text import nccl_tests_output

SIZES = [(1 << 20) << i for i in range(11)]  # 1 MiB .. 1 GiB
LOGS = {  # (ranks, hosts, fixed us, GB/s): an EFA pair of one-GPU nodes, a Kubernetes pair of DGX nodes
    "efa_2x1.txt": (2, 2, 60.0, 12.0),
    "k8s_2x8.txt": (16, 2, 80.0, 20.0),
}
SCENARIOS = [
    ["--gpus", "64"],  # presets: a pick among equivalents by consensus
    ["--gpus", "16", "--gpus-per-node", "4", "--topologies", "alternating-exp-ring"],
    ["--gpus", "8", "--gpus-per-node", "8"],  # presets: too close to call
    ["--gpus", "64", "--objective", "accuracy"],
    "--gpus 16 --gpu T4 --gpus-per-node 1 --ddp-bucket-view --nccl-tests efa_2x1.txt".split(),
    ["--cluster", "dgx-h100", "--gpus", "16", "--nccl-tests", "k8s_2x8.txt"],  # DDP tuned first
    ["--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "1000000"],  # tuned DDP, verdict holds
]


@pytest.fixture(scope="module")
def logs():
    with tempfile.TemporaryDirectory() as tmp:
        for name, (ranks, hosts, fixed_us, gbyte_s) in LOGS.items():
            times = {s: fixed_us + s / (gbyte_s * 1e3) for s in SIZES}
            (Path(tmp) / name).write_text(nccl_tests_output(times, ranks, hosts))
        yield Path(tmp)


def _named(doc: dict) -> str:
    """The option the JSON's recommendation names: its candidate when too close to call, else the pick."""
    rec = doc["recommendation"]
    return rec["candidate"] if rec["too_close_to_call"] and rec["candidate"] else rec["topology"]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _table_marks(text: str) -> dict[str, str]:
    """topology -> its "vs best" cell, read from the first table (rows that wrap continue without a name)."""
    lines = text.splitlines()
    header = next(ln for ln in lines if ln.startswith("┃") and "topology" in ln)
    col = [c.strip() for c in header.split("┃")].index("vs best")
    marks = {}
    for ln in lines:
        cells = [c.strip() for c in ln.split("│")]
        if ln.startswith("│") and cells[1]:
            marks[cells[1].split(" ")[0]] = cells[col]
    return marks


def _verdict_names(text: str) -> str | None:
    """The option the printed verdict names ("Use X:", "Too close to call: X is"), None when it keeps
    All-Reduce outright."""
    m = re.search(r"(?:Use (\S+?):|Too close to call: (\S+) is predicted)", _flat(text))
    return None if m is None else m.group(1) or m.group(2)


def _flips_for(text: str) -> str | None:
    m = re.search(r"Where it flips: (\S+) beats All-Reduce", _flat(text))
    return None if m is None else m.group(1)


def _brief_marked(lines: list[str]) -> str | None:
    marked = [ln.split()[0] for ln in lines if ln.endswith(("<- pick", "<- validate"))]
    assert len(marked) <= 1, lines
    return marked[0] if marked else None


def _check_json(doc: dict) -> str:
    """The JSON agrees with itself; returns the crossover's option (the named one, or with All-Reduce
    kept outright the best gossip option its verdict weighs)."""
    named = _named(doc)
    entries = {e["topology"]: e for e in doc["predictions"] if e.get("iteration_s")}
    marks = {t: e.get("vs_best") for t, e in entries.items()}
    best = [t for t, m in marks.items() if m == "best"]
    assert len(best) == 1, marks
    assert marks[named] in (None, "best"), marks  # the named option is never merely "≈ best"
    mean = {t: e["iteration_s"]["mean"] for t, e in entries.items()}
    marked = [t for t, m in marks.items() if m in ("best", "equivalent")]
    assert mean[best[0]] <= (1 + doc["margin"]) * min(mean[t] for t in marked) * (1 + 1e-9)
    assert doc["recommendation"]["equivalent"] == [t for t, m in marks.items() if m == "equivalent"]
    flips = {c["topology"] for c in doc.get("crossover", [])}
    if named != "allreduce":
        assert flips <= {named}
    assert len(flips) <= 1
    return next(iter(flips), named)


@pytest.mark.parametrize("args", SCENARIOS, ids=" ".join)
def test_the_table_brief_and_json_name_one_option(args, logs):
    args = [str(logs / a) if a in LOGS else a for a in args]
    doc = advise_json(*args)
    named, flips = _named(doc), _check_json(doc)
    table = run("advise", *args, env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    marks = _table_marks(table.stdout)
    assert [t for t, m in marks.items() if m == "best"] == [
        e["topology"] for e in doc["predictions"] if e.get("vs_best") == "best"
    ]
    assert _verdict_names(table.stdout) == (None if named == "allreduce" else named)
    assert _flips_for(table.stdout) == (flips if doc.get("crossover") else None)
    brief = run("advise", *args, "--brief", env={"COLUMNS": "80"})
    assert brief.exit_code == 0, brief.output
    lines = brief.stdout.splitlines()
    assert _brief_marked(lines) == (None if named == "allreduce" else named)
    if named != "allreduce":
        assert named in _flat(" ".join(lines[:3]))


def _rendered(adv) -> tuple[dict, str, list[str]]:
    """(JSON document, table text, brief lines) of an advice, rendered in-process."""
    from rtmodel_cli.brief import brief_lines
    from rtmodel_cli.tables import render_advice
    from runtime_model.advice.report import advice_to_dict

    console = Console(width=250, record=True, file=io.StringIO(), color_system=None)
    render_advice(adv, console)
    return advice_to_dict(adv), console.export_text(), brief_lines(adv, 80)


def _gossip_overhead(overhead: float, margin: float):
    """16 GPUs = 4 nodes x 4 whose Decent-DP compute costs `overhead` x DDP's, advised with `margin`."""
    from runtime_model.advice.advisor import advise
    from runtime_model.advice.crossover import with_crossovers
    from tests.helpers import scenario

    sc = scenario(n=16, k=4, sd=0.0)
    measured = replace(sc.network.inter, source="nccl-tests run.txt")  # no preset's doubt to weigh
    sc = replace(sc, gossip_compute=sc.compute.scaled(overhead), network=replace(sc.network, inter=measured))
    return with_crossovers(advise(sc, margin=margin, topologies=["alternating-exp-ring", "ring"]))


def test_all_reduce_kept_outright_is_best_and_the_crossover_is_the_option_its_verdict_weighs():
    adv = _gossip_overhead(1.6, 0.02)
    rec = adv.recommendation
    assert rec.topology == "allreduce" and not rec.too_close_to_call
    doc, table, brief = _rendered(adv)
    flips = _check_json(doc)
    assert f"best decentralized topology ({flips})" in rec.verdict
    assert _table_marks(table)["allreduce"] == "best" and _flips_for(table) == flips
    assert _brief_marked(brief) is None


def test_a_too_close_candidate_slower_than_all_reduce_leaves_best_on_the_fastest():
    """Too close to call at < 1x with the candidate beyond the equivalence margin: "best" stays on All-Reduce
    (the fastest), the candidate unmarked there, yet the verdict, crossover and --brief name the candidate."""
    adv = _gossip_overhead(1.6, 0.02)
    row = next(r for r in adv.rows if r.topology == adv.crossovers[0].topology)
    too_close = replace(adv.recommendation, too_close_to_call=True, candidate=row.topology)
    adv = replace(adv, recommendation=too_close)
    doc, table, brief = _rendered(adv)
    assert _check_json(doc) == row.topology
    assert _table_marks(table)["allreduce"] == "best" and _table_marks(table)[row.topology] == ""
    assert _brief_marked(brief) == row.topology and _flips_for(table) == row.topology


@pytest.mark.parametrize("args", [SCENARIOS[0], SCENARIOS[4], SCENARIOS[5]], ids=" ".join)
def test_the_crossover_plots_data_names_the_option_advise_names(args, logs, tmp_path):
    """`rtmodel plot crossover --data` draws advise's own answer (tuned DDP included): its curve is for the
    option the JSON's crossover is for, at advise's speedup at this cluster's bandwidth."""
    import csv

    args = [str(logs / a) if a in LOGS else a for a in args]
    doc = advise_json(*args)
    plot_args = [a for a in args if a not in ("--topologies",)]
    made = run("plot", "crossover", *plot_args, "--out", tmp_path / "x.png", "--data", tmp_path / "x.csv")
    assert made.exit_code == 0, made.output
    rows = list(csv.DictReader((tmp_path / "x.csv").open()))
    curve = {r["topology"] for r in rows if r["kind"] == "curve"}
    network = [c for c in doc.get("crossover", []) if c.get("quantity", "").startswith("inter")]
    assert curve == {network[0]["topology"] if network else _named(doc)}

"""Refactors must not move a prediction: `advise --format json` for recorded scenarios equals the
baseline recorded before the change (tests/data/advise_baseline/, up to float rounding).

Added keys pass (the schema promises fields are only ever added); re-record only when a model change is
intended, or a recorded value is meant to change, and say so in the commit:
    while IFS='|' read name args; do rtmodel advise $args --format json > tests/data/advise_baseline/$name.json; done \
        < tests/data/advise_baseline/scenarios.txt
    rtmodel advise --gpus 64 --format csv > tests/data/advise_baseline/default.csv
Then diff old against new: for an addition, every old key keeps its value and every old CSV column its
position and text. Each re-recording's reasons are in its commit message (`git log -p --
tests/data/advise_baseline`), not here.
"""

import csv
import io
import json
import math
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app

BASELINE = Path(__file__).parent / "data" / "advise_baseline"
ROOT = Path(__file__).parent.parent
SCENARIOS = [
    line.split("|", 1) for line in (BASELINE / "scenarios.txt").read_text().splitlines() if line.strip()
]


def assert_same(got, want, where="$"):
    if isinstance(want, float) and isinstance(got, int | float):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15), f"{where}: {got} != {want}"
    elif isinstance(want, dict):
        # the advice schema promises fields are only ever added: every recorded key keeps its value
        assert isinstance(got, dict) and set(want) <= set(got), (
            f"{where}: keys {sorted(set(want) - set(got))} gone"
        )
        for k in want:
            assert_same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: length differs"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize(("name", "args"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_advise_json_matches_recorded_baseline(name, args, monkeypatch):
    monkeypatch.chdir(ROOT)  # profile paths in the scenarios are relative to the repository root
    res = CliRunner().invoke(app, ["advise", *shlex.split(args), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert_same(json.loads(res.stdout), json.loads((BASELINE / f"{name}.json").read_text()))


def assert_csv_extends(got: str, want: str) -> None:
    """Every recorded row is still there, in order, and every recorded column keeps its position and its
    text (the table's formatting is part of the CSV); columns added after the recorded ones pass."""
    got_rows, want_rows = (list(csv.reader(io.StringIO(text))) for text in (got, want))
    assert len(got_rows) == len(want_rows), f"{len(got_rows)} rows, recorded {len(want_rows)}"
    for i, (g, w) in enumerate(zip(got_rows, want_rows, strict=True)):
        assert g[: len(w)] == w, f"row {i}: {g[: len(w)]} != {w}"


def test_advise_csv_matches_recorded_baseline():
    """The CSV is drawn from the same column list as the table: the recorded default run, column by column."""
    res = CliRunner().invoke(app, ["advise", "--gpus", "64", "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert_csv_extends(res.stdout, (BASELINE / "default.csv").read_text())


def test_the_comparisons_pass_additions_and_catch_changes():
    """The schema only ever adds: an added key or trailing column passes, a changed or lost one fails."""
    want = {"a": 1.0, "rows": [{"t": "ring", "ms": 2.5}]}
    assert_same({"a": 1.0 + 1e-12, "new": 3, "rows": [{"t": "ring", "ms": 2.5, "extra": None}]}, want)
    for broken in ({"rows": want["rows"]}, {**want, "a": 1.1}, {**want, "rows": [{"t": "ring", "ms": 2.6}]}):
        with pytest.raises(AssertionError):
            assert_same(broken, want)
    assert_csv_extends("x,y,new\n1,2,3\n", "x,y\n1,2\n")
    for broken in ("y,x\n2,1\n", "x,y\n1,2\n3,4\n", "new,x,y\n3,1,2\n", "x,y\n1,2.0\n"):
        with pytest.raises(AssertionError):
            assert_csv_extends(broken, "x,y\n1,2\n")

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


def test_advise_csv_matches_recorded_baseline():
    """The CSV is drawn from the same column list as the table: the recorded default run, byte for byte."""
    res = CliRunner().invoke(app, ["advise", "--gpus", "64", "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert res.stdout == (BASELINE / "default.csv").read_text()

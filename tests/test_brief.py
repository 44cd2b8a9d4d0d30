"""`advise --brief` (issue 50): the answer a user acts on in at most 15 lines at 80 columns, agreeing
with the full answer's pick."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.cli_helpers import advise_json, run

PROFILE = Path(__file__).resolve().parent / "data" / "synthetic_profile_2x2.json"
SCENARIOS = [
    ["--gpus", "64"],
    ["--gpus", "8", "--gpus-per-node", "8"],
    ["--gpus", "32", "--network", "tcp-25g"],
    ["--gpus", "2", "--gpus-per-node", "1", "--network", "tcp-10g"],
    ["--gpus", "64", "--objective", "accuracy"],
    ["--gpus", "4096", "--network", "tcp-25g", "--global-batch", "1000000"],
    ["--profile", str(PROFILE)],
]


@pytest.mark.parametrize("args", SCENARIOS, ids=" ".join)
def test_the_brief_answer_fits_15_lines_of_80_columns_and_names_the_pick(args):
    res = run("advise", *args, "--brief", env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.stdout.rstrip("\n").splitlines()
    assert len(lines) <= 15 and max(cell_len(line) for line in lines) <= 80, res.stdout
    pick = advise_json(*args)["recommendation"]
    name = pick["candidate"] if pick["too_close_to_call"] and pick["candidate"] else pick["topology"]
    assert name in lines[0] + " " + lines[1] or name == "allreduce"
    assert "Run it with:" in lines and any(line.startswith("torchrun ") for line in lines)
    if pick["topology"] not in ("allreduce",) and not pick["too_close_to_call"]:
        assert any(line.strip().startswith(pick["topology"]) and line.endswith("<- pick") for line in lines)


def test_brief_is_refused_beside_verbose_or_another_format():
    for extra in (["--verbose"], ["--format", "json"]):
        res = run("advise", "--brief", *extra)
        assert res.exit_code == 2 and res.stderr.strip().startswith(
            "error: --brief is the table view's short form"
        )


@pytest.mark.parametrize("width", [60, 72])
def test_a_brief_that_must_shorten_keeps_the_row_it_names(width):
    """Narrow terminals wrap the verdict onto more lines and rows are dropped to keep 15: never the row the
    verdict names (a too-close verdict's candidate here), the others first."""
    args = ["--gpus", "8", "--gpus-per-node", "8"]
    rec = advise_json(*args)["recommendation"]
    assert rec["too_close_to_call"] and rec["candidate"]
    res = run("advise", *args, "--brief", env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    lines = res.stdout.rstrip("\n").splitlines()
    assert len(lines) <= 15
    marked = [ln.split()[0] for ln in lines if ln.endswith("<- validate")]
    assert marked == [rec["candidate"]]

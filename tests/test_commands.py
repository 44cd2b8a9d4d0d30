"""Every registered command, every --format: help works, output parses, and a bad input is one line.

Walks the app itself, so a new command is covered (and must add a bad-input case below) without
anyone remembering to add it here.
"""

import csv
import io
import json
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from rtmodel_cli.app import app

ROOT = Path(__file__).parent.parent
PROFILE = str(ROOT / "tests" / "data" / "synthetic_profile_2x2.json")
RESULTS = str(ROOT / "benchmarks" / "results" / "runs" / "2x2-1000mbit-0.5ms.validations.jsonl")
runner = CliRunner()


def commands(group=None, prefix=()):
    group = group or typer.main.get_command(app)
    for name, sub in group.commands.items():
        if hasattr(sub, "commands"):
            yield from commands(sub, prefix + (name,))
        else:
            yield prefix + (name,), sub


COMMANDS = dict(commands())

# A small run for each command that has --format (offline, seconds).
FORMAT_RUNS = {
    ("advise",): ["--gpus", "16", "--gpus-per-node", "4"],
    ("topologies",): ["--gpus", "8", "--gpus-per-node", "2"],
    ("presets",): ["--kind", "clusters"],
    ("calibrate",): [PROFILE],
    ("validate",): ["--report", "--results", RESULTS],
}

# One bad input per command: each must end as exit 2 with one "error:" line on stderr.
BAD_INPUT = {
    ("advise",): ["--gpus", "0"],
    ("topologies",): ["--gpus", "12", "--gpus-per-node", "5"],
    ("presets",): ["--kind", "routers"],
    ("profile",): ["--out", "p.json", "--iterations", "0"],
    ("calibrate",): ["/nonexistent/profile.json"],
    ("validate",): ["--format", "yaml", "--report"],
    ("emulate", "up"): ["--nodes", "0"],
    ("emulate", "run"): ["--nodes", "0", "--", "true"],
    ("emulate", "cleanup"): ["--no-such-flag"],
    ("emulate", "measure"): ["--no-such-flag"],
    ("plot", "speedup"): ["--out", "figure.txt"],
    ("plot", "factors"): ["--out", "f.png", "--gpus-range", "abc"],
    ("plot", "what-if"): ["--out", "f.png", "--gpus-range", "0:4"],
    ("plot", "variance"): ["--out", "f.png", "--straggler", "0.5"],
    ("plot", "crossover"): ["--out", "f.png", "--nccl-tests", "/nonexistent/all_reduce.txt"],
    ("plot", "paper"): ["--out", "paper.pdf"],
    ("plot", "parity"): ["--out", "p.png", "--results", "/nonexistent/v.jsonl"],
}


def formats_of(command) -> list[str]:
    """The values --format takes: every command's help for it is the list "a | b | c"."""
    for param in command.params:
        if "--format" in param.opts:
            return [f.strip() for f in param.help.split("|")]
    return []


@pytest.mark.parametrize("path", list(COMMANDS), ids=" ".join)
def test_help_works(path):
    res = runner.invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage" in res.output


def test_every_command_has_a_bad_input_case_and_every_format_command_a_run():
    assert set(BAD_INPUT) == set(COMMANDS)
    assert {p for p, c in COMMANDS.items() if formats_of(c)} == set(FORMAT_RUNS)


@pytest.mark.parametrize(
    ("path", "fmt"), [(p, f) for p in FORMAT_RUNS for f in formats_of(COMMANDS[p])], ids=lambda v: str(v)
)
def test_output_parses_in_every_format(path, fmt):
    res = runner.invoke(app, [*path, *FORMAT_RUNS[path], "--format", fmt])
    assert res.exit_code == 0, res.output
    out = res.stdout
    if fmt == "json":
        assert json.loads(out)
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(out)))
        assert len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows), out
    else:
        assert out.strip() and "Traceback" not in out


@pytest.mark.parametrize("path", list(BAD_INPUT), ids=" ".join)
def test_bad_input_is_one_line_and_exit_2(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, [*path, *BAD_INPUT[path]])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert not any(tmp_path.iterdir()), "a failed command wrote files"


@pytest.mark.parametrize("path", [("advise",), ("calibrate",), ("plot", "factors")], ids=" ".join)
def test_debug_env_adds_the_traceback_and_keeps_the_exit_code(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, [*path, *BAD_INPUT[path]], env={"RTMODEL_DEBUG": "1"})
    assert res.exit_code == 2
    assert "Traceback" in res.stderr and res.stderr.strip().splitlines()[-1].startswith("error: ")


def test_a_bug_is_not_dressed_as_a_user_error(monkeypatch):
    """Only rtmodel's own errors and OSError become one line; anything else keeps its traceback."""
    import runtime_model.advice.advisor as advisor

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(advisor, "advise", broken)
    res = runner.invoke(app, ["advise", "--gpus", "8"])
    assert res.exit_code == 1 and isinstance(res.exception, KeyError)

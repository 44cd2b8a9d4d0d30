"""What a newcomer meets first: any terminal prints the answer, --version, help that states the real
defaults, and rtmodel's own code even where the user's folders share its package names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_cli.terminal import MIN_COLUMNS, usable_columns

ROOT = Path(__file__).parent.parent


def rtmodel(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """The installed `rtmodel` script, as a user runs it, in a fresh process."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "rtmodel"), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        cwd=cwd,
        env={**os.environ, **env},
        timeout=300,
    )


@pytest.mark.parametrize(
    "value, seen",
    [(None, None), ("0", None), ("-3", None), ("abc", None), ("5", str(MIN_COLUMNS)), ("120", "120")],
)
def test_columns_rich_can_use(value, seen):
    assert usable_columns(value) == seen


@pytest.mark.parametrize("columns", ["0", "5", "abc"])
def test_any_columns_value_prints_the_table(columns):
    res = CliRunner().invoke(app, ["advise"], env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    assert "allreduce" in res.stdout and "one-peer-exp" in res.stdout
    # not one word per line: a narrow terminal still gets several words on each (at 40 columns, ~5)
    assert len(res.stdout.split()) > 4 * len(res.stdout.splitlines())


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_an_encoding_without_the_outputs_characters_still_prints_it(encoding):
    res = rtmodel("advise", PYTHONIOENCODING=encoding)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "allreduce" in res.stdout


def test_version_is_the_distributions():
    from importlib.metadata import version

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.stdout.strip() == f"rtmodel {version('rtmodel-advisor')}"


def test_help_states_the_gpus_per_node_default_advise_uses():
    import json

    res = CliRunner().invoke(app, ["advise", "--help"], env={"COLUMNS": "300"})
    k = json.loads(CliRunner().invoke(app, ["advise", "--gpus", "64", "--format", "json"]).stdout)["inputs"][
        "gpus_per_node"
    ]
    assert f"else {k}, capped at n" in " ".join(res.stdout.split())  # wherever the help wraps


def test_help_comes_in_panels_with_the_common_options_first_and_whole_flag_names():
    """At 80 columns: panels in help_panels.PANELS' order, Common first with --gpus and --cluster, the
    details after the measurements; no flag name cut, no line past 80 columns."""
    from rtmodel_cli.help_panels import OTHER, PANELS

    out = CliRunner().invoke(app, ["advise", "--help"], env={"COLUMNS": "80"}).stdout
    headers = [line[:-1] for line in out.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert headers == [p for p in (*PANELS, OTHER) if p in headers] and headers[0] == "Common"
    assert {"Your measurements (in place of the presets)", "Local SGD (DiLoCo)"} <= set(headers)
    common = out.split("Common:")[1].split("\n\n")[0]
    assert "--gpus N" in common and "--cluster <str>" in common and "--mfu" not in common
    assert all(len(line) <= 80 for line in out.splitlines())
    for flag in ("--local-sgd-fragments", "--ddp-bucket-view / --ddp-bucket-copy", "--message-dtype"):
        assert flag in out
    single = CliRunner().invoke(app, ["topologies", "--help"], env={"COLUMNS": "80"}).stdout
    assert "Common:" in single  # --gpus and --format are common there too


def test_a_users_folders_named_like_rtmodels_packages_do_not_shadow_it(tmp_path):
    """A project with its own `validation/` and `profiler/` folders: rtmodel's commands, and the line it
    prints for a training script, still import rtmodel's code."""
    for name in ("validation", "profiler", "calibration", "emulation"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('the user folder was imported')\n")
    res = rtmodel("advise", "--gpus", "64", "--gpus-per-node", "8", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "import rtmodel_decentdp" in res.stdout  # a name no project folder shadows
    res = rtmodel("calibrate", str(ROOT / "tests" / "data" / "synthetic_profile_2x2.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr


@pytest.mark.cluster
@pytest.mark.slow
def test_profile_ranks_import_rtmodel_and_still_find_the_users_model(tmp_path):
    """`rtmodel profile` in a project with its own `profiler/` folder: the ranks run rtmodel's profiler
    (a safe path), and the user's factory module in that folder is still importable."""
    pytest.importorskip("torch")
    (tmp_path / "profiler").mkdir()
    (tmp_path / "profiler" / "__init__.py").write_text("raise ImportError('the user folder was imported')\n")
    (tmp_path / "mymodels.py").write_text(
        "import torch\n\n\n"
        "def build():\n"
        "    batch = lambda step, n, device: (torch.randn(n, 16, device=device), torch.randn(n, 16, device=device))\n"
        "    return torch.nn.Linear(16, 16), batch, torch.nn.functional.mse_loss\n"
    )
    res = rtmodel("profile", "--out", "p.json", "--quick", "--model", "mymodels:build", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "p.json").is_file()


def test_a_closed_stdout_is_one_line_not_a_traceback():
    res = subprocess.run(
        [str(Path(sys.executable).parent / "rtmodel"), "advise", "--format", "csv"],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),  # `rtmodel advise --format csv >&-`
        timeout=300,
    )
    assert res.returncode == 2
    assert (
        res.stderr.strip() == "error: standard output is closed; redirect it (e.g. > out.txt or > /dev/null)"
    )


def test_ctrl_c_while_the_app_loads_is_one_line(monkeypatch, capsys):
    """The entry point imports the app inside its guard: an interrupt during the imports is one line too."""
    import types

    from rtmodel_cli import entry

    loading = types.ModuleType("rtmodel_cli.app")

    def interrupted():
        raise KeyboardInterrupt

    loading.main = interrupted
    monkeypatch.setitem(sys.modules, "rtmodel_cli.app", loading)
    with pytest.raises(SystemExit) as ended:
        entry.main()
    assert ended.value.code == 130 and capsys.readouterr().err.strip() == "error: interrupted"


@pytest.mark.parametrize(
    "command", [["validate", "--topology", "ring"], ["profile", "--quick", "--out", "p.json"]]
)
@pytest.mark.slow
def test_a_launched_rank_whose_peers_never_come_says_so_in_one_line(tmp_path, command):
    """Rank 0 of a two-rank job alone: the rendezvous times out, and the rank says which phase, not a traceback."""
    pytest.importorskip("torch")
    profile = (
        ["--profile", str(ROOT / "tests" / "data" / "synthetic_profile_2x2.json")]
        if command[0] == "validate"
        else []
    )
    port = str(29_000 + os.getpid() % 1000)
    res = rtmodel(
        *command,
        *profile,
        "--timeout-s",
        "3",
        cwd=tmp_path,
        RANK="0",
        WORLD_SIZE="2",
        LOCAL_RANK="0",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith("error: rank 0 failed during setup/init: "), (
        res.stderr
    )

"""rtmodel_util.files: outputs are regular files written whole or not at all, through a symlink, never
over a command's own input, one writer at a time (full disks, scenario-named inputs, the launcher's lock
and the results file: tests/test_outputs_whole.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_util.files import (
    OutputPathError,
    check_output_path,
    output_lock,
    write_atomic,
    write_json_atomic,
)

ROOT = Path(__file__).parent.parent
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"


def test_a_write_is_whole_keeps_the_mode_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o640)
    write_json_atomic(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(ValueError):
        write_json_atomic(target, {"x": float("nan")})  # strict JSON: refused before anything is written
    with pytest.raises(TypeError):
        write_atomic(target, 3)  # fails while writing the temp file
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_special_file_is_never_renamed_over(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="is a FIFO"):
        write_atomic(fifo, "x")
    with pytest.raises(OutputPathError, match="is a FIFO"):
        check_output_path(fifo, "--out")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    with pytest.raises(OutputPathError, match="character device"):
        check_output_path("/dev/null", "--out")


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("runs").mkdir()
    Path("runs/params-1.json").write_text("{}")
    Path("latest.json").symlink_to("runs/params-1.json")
    res = CliRunner().invoke(app, ["calibrate", str(PROFILE), "--out", "latest.json", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert Path("latest.json").is_symlink()
    assert "measured_shape" in json.loads(Path("runs/params-1.json").read_text())  # the target was written
    assert sorted(p.name for p in Path("runs").iterdir()) == ["params-1.json"]


def test_a_symlink_to_a_device_is_refused(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to("/dev/null")
    with pytest.raises(OutputPathError, match="character device"):
        check_output_path(link, "--out")
    assert link.is_symlink()


def test_an_output_may_not_be_an_input_however_spelled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("p.json").write_text("{}")
    Path("alias.json").symlink_to("p.json")
    for spelled in ("p.json", "./p.json", str(tmp_path / "p.json"), "alias.json"):
        with pytest.raises(OutputPathError, match="is also the input PROFILE"):
            check_output_path(spelled, "--out", inputs={"PROFILE": "p.json"})
    assert check_output_path("other.json", "--out", inputs={"PROFILE": "p.json"}) == Path("other.json")


def test_a_second_writer_of_one_output_is_refused_at_once(tmp_path):
    target = tmp_path / "p.json"
    with output_lock(target, "--out"):
        with pytest.raises(OutputPathError, match="another rtmodel command is writing this file now"):
            with output_lock(tmp_path / "." / "p.json", "--out"):
                pass
        with output_lock(tmp_path / "q.json", "--out"):  # another output: no conflict
            pass
    with output_lock(target, "--out"):  # released when the first writer ended
        pass
    assert list(tmp_path.iterdir()) == []  # the lock beside the output is gone with its writer


def test_writers_with_different_temp_directories_still_exclude_each_other(tmp_path):
    """SLURM gives every job its own TMPDIR: the lock must live where every job finds it."""
    target = tmp_path / "p.json"
    other_tmp = tmp_path / "job2-tmp"
    other_tmp.mkdir()
    second = (
        "import sys\nfrom rtmodel_util.files import OutputPathError, output_lock\n"
        f"try:\n    with output_lock({str(target)!r}, '--out'):\n        sys.exit(0)\n"
        "except OutputPathError as exc:\n    print(exc)\n    sys.exit(2)\n"
    )
    env = {**os.environ, "TMPDIR": str(other_tmp)}
    with output_lock(target, "--out"):
        res = subprocess.run(
            [sys.executable, "-c", second], env=env, capture_output=True, text=True, timeout=120
        )
    assert res.returncode == 2 and "another rtmodel command is writing this file now" in res.stdout, res
    res = subprocess.run([sys.executable, "-c", second], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res


def test_a_name_the_file_system_cannot_hold_is_refused_before_the_work(tmp_path):
    fits = "r" * 250 + ".json"  # 255 bytes: the temp file beside it has a short name of its own
    assert check_output_path(tmp_path / fits, "--out") == tmp_path / fits
    write_atomic(tmp_path / fits, "{}")
    assert (tmp_path / fits).read_text() == "{}"
    with pytest.raises(OutputPathError, match="the file name is 256 bytes; this file system allows 255"):
        check_output_path(tmp_path / ("r" * 251 + ".json"), "--out")


def test_a_second_profile_naming_the_same_out_is_refused_before_any_rank(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    with output_lock("p.json", "--out"):  # another `rtmodel profile --out p.json` is running
        res = CliRunner().invoke(app, ["profile", "--out", "p.json", "--quick"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (
        "error: --out p.json: another rtmodel command is writing this file now; wait for it or give another file"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_library_validate_refuses_results_naming_its_profile(tmp_path):
    """run_validation checks its results file as the CLI does, before any rank starts."""
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.validate import run_validation

    profile = tmp_path / "p.json"
    profile.write_text(PROFILE.read_text())
    with pytest.raises(OutputPathError, match="--results .* is also the input --profile"):
        run_validation(profile, ValidateOptions(topology="ring", results_path=profile))
    assert profile.read_text() == PROFILE.read_text()


def test_an_output_where_no_file_can_be_created_is_refused_before_the_work(tmp_path):
    """/proc takes no new file, though access() tells root it may write there: the lock, taken before the
    work, finds out (the output itself is written only when the work is done)."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    with pytest.raises(OutputPathError, match=r"^--out /proc/x.json: cannot create a file in /proc \("):
        with output_lock("/proc/x.json", "--out"):
            pass
    res = CliRunner().invoke(app, ["calibrate", str(PROFILE), "--out", "/proc/x.json"])
    assert res.exit_code == 2 and res.stderr.startswith(
        "error: --out /proc/x.json: cannot create a file in /proc"
    )
    assert "parameters written" not in res.stdout  # refused before the fit


def test_a_directory_output_is_locked_and_named_as_a_directory(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    with output_lock(traces, "--trace-out"):
        with pytest.raises(
            OutputPathError, match="writing this directory now; wait for it or give another directory"
        ):
            with output_lock(traces, "--trace-out"):
                pass
    assert [p.name for p in tmp_path.iterdir()] == ["traces"]

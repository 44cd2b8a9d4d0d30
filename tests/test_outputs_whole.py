"""Every output is written whole or not at all, by one writer at a time, never over one of the command's
inputs, and checked before any work (rtmodel_util.files; issue 67).

A full disk is simulated by making os.write fail (ENOSPC) or keep fewer bytes than it says, for the files
under the test's directory only: the old file must stay as it was and no temp file may remain.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_util.files import (
    LOCK_FDS_ENV,
    OutputPathError,
    check_output_dir,
    output_lock,
    pass_locks,
    write_atomic,
)
from rtmodel_validation.errors import ValidationError
from runtime_model.core.errors import RunFailure

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data"
PROFILE = DATA / "synthetic_profile_2x2.json"
runner = CliRunner()
RECORD = {"schema": "rtmodel-validation/1", "topology": "ring", "allreduce": {"error": 0.01}}


def invoke(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(res) -> str:
    assert "Traceback" not in res.output, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: "), lines
    return lines[0]


def files_in(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too: a temp file or lock left behind shows here)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """Writes to files under tmp_path fail: "enospc" after half the bytes, or "short": os.write says it
    wrote everything but keeps half (a file system that loses bytes). Other files are written as ever."""
    real_write = os.write

    def under_tmp(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path))
        except OSError:
            return False

    def make(mode: str = "enospc"):
        def write(fd, data):
            if not under_tmp(fd):
                return real_write(fd, data)
            half = memoryview(data)[: max(len(data) // 2, 1)]
            if mode == "enospc":
                if len(data) > 1:
                    real_write(fd, half)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_write(fd, half)
            return len(data)

        monkeypatch.setattr(os, "write", write)

    return make


# ----------------------------------------------------------------------------- the one atomic writer


@pytest.mark.parametrize("mode", ["enospc", "short"])
def test_a_write_on_a_full_disk_keeps_the_old_file_and_leaves_no_temp_file(tmp_path, full_disk, mode):
    target = tmp_path / "out.json"
    target.write_text("old")
    full_disk(mode)
    with pytest.raises(OSError) as err:
        write_atomic(target, "new contents, longer than the old")
    assert err.value.errno == (errno.ENOSPC if mode == "enospc" else errno.EIO)
    assert files_in(tmp_path) == {"out.json": b"old"}


def test_a_short_write_is_continued_not_lost(tmp_path, monkeypatch):
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, memoryview(data)[:3]))  # 3 bytes a call
    write_atomic(tmp_path / "f.txt", "all of these bytes")
    assert (tmp_path / "f.txt").read_text() == "all of these bytes"


def test_plot_out_on_a_full_disk_keeps_the_old_figure(tmp_path, full_disk):
    out = tmp_path / "paper.png"
    out.write_bytes(b"the old figure")
    full_disk()
    res = invoke("plot", "paper", "--out", out)
    assert res.exit_code != 0
    assert "paper.png" in one_error_line(res)
    assert files_in(tmp_path) == {"paper.png": b"the old figure"}


def test_calibrate_out_on_a_full_disk_keeps_the_old_parameters(tmp_path, full_disk):
    out = tmp_path / "params.json"
    out.write_text('{"old": 1}')
    full_disk()
    res = invoke("calibrate", PROFILE, "--out", out, "--format", "json")
    assert res.exit_code == 1, res.output  # a run failure, not the user's mistake
    one_error_line(res)
    assert files_in(tmp_path) == {"params.json": b'{"old": 1}'}


def test_a_trace_on_a_full_disk_leaves_no_truncated_trace(tmp_path, full_disk):
    from profiler.trace_out import trace_path, write_trace

    class Prof:  # torch.profiler's profile, as far as write_trace uses it
        def export_chrome_trace(self, path):
            Path(path).write_text(json.dumps({"traceEvents": [{"name": "x"}] * 100}))

    old = trace_path(tmp_path, 0)
    old.write_bytes(b"an earlier trace")
    full_disk()
    with pytest.raises(OSError):
        write_trace(Prof(), old)
    assert files_in(tmp_path) == {old.name: b"an earlier trace"}  # neither the export nor a temp file


def test_a_trace_is_written_gzipped_under_the_ranks_name(tmp_path):
    import gzip

    from profiler.trace_out import trace_path, write_trace

    class Prof:
        def export_chrome_trace(self, path):
            Path(path).write_text('{"traceEvents": []}')

    write_trace(Prof(), trace_path(tmp_path, 3))
    assert files_in(tmp_path).keys() == {"rank3.pt.trace.json.gz"}
    assert json.loads(gzip.decompress((tmp_path / "rank3.pt.trace.json.gz").read_bytes())) == {
        "traceEvents": []
    }


# ----------------------------------------------------------------------------- validate's results file


def _append(path: Path, rec: dict | None = None, flag: str = "--results") -> None:
    from rtmodel_validation.results_file import append_line

    append_line(path, json.dumps(rec or RECORD), flag)


def test_an_append_on_a_full_disk_keeps_every_earlier_record(tmp_path, full_disk):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(RECORD) + "\n")
    before = path.read_bytes()
    full_disk()
    with pytest.raises(RunFailure, match="cannot append to results file .*No space left on device"):
        _append(path)
    assert files_in(tmp_path) == {"runs.jsonl": before}


def test_a_results_file_without_its_last_newline_keeps_its_records(tmp_path):
    from rtmodel_validation.results import read_records

    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps({**RECORD, "topology": "base-2"}))  # no newline
    _append(path, {**RECORD, "topology": "complete"})
    records, skipped = read_records(path)
    assert [r["topology"] for r in records] == ["ring", "base-2", "complete"] and skipped == 0
    assert path.read_text().endswith("\n")


def test_a_results_file_may_hold_records_flat_lines_comments_and_blank_lines(tmp_path):
    from rtmodel_validation.results_file import check_results_file

    path = tmp_path / "runs.jsonl"
    legacy = {"kind": "rtmodel-validation", "version": 1}
    flat = {"method": "ring", "predicted_mean_s": 0.05, "measured_mean_s": 0.04}
    path.write_text(f"# my runs\n{json.dumps(RECORD)}\n\n{json.dumps(legacy)}\n{json.dumps(flat)}\n")
    check_results_file(path, "--results runs.jsonl")
    _append(path)
    assert len(path.read_text().splitlines()) == 6


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            json.dumps({"schema": "rtmodel-profile/1", "shape": {}}, indent=1),
            "it holds one rtmodel profile document",
        ),
        (json.dumps({"schema": "rtmodel-calibration/1"}) + "\n", "it holds one rtmodel calibration document"),
        (json.dumps(RECORD) + "\n" + json.dumps({"a": 1}) + "\n", "line 2 is not a validation record"),
        (json.dumps(RECORD) + '\n{"cut": \n', "line 2 is not JSON"),
        ("\x89PNG\r\n\x1a\n\x00\x00", "line 1 is not"),
        ("[1, 2]\n", "line 1 is not a JSON object"),
    ],
)
def test_a_file_that_is_not_a_results_file_is_refused_and_kept(tmp_path, text, why):
    from rtmodel_validation.results_file import check_results_file

    path = tmp_path / "x.jsonl"
    path.write_bytes(text.encode("latin-1"))  # the PNG's bytes as they are
    with pytest.raises(ValidationError, match=f"--results x.jsonl is not a validation results file: {why}"):
        check_results_file(path, "--results x.jsonl")
    with pytest.raises(ValidationError, match="is not a validation results file"):
        _append(path)
    assert path.read_bytes() == text.encode("latin-1")


def _no_ranks(monkeypatch):
    import rtmodel_validation.launch

    monkeypatch.setattr(
        rtmodel_validation.launch, "launch_local", lambda *a, **k: pytest.fail("validate started ranks")
    )


def test_validate_refuses_a_profile_as_results_before_training(tmp_path, monkeypatch):
    _no_ranks(monkeypatch)
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "other-profile.json"
    other.write_text(PROFILE.read_text())
    res = invoke("validate", "--profile", PROFILE, "--topology", "ring", "--results", other)
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert (
        f"--results {other} is not a validation results file: it holds one rtmodel profile document" in line
    )
    assert other.read_text() == PROFILE.read_text()
    assert files_in(tmp_path).keys() == {"other-profile.json"}


def test_validate_refuses_results_it_cannot_create_before_training(tmp_path, monkeypatch):
    """/proc accepts no new file, though access() says root may write it: refused before any rank."""
    _no_ranks(monkeypatch)
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    res = invoke("validate", "--profile", PROFILE, "--topology", "ring", "--results", "/proc/x.jsonl")
    assert res.exit_code == 2, res.output
    assert one_error_line(res).startswith("error: --results /proc/x.jsonl")


def test_validate_refuses_the_default_results_file_when_it_is_not_one(tmp_path, monkeypatch):
    _no_ranks(monkeypatch)
    monkeypatch.chdir(tmp_path)
    Path("rtmodel-validations.jsonl").write_text("not json\n")
    res = invoke("validate", "--profile", PROFILE, "--topology", "ring")
    assert res.exit_code == 2
    assert "the default results file" in one_error_line(res) and "line 1 is not JSON" in res.stderr
    assert Path("rtmodel-validations.jsonl").read_text() == "not json\n"


def test_an_append_waits_for_another_appender_and_keeps_both_records(tmp_path):
    """Two validations of one project append one after the other: the second waits, nothing is lost."""
    path = tmp_path / "runs.jsonl"
    child = textwrap.dedent(f"""
        import json, time
        from rtmodel_util.files import output_lock
        with output_lock({str(path)!r}, "--results"):
            print("locked", flush=True)
            time.sleep(1.0)
            open({str(path)!r}, "a").write(json.dumps({RECORD!r}) + "\\n")
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "locked"
        _append(path, {**RECORD, "topology": "second"})
    finally:
        proc.wait(timeout=60)
    assert [json.loads(ln)["topology"] for ln in path.read_text().splitlines()] == ["ring", "second"]


# ----------------------------------------------------------------------------- one writer at a time


def test_calibrate_out_while_another_command_writes_it_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("p.json").write_text("{}")
    with output_lock("p.json", "--out"):  # e.g. `rtmodel profile --out p.json` running
        res = invoke("calibrate", PROFILE, "--out", "p.json")
    assert res.exit_code == 2
    assert one_error_line(res) == (
        "error: --out p.json: another rtmodel command is writing this file now; wait for it or give another file"
    )
    assert files_in(tmp_path) == {"p.json": b"{}"}


def test_plot_out_and_data_while_another_command_writes_them_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for locked in ("f.png", "f.csv"):
        with output_lock(locked, "--out"):
            res = invoke("plot", "paper", "--out", "f.png", "--data", "f.csv")
        assert res.exit_code == 2
        assert "another rtmodel command is writing this file now" in one_error_line(res)
        assert not any(tmp_path.iterdir())


def test_validate_results_held_by_a_replacing_writer_is_refused_before_training(tmp_path, monkeypatch):
    import rtmodel_validation.results_file

    _no_ranks(monkeypatch)
    monkeypatch.setattr(rtmodel_validation.results_file, "APPEND_WAIT_S", 0.2)
    monkeypatch.chdir(tmp_path)
    with output_lock("runs.jsonl", "--out"):  # `calibrate --out runs.jsonl`, say
        res = invoke("validate", "--profile", PROFILE, "--topology", "ring", "--results", "runs.jsonl")
    assert res.exit_code == 2
    assert "--results runs.jsonl: another rtmodel command is writing this file now" in one_error_line(res)


LOCK_CHILD = textwrap.dedent("""
    import os, sys
    from rtmodel_util.files import OutputPathError, output_lock
    try:
        with output_lock(sys.argv[1], "--out"):
            print("held")
    except OutputPathError as exc:
        print(exc)
        sys.exit(2)
""")


def _child(target: Path, env: dict, pass_fds=(), script: str = LOCK_CHILD) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script, str(target)], env={**os.environ, **env}, pass_fds=pass_fds,
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip


def test_the_environment_cannot_skip_the_lock(tmp_path):
    target = tmp_path / "p.json"
    forged = {
        "RTMODEL_OUTPUT_LOCK_HELD": os.path.realpath(target),  # the old bypass
        LOCK_FDS_ENV: ",".join(map(str, range(64))),  # every descriptor a child could have
    }
    with output_lock(target, "--out"):
        res = _child(target, forged)
    assert res.returncode == 2 and "another rtmodel command is writing this file now" in res.stdout, res
    assert _child(target, forged).stdout.strip() == "held"  # once the writer is gone: taken as usual


def test_a_descriptor_the_child_opened_itself_proves_nothing(tmp_path):
    """Naming a descriptor of the lock file that the child opened (not the holder's) is no lock."""
    target = tmp_path / "p.json"
    script = textwrap.dedent("""
        import os, sys
        from rtmodel_util.files import LOCK_FDS_ENV, OutputPathError, output_lock, _lock_file
        fd = os.open(_lock_file(sys.argv[1]), os.O_RDWR)
        os.environ[LOCK_FDS_ENV] = str(fd)
        try:
            with output_lock(sys.argv[1], "--out"):
                print("held")
        except OutputPathError as exc:
            print(exc)
            sys.exit(2)
    """)
    with output_lock(target, "--out"):
        res = _child(target, {}, script=script)
    assert res.returncode == 2 and "another rtmodel command is writing this file now" in res.stdout, res


def test_a_launched_rank_holds_its_launchers_lock_through_the_passed_descriptor(tmp_path):
    target = tmp_path / "p.json"
    with output_lock(target, "--out") as held:
        env, fds = pass_locks([held])
        res = _child(target, env, pass_fds=fds)
        assert res.returncode == 0 and res.stdout.strip() == "held", res
        res = _child(target, {})  # any other process: refused
        assert res.returncode == 2, res
        with pytest.raises(OutputPathError):  # the launcher's lock outlived its rank
            with output_lock(target, "--out"):
                pass
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- never over an input


@pytest.fixture
def crossover_inputs(tmp_path, monkeypatch):
    """A scenario file naming an nccl-tests file nt.png (any name will do for a file), a symbolic and a
    hard link to it."""
    monkeypatch.chdir(tmp_path)
    Path("nt.png").write_text("nccl-tests output")
    Path("s.toml").write_text('nccl_tests = "nt.png"\n')
    Path("alias.png").symlink_to("nt.png")
    os.link("nt.png", "hard.png")
    return tmp_path


@pytest.mark.parametrize("out", ["nt.png", "./nt.png", "alias.png", "hard.png"])
def test_a_plot_never_writes_over_a_file_its_scenario_names(crossover_inputs, out):
    before = files_in(crossover_inputs)
    res = invoke("plot", "crossover", "--scenario", "s.toml", "--gpus", "16", "--out", out)
    assert res.exit_code == 2, res.output
    assert f"--out {Path(out)} is also the input 'nccl_tests' of --scenario s.toml" in one_error_line(res)
    assert files_in(crossover_inputs) == before
    assert Path("alias.png").is_symlink()


def test_plot_data_never_writes_over_a_file_its_scenario_names(crossover_inputs):
    Path("nt.csv").write_text("nccl-tests output")
    Path("s2.toml").write_text('nccl_tests = "nt.csv"\n')
    os.link("nt.csv", "hard.csv")
    before = files_in(crossover_inputs)
    res = invoke("plot", "crossover", "--scenario", "s2.toml", "--out", "c.png", "--data", "hard.csv")
    assert res.exit_code == 2
    assert "--data hard.csv is also the input 'nccl_tests' of --scenario s2.toml" in one_error_line(res)
    assert files_in(crossover_inputs) == before


def test_calibrate_never_writes_over_its_profile_through_a_hard_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("p.json").write_text(PROFILE.read_text())
    os.link("p.json", "params.json")
    res = invoke("calibrate", "p.json", "--out", "params.json")
    assert res.exit_code == 2
    assert "--out params.json is also the input PROFILE" in one_error_line(res)
    assert Path("p.json").read_text() == PROFILE.read_text()


def test_the_input_files_of_a_command_include_a_lists_every_item_and_its_scenarios(tmp_path, monkeypatch):
    from rtmodel_cli import failing
    from rtmodel_cli.command_files import command_input_files

    monkeypatch.chdir(tmp_path)
    for name in ("a.json", "b.json", "nt.txt", "t.json"):
        Path(name).write_text("{}")
    Path("s.toml").write_text('nccl_tests = "nt.txt"\ntrace = ["t.json", "missing.json"]\n')
    token = failing._OPTIONS.set({"trace": ["a.json", "b.json"], "scenario": "s.toml", "out": "a.json"})
    try:
        found = command_input_files(("out",))
    finally:
        failing._OPTIONS.reset(token)
    assert found == {
        "--trace a.json": "a.json",
        "--trace b.json": "b.json",
        "--scenario": "s.toml",
        "'nccl_tests' of --scenario s.toml": str(Path("nt.txt")),
        f"'trace' of --scenario s.toml {Path('t.json')}": str(Path("t.json")),
    }


# ----------------------------------------------------------------------------- profile --trace-out


@pytest.fixture
def no_profile_run(monkeypatch):
    """`rtmodel profile` up to the point where ranks would start: starting them fails the test."""
    pytest.importorskip("torch")
    import profiler.launch

    monkeypatch.setattr(profiler.launch, "launch_local", lambda *a, **k: pytest.fail("ranks started"))


def _trace_cases(tmp_path: Path) -> list[tuple[str, str]]:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "job.json").write_text("{}")
    return [
        ("", "--trace-out needs a directory path, got an empty one"),
        ("file.txt", "--trace-out file.txt is a file"),
        ("/dev/null", "--trace-out /dev/null is a character device"),
        ("p.json", "--trace-out p.json is also --out"),
        (".", "--trace-out . holds the profile --out p.json"),
        ("no/such/dir", "directory"),
        ("theirs", "--trace-out theirs holds other traces (job.json)"),
    ]


def test_trace_out_that_cannot_hold_the_traces_is_refused_before_any_rank(
    tmp_path, monkeypatch, no_profile_run
):
    monkeypatch.chdir(tmp_path)
    for trace_out, needle in _trace_cases(tmp_path):
        before = files_in(tmp_path)
        res = invoke("profile", "--out", "p.json", "--quick", "--trace-out", trace_out)
        assert res.exit_code == 2, (trace_out, res.output)
        assert needle in one_error_line(res), (trace_out, res.stderr)
        assert files_in(tmp_path) == before


def test_trace_out_read_only_is_refused(tmp_path, monkeypatch):
    d = tmp_path / "ro"
    d.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == d else real(p, mode, **kw))
    with pytest.raises(OutputPathError, match="--trace-out .*ro: the directory is not writable"):
        check_output_dir(d, "--trace-out")


def test_trace_out_while_another_command_writes_it_is_refused(tmp_path, monkeypatch, no_profile_run):
    monkeypatch.chdir(tmp_path)
    with output_lock("traces", "--trace-out"):
        res = invoke("profile", "--out", "p.json", "--quick", "--trace-out", "traces")
    assert res.exit_code == 2
    assert one_error_line(res) == (
        "error: --trace-out traces: another rtmodel command is writing this directory now; wait for it or "
        "give another directory"
    )


def test_a_rerun_replaces_the_earlier_runs_traces_and_nothing_else(tmp_path):
    from profiler.trace_out import check_trace_out, remove_earlier_traces

    d = tmp_path / "traces"
    d.mkdir()
    ours = ["rank0.pt.trace.json.gz", "rank1.1700000000000.pt.trace.json.gz", "rank7.pt.trace.json"]
    for name in [*ours, "notes.txt"]:
        (d / name).write_text("x")
    assert check_trace_out(d, tmp_path / "p.json") == d  # an earlier run's traces: not a refusal
    assert sorted(remove_earlier_traces(d)) == sorted(ours)
    assert [p.name for p in d.iterdir()] == ["notes.txt"]


@pytest.mark.slow
@pytest.mark.cluster
def test_a_profile_rerun_into_its_trace_dir_leaves_only_this_runs_traces(tmp_path):
    """Real ranks: rank 0 writes --out under the launcher's lock (its passed descriptor), and DIR ends with
    this run's two traces, an earlier run's (another timestamped name, a rank this run lacks) gone."""
    pytest.importorskip("torch")
    from profiler.launch import run_profile
    from profiler.options import ProfileOptions

    traces = tmp_path / "traces"
    traces.mkdir()
    for stale in ("rank0.1700000000000.pt.trace.json.gz", "rank5.pt.trace.json.gz"):
        (traces / stale).write_bytes(b"an earlier run")
    (traces / "README.txt").write_text("mine")
    synth = {"param_mb": 4, "layers": 4, "forward_ms": 4, "backward_ms": 8}
    opts = ProfileOptions(tmp_path / "p.json", "synthetic", synth, 2, quick=True, nproc_per_node=2, reps=2,
                          timeout_s=60, progress=False, trace_out=str(traces))  # fmt: skip
    doc = run_profile(opts)
    assert doc["complete"] is True
    assert sorted(p.name for p in traces.iterdir()) == [
        "README.txt",
        "rank0.pt.trace.json.gz",
        "rank1.pt.trace.json.gz",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "traces"]  # no lock or temp file left

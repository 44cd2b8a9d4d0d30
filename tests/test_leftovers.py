"""Nothing left behind (issue 67): a run's temp directories go however it ends, and what a killed run
left (its launcher and the launcher's guardian both SIGKILLed) goes with the next run of its kind or with
`rtmodel emulate cleanup`, which say so in one line.

The sweep's rules run on hand-made directories (cheap, no torch). Real runs check that a fresh TMPDIR is
empty after `rtmodel profile` and `rtmodel validate` (torchrun's torchelastic_* and torch's
torchinductor_<user> included) and after a validate launcher is SIGKILLed, with or without its guardian.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_util import run_dirs
from rtmodel_util.run_dirs import FAMILIES, OWNER_FILE, owner_record, run_directory, sweep_stale

ROOT = Path(__file__).parent.parent
SMALL_MODEL = {"param_mb": 2, "layers": 4, "forward_ms": 4, "backward_ms": 8}
OLD = time.time() - 2 * run_dirs.NO_RECORD_GRACE_S


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _run_dir(root: Path, name: str, record: dict | str | None) -> Path:
    """A directory as a killed run leaves it: its record (None: none), a log and torchrun's temp dir."""
    path = root / name
    (path / "tmp" / "torchelastic_abc" / "attempt_0").mkdir(parents=True)
    (path / "job.log").write_text("log\n")
    if record is not None:
        (path / OWNER_FILE).write_text(record if isinstance(record, str) else json.dumps(record))
    return path


@pytest.fixture
def tmpdir_here(tmp_path, monkeypatch) -> Path:
    """TMPDIR (and tempfile's cached copy of it) is a fresh directory of this test's."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # gettempdir() read TMPDIR once, long ago
    return tmp


# ----------------------------------------------------------------------------- the sweep (no torch)


def test_the_next_run_removes_a_dead_runs_directory_and_says_so(tmpdir_here):
    dead = _dead_pid()
    stale = _run_dir(tmpdir_here, f"rtmodel-validate-{dead}-ab12cd34", owner_record(dead))
    live = _run_dir(tmpdir_here, f"rtmodel-validate-{os.getpid()}-ef56gh78", owner_record())
    other = _run_dir(tmpdir_here, f"rtmodel-profile-{dead}-ab12cd34", owner_record(dead))  # not this family
    said: list[str] = []
    with run_directory("rtmodel-validate-", say=said.append) as run:
        assert said == [f"removed 1 directory left by killed runs: {stale}"]
        assert not stale.exists() and live.exists() and other.exists()
        assert run.path.parent == tmpdir_here and run.path.name.startswith(f"rtmodel-validate-{os.getpid()}-")
        assert json.loads((run.path / OWNER_FILE).read_text())["pid"] == os.getpid()
        assert run_dirs.child_tmpdir(run.path) == str(run.path / "tmp")
    assert not run.path.exists()


def test_a_directory_kept_for_the_user_is_never_swept(tmpdir_here):
    with run_directory("rtmodel-validate-") as run:
        run.keep()  # an error names the log in it
    record = json.loads((run.path / OWNER_FILE).read_text())
    assert record["kept"] is True
    record["pid"] = _dead_pid()  # even once its launcher is long gone
    (run.path / OWNER_FILE).write_text(json.dumps(record))
    assert sweep_stale(FAMILIES) == [] and run.path.exists()


def test_the_sweep_removes_only_what_is_surely_a_dead_runs(tmpdir_here):
    """Dead owner, reused pid, another boot, no record and old: removed. A live owner, another host or pid
    namespace, a fresh record-less directory, a name not ours, a symlink, a file, another user's: kept."""
    dead, me, here = _dead_pid(), os.getpid(), owner_record()
    fam = "rtmodel-validate-"
    gone = {
        _run_dir(tmpdir_here, f"{fam}{dead}-dead", owner_record(dead)),
        _run_dir(tmpdir_here, f"{fam}{me}-reused", {**here, "start": here["start"] + 1}),
        _run_dir(tmpdir_here, f"{fam}{me}-rebooted", {**here, "boot": "another-boot"}),
        _run_dir(tmpdir_here, f"{fam}{dead}-norecord", None),
        _run_dir(tmpdir_here, f"{fam}{dead}-badrecord", "not json"),
    }
    kept = {
        _run_dir(tmpdir_here, f"{fam}{me}-alive", here),
        _run_dir(tmpdir_here, f"{fam}{dead}-otherhost", {**owner_record(dead), "host": "another-host"}),
        _run_dir(tmpdir_here, f"{fam}{dead}-container", {**owner_record(dead), "pidns": "pid:[1]"}),
        _run_dir(tmpdir_here, f"{fam}{dead}-fresh", None),  # its launcher may be writing the record now
        _run_dir(tmpdir_here, f"{fam}{me}-norecordalive", None),
        _run_dir(tmpdir_here, f"{fam}abcd1234", owner_record(dead)),  # no pid in the name
        _run_dir(tmpdir_here, f"x{fam}{dead}-a", owner_record(dead)),
        _run_dir(tmpdir_here, f"rtmodel-other-{dead}-a", owner_record(dead)),
    }
    for path in gone | kept:
        if not path.name.endswith("fresh"):
            os.utime(path, (OLD, OLD))
    target = _run_dir(tmpdir_here, "elsewhere", owner_record(dead))
    link = tmpdir_here / f"{fam}{dead}-link"
    link.symlink_to(target)
    afile = tmpdir_here / f"{fam}{dead}-file"
    afile.write_text("x")
    if os.geteuid() == 0:  # root can make a directory of another user (a dead owner's, as the sweep sees it)
        foreign = _run_dir(tmpdir_here, f"{fam}{dead}-foreign", owner_record(dead))
        os.utime(foreign, (OLD, OLD))
        os.chown(foreign, 65534, 65534)
        kept.add(foreign)

    removed = set(sweep_stale((fam,)))
    assert removed == gone
    assert not any(p.exists() for p in gone)
    assert all(p.exists() for p in kept | {target, link, afile})
    assert (target / "job.log").exists()


def test_describe_removed_is_one_short_line():
    paths = [Path(f"/tmp/rtmodel-validate-{i}-x") for i in range(5)]
    assert (
        run_dirs.describe_removed(paths[:1])
        == "removed 1 directory left by killed runs: /tmp/rtmodel-validate-0-x"
    )
    line = run_dirs.describe_removed(paths)
    assert line.startswith("removed 5 directories left by killed runs: ") and line.endswith("and 2 more")


def test_every_run_directory_family_is_swept_by_emulate_cleanup():
    from rtmodel_emulation.netns import PREFIX

    used = {
        m
        for pkg in ("profiler", "rtmodel_validation", "rtmodel_emulation")
        for p in (ROOT / pkg).rglob("*.py")
        for m in re.findall(r'run_directory\(\s*"([^"]+)"', p.read_text())
    }
    assert used == {"rtmodel-profile-", "rtmodel-validate-"} and set(FAMILIES) == used | {PREFIX}


# ----------------------------------------------------------------------------- emulate


def test_emulate_cleanup_removes_the_directory_of_a_killed_owner_and_guardian(tmpdir_here, monkeypatch):
    """Owner and both guardians SIGKILLed: TMPDIR/rtmemu-* stays until `emulate cleanup` (or the next
    cluster's up()). The namespaces' part is test_emulation's (root, real namespaces)."""
    import rtmodel_emulation.netns
    from rtmodel_cli.app import app

    monkeypatch.setattr(rtmodel_emulation.netns, "cleanup_stale", lambda: [])
    dead = _dead_pid()
    stale = _run_dir(tmpdir_here, f"rtmemu-{dead}-beef-ab12cd34", owner_record(dead))
    (stale / "forwarder.json").write_text("{}")
    live = _run_dir(tmpdir_here, f"rtmemu-{os.getpid()}-cafe-ef56gh78", owner_record())
    validate = _run_dir(tmpdir_here, f"rtmodel-validate-{dead}-ab12cd34", owner_record(dead))
    res = CliRunner().invoke(app, ["emulate", "cleanup"], env={"TMPDIR": str(tmpdir_here)})
    assert res.exit_code == 0, res.output
    (line,) = res.stdout.strip().splitlines()
    head, _, names = line.partition(": ")
    assert head == "removed 2 directories left by killed runs" and set(names.split(", ")) == {
        str(stale),
        str(validate),
    }
    assert not stale.exists() and not validate.exists() and live.exists()
    again = CliRunner().invoke(app, ["emulate", "cleanup"], env={"TMPDIR": str(tmpdir_here)})
    assert again.exit_code == 0 and again.stdout.strip() == "nothing to clean up"
    assert rtmodel_emulation.netns.cleanup_stale_dirs() == []


@pytest.mark.emulated
def test_an_emulated_cluster_keeps_its_files_and_torchruns_in_its_run_directory(tmpdir_here):
    from rtmodel_emulation import EmulatedCluster, available

    ok, reason = available()
    if not ok:
        pytest.skip(reason)
    with EmulatedCluster(1, 1, 100, 0.5) as c:
        work = Path(c._workdir)
        assert work.parent == tmpdir_here and work.name.startswith(f"rtmemu-{c.token}-")
        assert (work / OWNER_FILE).exists() and (work / "forwarder.json").exists()
        assert f"TMPDIR={work / 'tmp'}" in c.torchrun_commands(["-m", "x"])[0]
    assert not list(tmpdir_here.iterdir())


# ----------------------------------------------------------------------------- real runs


def _profile_options(out: Path, nproc: int = 2):
    from profiler.options import ProfileOptions

    return ProfileOptions(
        out,
        model="synthetic",
        model_args=SMALL_MODEL,
        batch_per_rank=4,
        quick=True,
        nproc_per_node=nproc,
        ranks_per_node=nproc,
        progress=False,
        timeout_s=120,
    )


@pytest.mark.cluster
def test_a_profile_leaves_nothing_in_tmpdir(tmpdir_here, tmp_path):
    pytest.importorskip("torch")
    from profiler.launch import run_profile

    run_profile(_profile_options(tmp_path / "p.json"))
    assert not list(tmpdir_here.iterdir())  # no rtmodel-profile-*, no torchinductor_<user>


@pytest.mark.slow
@pytest.mark.cluster
def test_a_validate_run_leaves_nothing_in_tmpdir(tmpdir_here, tmp_path, monkeypatch):
    """torchrun made TMPDIR/torchelastic_* on every run; it now makes it inside the run directory."""
    pytest.importorskip("torch")
    pytest.importorskip("decent_dp")
    from calibration.synthetic import write_synthetic_profile
    from rtmodel_validation.options import ValidateOptions
    from rtmodel_validation.validate import run_validation

    monkeypatch.chdir(tmp_path)
    profile = write_synthetic_profile(
        tmp_path / "p2.json", nodes=1, ranks_per_node=2, extra_workload=SMALL_MODEL
    )
    opts = ValidateOptions(
        topology="ring", iterations=4, warmup=2, results_path=tmp_path / "r.jsonl", timeout_s=180
    )
    run_validation(profile, opts)
    assert not list(tmpdir_here.iterdir())


def _descendants(pid: int) -> dict[int, str]:
    """pid -> command line of every process below `pid`."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry.name))
    out, todo = {}, [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            try:
                out[child] = (
                    (Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                )
            except OSError:
                continue
            todo.append(child)
    return out


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _until(ready, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout_s:.0f} s")
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.parametrize("killed", ["launcher", "launcher and guardian"])
def test_a_killed_validate_leaves_nothing_once_swept(killed, tmp_path):
    """SIGKILL: the guardian removes the run directory, torchrun's logs inside it; with the guardian
    killed too, the directory stays until the next run's sweep removes it."""
    pytest.importorskip("torch")
    pytest.importorskip("decent_dp")
    from calibration.synthetic import write_synthetic_profile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    profile = write_synthetic_profile(
        tmp_path / "p2.json", nodes=1, ranks_per_node=2, extra_workload=SMALL_MODEL
    )
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    args = [
        "validate",
        "--profile",
        str(profile),
        "--topology",
        "ring",
        "--iterations",
        "100000",
        "--warmup",
        "2",
        "--results",
        str(tmp_path / "r.jsonl"),
        "--timeout-s",
        "300",
        "--quiet",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtmodel_cli", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids: dict[int, str] = {}
    try:
        _until(
            lambda: any("DDP run" in p.read_text() for p in tmp.glob("rtmodel-validate-*/phases.txt")),
            240,
            "DDP run",
        )
        assert list(tmp.glob("rtmodel-validate-*/tmp/torchelastic_*"))  # torchrun's logs are in the run's dir
        pids = _descendants(proc.pid)
        guardian = [pid for pid, cmd in pids.items() if "shutil.rmtree" in cmd]
        assert len(guardian) == 1, pids
        if killed != "launcher":
            os.kill(guardian[0], signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=30)
        _until(lambda: not any(_running(p) for p in pids), 90, "end of torchrun and its workers")
        if killed == "launcher":
            _until(lambda: not list(tmp.iterdir()), 60, "removal by the guardian")
        else:
            (left,) = tmp.iterdir()
            assert left.name.startswith(f"rtmodel-validate-{proc.pid}-")
            assert sweep_stale(FAMILIES, tmp) == [left]
        assert not list(tmp.iterdir())
    finally:
        proc.kill()
        for pid in pids:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)

"""Processes: the rank environment checked before any rendezvous, bounds checked before any process
starts, and nothing left running (or on disk) when a launcher is stopped with SIGTERM, SIGINT or SIGKILL.

Option and environment mistakes go through the real command line (CliRunner): exit 2, one `error:` line
naming the flag or variable, no traceback, nothing written. The signal tests start `rtmodel profile` /
`rtmodel validate` as real processes, wait until their ranks are working, signal the launcher and then
check that every process it had started is gone and its temp directory removed (TMPDIR is the test's).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtmodel_cli.app import app
from rtmodel_util import launch_env
from rtmodel_util.launch_env import (
    LaunchEnv,
    LaunchEnvError,
    check_launch_env,
    check_timeout_s,
    in_launched_rank,
    is_lead_process,
    max_local_ranks,
)
from rtmodel_util.process_control import die_with_parent, sigterm_exits, stop_processes

ROOT = Path(__file__).parent.parent
PROFILE = ROOT / "tests" / "data" / "synthetic_profile_2x2.json"
GOOD = {
    "RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}
RANK_ENV = (*GOOD, "GROUP_RANK", "TORCHELASTIC_RUN_ID", launch_env.RANKS_PER_NODE_ENV)
SMALL_MODEL = {"param_mb": 2, "layers": 4, "forward_ms": 4, "backward_ms": 8}


# ----------------------------------------------------------------------------- the rank environment


def test_a_good_environment_is_a_typed_record():
    assert in_launched_rank(GOOD) and not in_launched_rank({**GOOD, "MASTER_PORT": ""})
    assert check_launch_env(GOOD) == LaunchEnv(1, 4, 1, 2, "127.0.0.1", 29500)
    plain = {k: GOOD[k] for k in launch_env.LAUNCH_VARS}  # a static srun setup: no LOCAL_* variables
    assert check_launch_env(plain) == LaunchEnv(1, 4, None, None, "127.0.0.1", 29500)
    own = {"RANK": "0", "WORLD_SIZE": "2"}  # a caller with a rendezvous of its own (tests/test_gpu_protocol)
    assert check_launch_env(own) == LaunchEnv(0, 2, None, None, None, None)
    with pytest.raises(LaunchEnvError, match="WORLD_SIZE is not set"):
        check_launch_env({"RANK": "0"})
    assert is_lead_process({}) and is_lead_process({**GOOD, "RANK": "0"}) and not is_lead_process(GOOD)
    assert is_lead_process({"RANK": "3"})  # not a launched rank: it launches (and writes) itself


BAD_ENVS = [
    ({"RANK": "abc"}, "RANK must be an integer >= 0"),
    ({"RANK": "-1"}, "RANK must be an integer >= 0"),
    ({"RANK": "4"}, "RANK=4 must be less than WORLD_SIZE=4"),
    ({"WORLD_SIZE": "four"}, "WORLD_SIZE must be an integer from 1 to 16777216"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE must be an integer from 1 to 16777216"),
    ({"WORLD_SIZE": "1" + "0" * 20}, "WORLD_SIZE must be an integer from 1 to 16777216"),
    ({"MASTER_PORT": "http"}, "MASTER_PORT must be an integer from 1 to 65535"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT must be an integer from 1 to 65535"),
    ({"MASTER_ADDR": "a b"}, "MASTER_ADDR must be a host name or address"),
    ({"LOCAL_RANK": "x"}, "LOCAL_RANK must be an integer >= 0"),
    ({"LOCAL_RANK": "2"}, "LOCAL_RANK=2 must be less than LOCAL_WORLD_SIZE=2"),
    ({"LOCAL_WORLD_SIZE": "8"}, "LOCAL_WORLD_SIZE=8 must not exceed WORLD_SIZE=4"),
    ({"LOCAL_WORLD_SIZE": "3", "LOCAL_RANK": "0"}, "LOCAL_WORLD_SIZE=3 must divide WORLD_SIZE=4"),
    ({launch_env.RANKS_PER_NODE_ENV: "3"}, "RTMODEL_RANKS_PER_NODE=3 must divide WORLD_SIZE=4"),
]


@pytest.mark.parametrize("change, needle", BAD_ENVS, ids=lambda v: str(v)[:40])
def test_a_bad_environment_is_one_line_naming_the_variable(change, needle):
    with pytest.raises(LaunchEnvError) as info:
        check_launch_env({**GOOD, **change})
    assert needle in str(info.value) and "\n" not in str(info.value)


runner = CliRunner()


def _invoke(tmp_path, monkeypatch, *argv, env=None):
    """`rtmodel ARGV` in an empty working directory with only `env`'s rank variables set."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # gettempdir() read TMPDIR once, long ago
    clean = {name: None for name in RANK_ENV}
    clean.update({"XDG_DATA_HOME": str(tmp_path / "xdg"), "TMPDIR": str(tmp_path), **(env or {})})
    return runner.invoke(app, list(argv), env=clean)


def _one_error_line(res, *needles: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _nothing_written(tmp_path):
    assert not any((tmp_path / "work").iterdir())
    assert not list(tmp_path.glob("rtmodel-profile-*")) and not list(tmp_path.glob("rtmodel-validate-*"))


COMMANDS = {
    "profile": ("profile", "--out", "p.json", "--quick"),
    "validate": ("validate", "--profile", str(PROFILE), "--topology", "ring", "--results", "r.jsonl"),
}


@pytest.fixture
def no_launch(monkeypatch):
    """Fail the test if any rank would start (the checks must come first)."""
    import profiler.launch
    import profiler.rank
    import rtmodel_validation.launch

    monkeypatch.setattr(profiler.launch, "launch_local", lambda *a, **k: pytest.fail("profile started ranks"))
    monkeypatch.setattr(
        profiler.rank, "run_rank", lambda *a, **k: pytest.fail("profile joined a job"), raising=False
    )
    monkeypatch.setattr(
        rtmodel_validation.launch, "launch_local", lambda *a, **k: pytest.fail("validate started ranks")
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("change, needle", BAD_ENVS, ids=lambda v: str(v)[:40])
def test_bad_rank_environment_through_the_cli(command, change, needle, tmp_path, monkeypatch, no_launch):
    """Every rank says its own bad environment (not only rank 0), before any rendezvous."""
    res = _invoke(tmp_path, monkeypatch, *COMMANDS[command], env={**GOOD, **change})
    _one_error_line(res, needle)
    _nothing_written(tmp_path)


# ----------------------------------------------------------------------------- bounds before anything starts

HUGE = str(10**12)


def _bound_cases():
    bound = str(max_local_ranks())
    return [
        ("profile", ("--nproc-per-node", HUGE), ("--nproc-per-node", bound, HUGE)),
        ("profile", ("--nproc-per-node", "0"), ("--nproc-per-node", bound)),
        ("profile", ("--nproc-per-node", "-3"), ("--nproc-per-node",)),
        ("profile", ("--ranks-per-node", HUGE), ("--ranks-per-node", bound)),
        ("profile", ("--ranks-per-node", "0"), ("--ranks-per-node",)),
        ("validate", ("--nproc-per-node", HUGE), ("--nproc-per-node", bound, HUGE)),
        ("validate", ("--nproc-per-node", "0"), ("--nproc-per-node", ">= 2")),
        ("validate", ("--nproc-per-node", "1"), ("--nproc-per-node", ">= 2")),
        ("validate", ("--ranks-per-node", HUGE), ("--ranks-per-node", bound)),
        ("validate", ("--ranks-per-node", "-1"), ("--ranks-per-node",)),
    ]


@pytest.mark.parametrize("command, args, needles", _bound_cases(), ids=lambda v: " ".join(v)[:40])
def test_local_ranks_are_bounded_before_anything_starts(
    command, args, needles, tmp_path, monkeypatch, no_launch
):
    res = _invoke(tmp_path, monkeypatch, *COMMANDS[command], *args)
    _one_error_line(res, *needles)
    _nothing_written(tmp_path)


def test_the_bound_follows_the_machine(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert max_local_ranks() == 16
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert max_local_ranks() == 512
    monkeypatch.setattr(os, "cpu_count", lambda: 4096)
    assert max_local_ranks() == 1024
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert max_local_ranks() == 16


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "0", "-5", "1e9"])
def test_timeouts_are_finite_positive_and_at_most_a_week(command, value, tmp_path, monkeypatch, no_launch):
    res = _invoke(tmp_path, monkeypatch, *COMMANDS[command], "--timeout-s", value)
    _one_error_line(res, "--timeout-s", "7 days")
    _nothing_written(tmp_path)


def test_check_timeout_s_values():
    assert check_timeout_s(600) == 600.0 and check_timeout_s(7 * 24 * 3600) == 7 * 24 * 3600
    for bad in (math.inf, math.nan, 0, 1e-300, 0.5, -1, True, "x", None, 7 * 24 * 3600 + 1):
        with pytest.raises(launch_env.LaunchRefused, match="--timeout-s"):
            check_timeout_s(bad)


@pytest.mark.parametrize(
    "command, missing", [("profile", "torch"), ("validate", "torch"), ("validate", "decent_dp")]
)
def test_a_missing_cluster_extra_is_said_before_any_rank_starts(
    command, missing, tmp_path, monkeypatch, no_launch
):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    res = _invoke(tmp_path, monkeypatch, *COMMANDS[command])
    _one_error_line(res, f'{missing} is not installed: pip install "rtmodel-advisor[cluster]"')
    _nothing_written(tmp_path)


# ----------------------------------------------------------------------------- the helpers, on plain processes


def _gone(pid: int) -> bool:
    """No such process, or a zombie (dead, waiting for a parent that is not ours to reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _wait_gone(pids, timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if not _gone(p)]
        if not left:
            return []
        time.sleep(0.2)
    return [p for p in pids if not _gone(p)]


STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"


def test_stop_processes_escalates_to_sigkill_and_reaps():
    procs = [
        subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True),
        subprocess.Popen(["sleep", "600"]),
    ]
    assert procs[0].stdout.readline().strip() == "ready"  # its SIGTERM handler is in place
    assert stop_processes(procs, grace_s=0.5)
    assert procs[0].returncode == -signal.SIGKILL and procs[1].returncode == -signal.SIGTERM


def test_stop_processes_reaches_the_whole_group():
    """A child in its own session, whose own child lives on after it: the group is stopped, not just it."""
    script = "import subprocess, sys; p = subprocess.Popen(['sleep', '600']); print(p.pid, flush=True)"
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    grandchild = int(proc.stdout.readline())
    proc.wait(timeout=30)  # the leader is gone, its child is not
    assert not _gone(grandchild)
    assert stop_processes([proc], grace_s=5, group=True)
    assert not _wait_gone([grandchild], 30)


def test_children_die_with_a_killed_launcher(tmp_path):
    launcher = tmp_path / "launcher.py"
    launcher.write_text(
        textwrap.dedent(f"""
        import subprocess, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from rtmodel_util.process_control import die_with_parent
        p = subprocess.Popen(['sleep', '600'], preexec_fn=die_with_parent())
        print(p.pid, flush=True)
        time.sleep(600)
    """)
    )
    proc = subprocess.Popen([sys.executable, str(launcher)], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    proc.kill()
    proc.wait()
    assert not _wait_gone([child], 30), "the child outlived its SIGKILLed launcher"


def test_sigterm_exits_raises_systemexit_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as info, sigterm_exits():
        with sigterm_exits():  # nested: the outer block's handler stays
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert info.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert callable(die_with_parent(signal.SIGTERM))


def test_processes_are_stopped_and_tied_to_their_launcher_in_one_place():
    """Stopping a process (group) and the parent-death signal live in rtmodel_util.process_control only."""
    packages = [p.parent for p in ROOT.glob("*/__init__.py") if p.parent.name not in ("tests", "benchmarks")]
    copies = {
        str(path.relative_to(ROOT))
        for package in packages
        if package.name != "rtmodel_util"
        for path in package.rglob("*.py")
        if any(s in path.read_text() for s in ("os.killpg(", "PR_SET_PDEATHSIG", ".terminate()"))
    }
    assert not copies, copies


# ----------------------------------------------------------------------------- real launchers, real signals


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def _descendants(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _rtmodel(args, tmp_path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in RANK_ENV}
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)  # keep where torch is
    env.update(TMPDIR=str(tmp_path / "tmp"), XDG_DATA_HOME=str(tmp_path / "xdg"), PYTHONPATH=path)
    (tmp_path / "tmp").mkdir()
    return subprocess.Popen(
        [sys.executable, "-m", "rtmodel_cli", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,  # progress nobody reads must not fill a pipe and block the run
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(ready, proc: subprocess.Popen, what: str, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the launcher ended before {what}: {proc.returncode}\n{proc.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout_s:.0f} s")
        time.sleep(0.2)


def _signal_and_check(proc: subprocess.Popen, sig: int, tmp_path: Path, prefix: str, workers: int) -> None:
    pids, checked = _descendants(proc.pid), False
    try:
        assert len(pids) >= workers, pids
        os.kill(proc.pid, sig)
        rc = proc.wait(timeout=120)
        left = _wait_gone(pids, 60)
        assert not left, f"still running after {sig!r} to the launcher: {left}"
        if sig == signal.SIGTERM:
            assert rc == 128 + signal.SIGTERM  # it cleaned up and exited, not just vanished
        elif sig == signal.SIGINT:
            assert rc in (1, 130)
        deadline = time.monotonic() + 30  # after a SIGKILL the launcher's guardian removes it
        while list((tmp_path / "tmp").glob(f"{prefix}*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not list((tmp_path / "tmp").glob(f"{prefix}*")), "the run's temp directory was left behind"
        if sig != signal.SIGKILL:
            assert "Traceback" not in proc.stderr.read()
        checked = True
    finally:
        if not checked:  # a failed check must not leave its ranks training on the test machine
            proc.kill()
            for pid in [p for p in pids if not _gone(p)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGKILL]


@pytest.mark.cluster
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.slow
def test_a_signalled_profile_leaves_no_rank_and_no_temp_dir(sig, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "p.json"
    args = [
        "profile",
        "--out",
        str(out),
        "--quick",
        "--iterations",
        "100000",
        "--nproc-per-node",
        "2",
        "--timeout-s",
        "300",
        "--model",
        "synthetic",
        *[a for k, v in SMALL_MODEL.items() for a in ("--model-arg", f"{k}={v}")],
    ]
    proc = _rtmodel(args, tmp_path)
    _until(out.exists, proc, "the shape section (both ranks joined)")
    _signal_and_check(proc, sig, tmp_path, "rtmodel-profile-", 2)


@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_a_signalled_validate_leaves_no_torchrun_no_worker_and_no_temp_dir(sig, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("decent_dp")
    from calibration.synthetic import write_synthetic_profile

    profile = write_synthetic_profile(
        tmp_path / "p2.json", nodes=1, ranks_per_node=2, extra_workload=SMALL_MODEL
    )
    proc = _rtmodel(
        [
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
            "600",
        ],
        tmp_path,
    )

    def training() -> bool:
        return any(
            "DDP run" in p.read_text() for p in (tmp_path / "tmp").glob("rtmodel-validate-*/phases.txt")
        )

    _until(training, proc, "the DDP run (torchrun and both workers up)")
    _signal_and_check(proc, sig, tmp_path, "rtmodel-validate-", 3)  # torchrun + 2 workers


def test_a_run_directory_goes_however_its_process_ends(tmp_path):
    """run_directory's guardian removes the directory after a SIGKILL, and keeps it when asked."""
    code = (
        "import os, signal, sys\n"
        "from rtmodel_util.process_control import run_directory\n"
        "with run_directory('rtmodel-test-') as run:\n"
        "    print(run.path, flush=True)\n"
        "    if sys.argv[1] == 'keep':\n"
        "        run.keep()\n"
        "    else:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    for how in ("kill", "keep"):
        res = subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, env=env, timeout=120)
        path = Path(res.stdout.strip())
        assert path.parent == tmp_path, res.stderr
        deadline = time.monotonic() + 30
        while how == "kill" and path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert path.exists() == (how == "keep"), how

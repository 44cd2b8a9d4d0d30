"""A run's temp directory: one per launch, removed however the launch ends; what a killed launch left is
removed by the next one.

- `run_directory(family, tag)`: `TMPDIR/<family><pid>-<tag><random>`, removed when its block ends (normal
  exit, error, Ctrl-C, the SIGTERM that process_control.sigterm_exits turns into SystemExit) and, when this
  process is SIGKILLed, by a guardian process in its own session that waits on a pipe only this process
  holds open (the kernel closes it however this process ends).
- `child_tmpdir(path)`: the TMPDIR a launcher hands its children (torchrun, ranks), inside the run
  directory, so what they make there (torchrun's `torchelastic_*` logs, torch's `torchinductor_<user>`)
  goes with it: one removal takes everything.
- `sweep_stale(families)`: what nothing could remove (the launcher and its guardian both SIGKILLed, a
  reboot with a persistent TMPDIR) is removed by the next run_directory of its family, which says so in
  one line, and by `rtmodel emulate cleanup` (every family). A directory is removed only when it is a
  dead run's beyond doubt: its name is of the family, it is a real directory owned by this user, and its
  owner record (`.rtmodel-owner`: pid, that process's start time, boot id, pid namespace, host) names a
  process that no longer runs on this boot of this machine. A live run's, another user's, one from
  another host or container (another pid namespace), and one kept for the user (an error names a log in
  it) are never touched. A directory without a record (a launcher killed between creating it and writing
  the record, or one only partly removed) goes when the pid in its name is dead and it is a minute old.

Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from rtmodel_util.shown import say

__all__ = [
    "FAMILIES",
    "OWNER_FILE",
    "RunDirectory",
    "child_tmpdir",
    "describe_removed",
    "pid_runs",
    "run_directory",
    "sweep_stale",
]

# every family of run directory rtmodel makes (profile's and validate's launchers, the emulated cluster)
FAMILIES = ("rtmodel-profile-", "rtmodel-validate-", "rtmemu-")
OWNER_FILE = ".rtmodel-owner"
NO_RECORD_GRACE_S = 60.0  # a directory without a record is this old before its name's pid is trusted
_MAX_RECORD_BYTES = 4096
_GUARDIAN_TRIES = 120  # x 0.25 s: children dying with their launcher may still write for a while

_GUARDIAN = (
    "import os, shutil, sys, time\n"
    "if sys.stdin.buffer.read() != b'keep':\n"  # EOF without 'keep': the launcher ended, however it ended
    f"    for _ in range({_GUARDIAN_TRIES}):\n"
    "        shutil.rmtree(sys.argv[1], ignore_errors=True)\n"
    "        if not os.path.lexists(sys.argv[1]):\n"
    "            break\n"
    "        time.sleep(0.25)\n"
)


# ---- who owns a directory, and whether that owner still runs ------------------------------------------
def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read(256).strip() or None
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/PID/stat field 22); None where unknown."""
    text = _read_small(f"/proc/{pid}/stat") if pid > 0 else None
    try:
        return int(text.rsplit(")", 1)[1].split()[19])
    except (AttributeError, IndexError, ValueError):
        return None


def _machine() -> dict:
    """What tells this boot of this machine, as seen from this pid namespace."""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = None
    return {
        "host": socket.gethostname(),
        "boot": _read_small("/proc/sys/kernel/random/boot_id"),
        "pidns": pidns,
    }


def pid_runs(pid: int) -> bool:
    """True unless no process `pid` exists (another user's process exists too: kept)."""
    if pid <= 0:
        return True  # 0 and below name process groups: never a dead owner
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        pass  # another user's process, or no pid at all: not known dead
    return True


def _owner_gone(record: dict, here: dict) -> bool:
    """True only when the record's process surely no longer runs (see the module doc)."""
    if record.get("kept") or record.get("host") != here["host"]:
        return False  # kept for the user, or a run of another machine sharing this TMPDIR
    if record.get("boot") and here["boot"] and record["boot"] != here["boot"]:
        return True  # this machine rebooted since: nothing of that run still runs
    pid = record.get("pid")
    if record.get("pidns") != here["pidns"] or type(pid) is not int:
        return False  # another container's run: its processes are invisible from here
    if not pid_runs(pid):
        return True
    start = record.get("start")
    return type(start) is int and _start_time(pid) not in (None, start)  # the pid was reused since


def _read_record(path: Path) -> dict | None:
    """The directory's owner record, or None (missing, not a small regular file of ours, not JSON)."""
    try:
        fd = os.open(path / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > _MAX_RECORD_BYTES:
            return None
        record = json.loads(os.read(fd, _MAX_RECORD_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return record if isinstance(record, dict) else None


def _write_record(path: Path, record: dict) -> None:
    with open(path / OWNER_FILE, "w", encoding="utf-8") as fh:
        json.dump(record, fh)


def owner_record(pid: int | None = None) -> dict:
    """The record run_directory writes for `pid` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start": _start_time(pid), **_machine()}


# ---- the sweep -----------------------------------------------------------------------------------------
def sweep_stale(families: Iterable[str] = FAMILIES, root: str | os.PathLike | None = None) -> list[Path]:
    """Remove the run directories of `families` in `root` (TMPDIR) whose owner is surely dead (module
    doc); returns those removed."""
    import tempfile  # here: it pulls random, and most commands never make a run directory

    root = Path(root if root is not None else tempfile.gettempdir())
    names = "|".join(re.escape(f) for f in families)
    pattern = re.compile(rf"^(?:{names})(\d{{1,10}})-[A-Za-z0-9_-]+$")
    here, removed = _machine(), []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        match = pattern.match(entry.name)
        if not match:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue  # a symlink, a file, another user's
        path = Path(entry.path)
        record = _read_record(path)
        if record is not None:
            stale = _owner_gone(record, here)
        else:
            stale = not pid_runs(int(match.group(1))) and time.time() - st.st_mtime > NO_RECORD_GRACE_S
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path):
                removed.append(path)
    return removed


def describe_removed(paths: list[Path], shown: int = 3) -> str:
    """One line: 'removed 2 directories left by killed runs: A, B' (the first `shown` named)."""
    n = len(paths)
    names = ", ".join(str(p) for p in paths[:shown]) + (f" and {n - shown} more" if n > shown else "")
    return f"removed {n} director{'y' if n == 1 else 'ies'} left by killed runs: {names}"


def _say_on_stderr(line: str) -> None:
    say(f"[rtmodel] {line}", flush=True)


# ---- a run's directory ---------------------------------------------------------------------------------
def child_tmpdir(path: str | os.PathLike) -> str:
    """`path/tmp`, made if missing: the TMPDIR for a launch's children (torchrun, its ranks)."""
    tmp = Path(path) / "tmp"
    tmp.mkdir(exist_ok=True)
    return str(tmp)


@contextmanager
def run_directory(
    family: str, tag: str = "", say: Callable[[str], None] | None = None
) -> Iterator[RunDirectory]:
    """A fresh `TMPDIR/<family><pid>-<tag>XXXXXXXX` for one run, removed when the block ends unless
    `keep()` was called, and removed even when this process is SIGKILLed (its guardian). Dead runs'
    directories of the family are removed first and `say` (default: stderr) tells which."""
    import tempfile

    removed = sweep_stale((family,))
    if removed:
        (say or _say_on_stderr)(describe_removed(removed))
    path = Path(tempfile.mkdtemp(prefix=f"{family}{os.getpid()}-{tag}"))
    try:
        _write_record(path, owner_record())
        guardian = subprocess.Popen(
            [sys.executable, "-c", _GUARDIAN, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the terminal's process group does not stop it first
        )
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    run = RunDirectory(path)
    try:
        yield run
    finally:
        if run.kept:
            with suppress(OSError):
                _write_record(path, {"kept": True, **owner_record()})  # the sweep never removes it
        else:
            shutil.rmtree(path, ignore_errors=True)
        try:
            guardian.stdin.write(b"keep" if run.kept else b"")
            guardian.stdin.close()
        except OSError:
            pass
        guardian.wait()


class RunDirectory:
    """The directory `run_directory` made; `keep()` leaves it for the user (an error names a log in it)."""

    def __init__(self, path: Path):
        self.path, self.kept = path, False

    def keep(self) -> None:
        self.kept = True


TORCH_CACHE_VARS = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


@contextmanager
def torch_caches_scratch() -> Iterator[Path]:
    """Torch's compile caches in a scratch directory removed on exit. Why: importing MemTracker imports
    torch._dynamo, whose cache_dir_utils makes TMPDIR/torchinductor_<user> (the FakeTensor estimates in
    profiler/activation_memory.py run in the launcher and in advise, outside any run directory); the
    variables are restored on exit."""
    import tempfile

    before = {name: os.environ.get(name) for name in TORCH_CACHE_VARS}
    with tempfile.TemporaryDirectory(prefix="rtmodel-torch-cache-") as scratch:
        try:
            for name in TORCH_CACHE_VARS:
                os.environ[name] = os.path.join(scratch, name.lower())
            yield Path(scratch)
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

"""Process control: children that die with their launcher, SIGTERM turned into cleanup, stopping
processes, and a run's temp directory that goes however its launcher ends.

- `die_with_parent` / `set_parent_death_signal`: PR_SET_PDEATHSIG through libc's prctl (Linux
  prctl(2)), so a rank or forwarder never outlives a launcher killed outright;
- `sigterm_exits`: the SIGTERM a scheduler sends (scancel, a time limit) becomes SystemExit, so
  `except`/`finally` blocks stop ranks and remove directories;
- `stop_processes` / `terminate_then_kill`: SIGTERM, a grace period, then SIGKILL, reaping what stopped;
- `run_directory` (rtmodel_util.run_dirs, re-exported: launchers take it with the rest from here).

Why apart from rtmodel_util.launch_env: that module describes a job before it starts; this one acts on
processes. Standard library only: launchers and ranks call it without torch.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from rtmodel_util.run_dirs import RunDirectory, run_directory  # here too: launchers take both from here

__all__ = [
    "RunDirectory",
    "die_with_parent",
    "run_directory",
    "set_parent_death_signal",
    "sigterm_exits",
    "stop_processes",
    "terminate_then_kill",
]

# ---- children that die with their launcher ---------------------------------------------------------------
PR_SET_PDEATHSIG = 1


def _prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no death signal, the launcher's cleanup still runs
        return None


def set_parent_death_signal(sig: int, expected_parent: int | None = None) -> bool:
    """Ask Linux to send `sig` to this process when its parent (the thread that forked it) ends.

    Returns False when the parent is already gone (`expected_parent` given and no longer our parent):
    the caller should exit. A no-op returning True where prctl is unavailable."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    return expected_parent is None or os.getppid() == expected_parent


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A `preexec_fn` for subprocess.Popen: the child gets `sig` when the launcher dies, even by SIGKILL.

    SIGKILL for ranks (nothing of theirs to clean up); SIGTERM for a launcher of its own (torchrun), so it
    stops its workers first. The libc lookup happens here, before the fork; the child only calls it.
    Caveat: Linux fires it when the launcher *thread* that started the child exits."""
    prctl, parent = _prctl(), os.getpid()

    def preexec() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
            if os.getppid() != parent:  # the launcher died between fork and prctl
                os.kill(os.getpid(), sig)

    return preexec


@contextmanager
def sigterm_exits() -> Iterator[None]:
    """While the block runs, SIGTERM (scancel, SLURM's time limit, kill) raises SystemExit(143) in the
    main thread, so `except`/`finally` clean up (stop ranks, remove temp dirs) instead of the process
    vanishing. A second SIGTERM during that cleanup is ignored. A no-op outside the main thread and
    inside an outer sigterm_exits block (the outer one's cleanup is still running when this one's ends)."""
    outer = getattr(signal.getsignal(signal.SIGTERM), "rtmodel_sigterm_exits", False)
    if outer or threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = []

    def handler(signum, frame):
        if not fired:
            fired.append(signum)
            raise SystemExit(128 + signum)

    handler.rtmodel_sigterm_exits = True
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


# ---- stopping processes --------------------------------------------------------------------------------
def terminate_then_kill(
    send: Callable[[int], None], alive: Callable[[], bool], grace_s: float = 10.0, poll_s: float = 0.05
) -> bool:
    """SIGTERM through `send`, wait up to grace_s for `alive()` to turn False, then SIGKILL and wait as
    long again; True when everything stopped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not alive():
            return True
        send(sig)
        deadline = time.monotonic() + grace_s
        while alive():
            if time.monotonic() > deadline:
                break
            time.sleep(poll_s)
    return not alive()


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal: not ours to wait for
        return False


def stop_processes(procs: Iterable[subprocess.Popen], grace_s: float = 10.0, group: bool = False) -> bool:
    """Stop `procs` (and, with group=True, every process in each one's process group: start them with
    start_new_session=True) with SIGTERM, then SIGKILL after grace_s; reaps them. True when all stopped."""
    procs = list(procs)

    def send(sig: int) -> None:
        for p in procs:
            try:
                if group:
                    os.killpg(p.pid, sig)
                elif p.poll() is None:
                    p.send_signal(sig)
            except ProcessLookupError:
                pass

    def alive() -> bool:
        running = [p for p in procs if p.poll() is None]  # poll() reaps: a zombie leader leaves its group
        return bool(running) or (group and any(_group_exists(p.pid) for p in procs))

    return terminate_then_kill(send, alive, grace_s)

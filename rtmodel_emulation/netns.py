"""Thin wrappers over `ip`/`tc` for the run-owned network namespaces, stale-run cleanup and capability checks.

Every name we create is `rtmemu-<owner pid>-<token>-n<i>`, so parallel runs never collide and a later run
can tell leftovers of a killed run (owner pid dead) from namespaces of a run still going. The run's work
directory (TMPDIR/rtmemu-<owner pid>-...) is told the same way (`cleanup_stale_dirs`).
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path

from rtmodel_emulation.errors import EmulationError
from rtmodel_util.process_control import terminate_then_kill
from rtmodel_util.run_dirs import pid_runs, sweep_stale

PREFIX = "rtmemu-"
_NAME_RE = re.compile(r"^rtmemu-(\d+)-([0-9a-z]+)-n(\d+)$")


def run_cmd(argv: list[str], check: bool = True, timeout_s: float = 20.0) -> subprocess.CompletedProcess:
    """Run a short admin command; on failure raise EmulationError naming the command and its stderr."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError as exc:
        raise EmulationError(f"{argv[0]} not found: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise EmulationError(f"`{' '.join(argv)}` timed out after {timeout_s:.0f}s") from exc
    if check and proc.returncode != 0:
        raise EmulationError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def new_run_token() -> str:
    """`<pid>-<4 hex>`: the pid lets cleanup find dead owners, the random part separates runs of one pid."""
    return f"{os.getpid()}-{secrets.token_hex(2)}"


def namespace_name(token: str, node: int) -> str:
    return f"{PREFIX}{token}-n{node}"


def owner_pid(name: str) -> int | None:
    """Owner pid encoded in one of our namespace names, None for names that are not ours."""
    m = _NAME_RE.match(name)
    return int(m.group(1)) if m else None


def list_namespaces() -> list[str]:
    """All named network namespaces on this machine (ours and others')."""
    out = run_cmd(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(name: str) -> list[int]:
    proc = run_cmd(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_namespace_pids(name: str, grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL, every process inside one of OUR namespaces (only ours are ever passed here)."""

    def send(sig: int) -> None:
        for pid in namespace_pids(name):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    terminate_then_kill(send, lambda: bool(namespace_pids(name)), grace_s)


def delete_namespace(name: str) -> None:
    """Kill what runs inside, drop its TUN device explicitly, delete the namespace; missing is fine."""
    if name not in list_namespaces():
        return
    kill_namespace_pids(name)
    run_cmd(["ip", "-n", name, "link", "del", "tun0"], check=False)
    run_cmd(["ip", "netns", "del", name], check=False)


def cleanup_stale() -> list[str]:
    """Remove namespaces left by killed runs (our prefix, owner pid dead); returns the names removed."""
    removed = []
    for name in list_namespaces():
        pid = owner_pid(name)
        if pid is not None and not pid_runs(pid):
            delete_namespace(name)
            removed.append(name)
    return removed


def cleanup_stale_dirs() -> list[Path]:
    """Remove TMPDIR/rtmemu-* work directories of runs whose owner and its guardian were both killed
    (rtmodel_util.run_dirs.sweep_stale: ours, owner surely dead); returns the paths removed."""
    return sweep_stale((PREFIX,))


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """(True, "") when this machine can emulate a cluster, else (False, why) — used to skip tests."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "emulated cluster needs root (network namespaces, TUN, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` (iproute2) not found"
    if not os.path.exists("/dev/net/tun"):
        return False, "/dev/net/tun missing (no TUN support)"
    try:
        os.close(os.open("/dev/net/tun", os.O_RDWR))
    except OSError as exc:
        return False, f"cannot open /dev/net/tun: {exc}"
    name = namespace_name(new_run_token(), 0)
    try:
        run_cmd(["ip", "netns", "add", name])
        run_cmd(["ip", "-n", name, "tuntap", "add", "dev", "tun0", "mode", "tun"])
        run_cmd(["tc", "-n", name, "qdisc", "add", "dev", "tun0", "root", "tbf",
                 "rate", "100mbit", "burst", "128kb", "latency", "100ms"])
    except EmulationError as exc:
        return False, f"network namespace/TUN/tbf setup failed: {exc}"
    finally:
        delete_namespace(name)
    return True, ""

"""How a failing rank tells the launcher what happened: one small JSON record per rank.

Why files: when one rank dies the others fail soon after with symptoms ("connection closed by
peer", timeouts). The launcher reads every rank's record and names the root cause: a rank that died
without a word, else the earliest failure that is not a peer symptom. Each rank also keeps its current
phase in a file, so even a rank killed by the OS (OOM) can be reported with its phase.
"""

from __future__ import annotations

import json
import os
import signal
import time
import traceback
from pathlib import Path

from rtmodel_util.files import write_json_atomic
from rtmodel_util.launch_env import ERROR_DIR_ENV

_PEER_SYMPTOMS = ("connection closed", "connection reset", "timed out", "timeout", "broken pipe",
                  "socket", "peer")


def _dir() -> Path | None:
    d = os.environ.get(ERROR_DIR_ENV)
    return Path(d) if d else None


def note_phase(rank: int, phase: str) -> None:
    d = _dir()
    if d is not None:
        (d / f"rank{rank}.phase").write_text(phase)


def record_failure(rank: int, phase: str, exc: BaseException) -> bool:
    """Write this rank's failure record; False when no launcher is listening (torchrun / srun)."""
    d = _dir()
    if d is None:
        return False
    rec = {"rank": rank, "phase": phase, "time": time.time(), "message": one_line(exc),
           "traceback": "".join(traceback.format_exception(exc))}
    write_json_atomic(d / f"rank{rank}.json", rec, indent=None)
    return True


def one_line(exc: BaseException, limit: int = 400) -> str:
    """First line of an exception message (gloo/NCCL messages carry pages of C++ context)."""
    from profiler.errors import RankFailure, WorkloadError

    if isinstance(exc, RankFailure):
        return exc.detail
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, WorkloadError):
        return text[:limit]
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


# What a signal that ends a rank with no Python error usually means (the C library prints its own line,
# e.g. glibc's "double free or corruption", just above rtmodel's).
_SIGNAL_CAUSES = {
    signal.SIGABRT: "an abort in native code: torch's C++ kernels or the C library caught a fault",
    signal.SIGSEGV: "a crash in native code: torch's C++ kernels or an extension",
    signal.SIGBUS: "a crash in native code: a bad memory access",
    signal.SIGKILL: "from outside: often the kernel's out-of-memory killer, see dmesg",
    signal.SIGILL: "an instruction this CPU does not have: a build for another CPU",
}


def _signal_words(number: int) -> str:
    """'killed by signal 6 (SIGABRT, an abort in native code: ...)': the signal's name and its usual cause."""
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"killed by signal {number}"
    cause = _SIGNAL_CAUSES.get(sig)
    return f"killed by signal {number} ({sig.name}{', ' + cause if cause else ''})"


def read_failures(directory: Path, exit_codes: dict[int, int], killed: set[int]) -> list[dict]:
    """Failure reports for ranks that failed, most likely root cause first."""
    reports = []
    for rank, rc in sorted(exit_codes.items()):
        if rc == 0:
            continue
        path = directory / f"rank{rank}.json"
        if path.exists():
            rec = json.loads(path.read_text())
            symptom = any(s in rec["message"].lower() for s in _PEER_SYMPTOMS)
            reports.append({**rec, "order": (1 if symptom else 0, rec["time"])})
        elif rank not in killed:
            phase_file = directory / f"rank{rank}.phase"
            phase = phase_file.read_text() if phase_file.exists() else "startup"
            how = _signal_words(-rc) if rc < 0 else f"exited with code {rc}"
            reports.append({"rank": rank, "phase": phase, "message": f"process {how} without an error message",
                            "order": (-1, 0.0), "traceback": ""})
    reports.sort(key=lambda r: r["order"])
    return reports

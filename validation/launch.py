"""Start the validation job on this machine (torchrun --standalone) and collect rank 0's reports.

Why a subprocess and not torch.multiprocessing: torchrun sets the same environment a real cluster job
has (RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, OMP_NUM_THREADS=1), so the local run exercises the exact
code path of a multi-node run. The job runs in its own session so a timeout kills all of it and only it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from validation.errors import RankFailure, ValidationError

_REPO_ROOT = Path(__file__).resolve().parent.parent
_SECONDARY = ("Connection closed", "Connection reset", "DistBackendError", "timed out", "Timed out", "Broken pipe")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("LOGURU_LEVEL", "INFO")  # Decent-DP logs at DEBUG on rank 0
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(var, None)
    return env


def _kill(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _rank_errors(workdir: Path) -> list[tuple[int, str]]:
    out = []
    for p in workdir.glob("rank*.error"):
        try:
            out.append((int(p.stem.removeprefix("rank")), p.read_text().strip()))
        except (ValueError, OSError):
            continue
    # the root cause first: errors that are not another rank hanging up, then by rank
    return sorted(out, key=lambda e: (any(s in e[1] for s in _SECONDARY), e[0]))


def _last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errors = [ln for ln in lines if "Error" in ln or "error" in ln]
    return (errors or lines or ["no output"])[-1]


def launch_local(job: dict, nproc: int, timeout_s: float, workdir: Path) -> list[dict]:
    """Run `nproc` ranks of validation.worker on this machine; returns every rank's report (rank order)."""
    job_path = workdir / "job.json"
    job_path.write_text(json.dumps(job))
    log = workdir / "job.log"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
        "--nproc-per-node", str(nproc), "-m", "validation.worker", "--job", str(job_path), "--out", str(workdir),
    ]
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise ValidationError(
                f"the validation job ({nproc} ranks) did not finish within {timeout_s:g} s (--timeout-s); "
                f"log: {log}"
            ) from None
        except BaseException:
            _kill(proc)
            raise
    if rc != 0:
        errors = _rank_errors(workdir)
        if errors:
            rank, msg = errors[0]
            raise RankFailure(rank, "the validation job", f"{msg} (log: {log})")
        raise RankFailure(None, "the validation job", f"exit code {rc}: {_last_line(log)} (log: {log})")
    reports_path = workdir / "reports.json"
    if not reports_path.exists():
        raise RankFailure(0, "reporting", f"the validation job finished but rank 0 wrote no reports (log: {log})")
    reports = json.loads(reports_path.read_text())
    return sorted(reports, key=lambda r: r["rank"])

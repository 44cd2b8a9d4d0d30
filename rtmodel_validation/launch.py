"""Start the validation job on this machine (torchrun --standalone) and collect rank 0's reports.

Why a subprocess and not torch.multiprocessing: torchrun sets the same environment a real cluster job
has (RANK, LOCAL_WORLD_SIZE, MASTER_ADDR), so the local run exercises the exact code path of a
multi-node run. Its ranks share this machine's cores as the profile's local ranks do
(rtmodel_util.host_share), so both time the same compute. The job runs in its own session so a timeout kills all of it and only it.

Nothing outlives the launcher: Ctrl-C and SIGTERM (scancel, SLURM's time limit) stop torchrun, which stops
its workers (rtmodel_util.process_control: sigterm_exits, stop_processes); a launcher killed outright (SIGKILL,
OOM) sends torchrun SIGTERM through the kernel's parent-death signal, and each worker dies with torchrun
the same way (rtmodel_validation.worker). Rank 0 notes each phase in the work directory; the launcher echoes it.

Nothing left on disk either: torchrun and its workers get a TMPDIR inside the work directory
(rtmodel_util.run_dirs.child_tmpdir), so torchrun's `torchelastic_*` log directories and torch's
`torchinductor_<user>` go with it when validate removes it (and a killed run's go with the next run's sweep).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rtmodel_util.host_share import omp_threads_env
from rtmodel_util.launch_env import RANK_VARS
from rtmodel_util.process_control import die_with_parent, sigterm_exits, stop_processes
from rtmodel_util.run_dirs import child_tmpdir
from rtmodel_validation.errors import RankFailure, ValidationError
from rtmodel_validation.job import RankJob, RankReport
from rtmodel_validation.worker import PHASES_FILE

_REPO_ROOT = Path(__file__).resolve().parent.parent
_SECONDARY = ("Connection closed", "Connection reset", "DistBackendError", "timed out", "Timed out", "Broken pipe")
STOP_GRACE_S = 10.0  # torchrun's own grace for its workers is 30 s; after this we SIGKILL it (workers follow)
POLL_S = 0.2


def _env(nproc: int, workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = child_tmpdir(workdir)  # torchrun's torchelastic_* and the workers' temp files: in the run
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(omp_threads_env(nproc))  # torchrun would pin 1 only for nproc > 1, and keeps a set value
    env["PYTHONSAFEPATH"] = "1"  # the workers import rtmodel's `validation`, even beside a user's own folder
    for var in RANK_VARS:
        env.pop(var, None)
    return env


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


def _echo_phases(path: Path, seen: int, say: Callable[[str], None] | None) -> int:
    """Show the phases rank 0 noted since the first `seen` (one line each); returns how many are seen."""
    if say is None:
        return seen
    try:
        lines = path.read_text(errors="replace").split("\n")[:-1]  # complete lines only
    except OSError:
        return seen
    for line in lines[seen:]:
        say(line)
    return max(seen, len(lines))


def _wait(proc: subprocess.Popen, timeout_s: float, phases: Path, say) -> int | None:
    """The job's exit code, or None when it is still running after timeout_s; echoes phases meanwhile."""
    deadline, seen = time.monotonic() + timeout_s, 0
    while True:
        rc = proc.poll()
        seen = _echo_phases(phases, seen, say)
        if rc is not None:
            return rc
        if time.monotonic() > deadline:
            return None
        time.sleep(POLL_S)


def launch_local(job: RankJob, nproc: int, timeout_s: float, workdir: Path,
                 progress: Callable[[str], None] | None = None) -> list[RankReport]:
    """Run `nproc` ranks of rtmodel_validation.worker on this machine; returns every rank's report (rank order).

    `progress(line)` is called once per phase rank 0 reaches (DDP run, Decent-DP run, ...)."""
    job_path = workdir / "job.json"
    job_path.write_text(json.dumps(job.to_json()))
    log = workdir / "job.log"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
        "--nproc-per-node", str(nproc), "-m", "rtmodel_validation.worker", "--job", str(job_path), "--out", str(workdir),
    ]
    with log.open("w") as fh, sigterm_exits():
        proc = subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_env(nproc, workdir),
            start_new_session=True,
            preexec_fn=die_with_parent(signal.SIGTERM),  # torchrun stops its workers
        )
        try:
            rc = _wait(proc, timeout_s, workdir / PHASES_FILE, progress)
            if rc is None:
                raise ValidationError(
                    f"the validation job ({nproc} ranks) did not finish within {timeout_s:g} s (--timeout-s); "
                    f"log: {log}"
                )
        except BaseException:  # the timeout, Ctrl-C, SIGTERM: stop torchrun's whole session
            stop_processes([proc], STOP_GRACE_S, group=True)
            raise
    if rc != 0:
        errors = _rank_errors(workdir)
        if errors:
            rank, msg = errors[0]
            raise RankFailure(rank, "the validation job", f"{msg} (log: {log})")
        raise RankFailure(None, "the validation job", f"exit code {rc}: {_last_line(log)} (log: {log})")
    reports_path = workdir / "reports.json"
    if not reports_path.exists():
        raise RankFailure(
            0, "reporting", f"the validation job finished but rank 0 wrote no reports (log: {log})"
        )
    reports = [RankReport.from_json(r) for r in json.loads(reports_path.read_text())]
    return sorted(reports, key=lambda r: r.rank)

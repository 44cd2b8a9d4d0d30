"""`run_profile(ProfileOptions)`: act as one rank under torchrun/srun, or launch N local ranks and wait for them.

Why our own small launcher instead of `torch.distributed.run` for local runs: it is the same
env:// rendezvous torchrun sets up (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), without an agent process, and it lets us turn a failure into ONE line naming the
rank and phase (read from the ranks' failure records) instead of torchrun's stack of tracebacks.
Multi-node runs use torchrun (see docs/profiling.md); then every process is a rank here.

The ranks never outlive the launcher: Ctrl-C or SIGTERM (scancel) stops them on the way out
(rtmodel_util.process_control.sigterm_exits / stop_processes), and a launcher killed outright (SIGKILL, OOM)
takes them along through the kernel's parent-death signal (die_with_parent).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from profiler.errors import ProfilingError, RankFailure
from profiler.failures import read_failures
from profiler.options import ProfileOptions
from rtmodel_documents.profile_schema import PRETEND_NODES_ENV
from rtmodel_harness.local_launch import check_local_launch
from rtmodel_harness.model_choice import check_model_choice
from rtmodel_harness.recipe import Recipe
from rtmodel_util.backend_choice import HOST_RANKS_ENV, visible_gpus
from rtmodel_util.files import HeldLock, output_lock, pass_locks
from rtmodel_util.host_share import omp_threads_env
from rtmodel_util.launch_env import (
    DEBUG_ENV,
    DEVICE_INDEX_ENV,
    ERROR_DIR_ENV,
    NODE_NAME_ENV,
    RANKS_PER_NODE_ENV,
    in_launched_rank,
    is_lead_process,
    require_modules,
)
from rtmodel_util.process_control import (
    die_with_parent,
    run_directory,
    sigterm_exits,
    stop_processes,
)
from rtmodel_util.run_dirs import child_tmpdir

GRACE_S = 10.0  # after the first rank fails, how long the others get to fail on their own
STOP_GRACE_S = 5.0  # after SIGTERM, how long a rank gets before SIGKILL


def run_profile(opts: ProfileOptions) -> dict | None:
    """Take the profile `opts` asks for and write it to opts.out; returns the document (None on ranks other
    than 0). Acts as one rank under torchrun/srun, else launches opts.nproc_per_node local ranks.

    model / precision None: profiler.options.default_recipe (the paper's recipe on a GPU host).

    Raises ProfilingError (a ValueError) with one line on bad options or a failed rank."""
    from profiler.rank import run_rank

    opts = opts.resolved()
    require_modules("torch", error=ProfilingError)  # before any rank starts, not in each rank's traceback
    check_model_choice(opts.model, opts.model_args)
    if in_launched_rank() and not is_lead_process():
        return run_rank(opts)  # writes no output but its own trace, under the lead's lock on DIR
    if opts.trace_out is not None:
        from profiler.trace_out import check_trace_out

        check_trace_out(opts.trace_out, opts.out)  # before any rank starts, as --out is (the shell)
    with ExitStack() as held:  # a second command naming one of these outputs is refused, not lost
        locks = [held.enter_context(output_lock(opts.out, "--out"))]
        if opts.trace_out is not None:
            locks.append(held.enter_context(output_lock(opts.trace_out, "--trace-out", what="directory")))
        return run_rank(opts) if in_launched_rank() else launch_local(opts, locks)


def default_nproc(gpus: int) -> int:
    """One rank per GPU, at least 2 (the smallest world with communication to measure)."""
    return max(2, gpus)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_env(rank: int, n: int, k: int, port: int, errdir: str, locks: dict[str, str]) -> dict:
    env = dict(os.environ)
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(n),
        LOCAL_RANK=str(rank % k),
        LOCAL_WORLD_SIZE=str(k),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        **{
            ERROR_DIR_ENV: errdir,
            RANKS_PER_NODE_ENV: str(k),
            DEVICE_INDEX_ENV: str(rank),
            HOST_RANKS_ENV: str(n),
        },
    )
    # its nodes share this machine: no inter-node link to measure
    env[PRETEND_NODES_ENV] = "1" if k != n else ""
    if k != n and not os.environ.get(NODE_NAME_ENV):
        env[NODE_NAME_ENV] = f"{socket.gethostname()}-node{rank // k}"
    env.update(omp_threads_env(n))  # its ranks share this machine's cores
    if rank == 0:  # the rank that writes the profile holds the launcher's locks (by their descriptors)
        env.update(locks)
    env["TMPDIR"] = child_tmpdir(errdir)  # what the ranks (torch) put in TMPDIR goes with the run directory
    return env


def launch_local(opts: ProfileOptions, locks: list[HeldLock] | None = None) -> dict:
    """Start nproc_per_node ranks of `python -m profiler` on this machine and wait for all of them.

    locks: the output locks this launcher holds (run_profile), passed to rank 0, which writes the
    profile (rtmodel_util.files.pass_locks: its descriptors, not an environment flag)."""
    from rtmodel_util.files import check_output_path

    check_output_path(opts.out, "--out")  # the shell checked it too; this is for run_profile's callers
    gpus = visible_gpus()
    n = opts.nproc_per_node or default_nproc(gpus)
    k = opts.ranks_per_node or n
    if n < 2:
        raise ProfilingError(
            "a profile needs at least 2 ranks (an all-reduce needs a partner); use --nproc-per-node 2 or more"
        )
    if n % k:
        raise ProfilingError(f"--ranks-per-node {k} does not divide the {n} local processes")
    recipe = Recipe(opts.precision, opts.optimizer)  # fp16 without a GPU is refused before any rank starts
    backend, why = check_local_launch(recipe, opts.backend, n, gpus, ProfilingError)
    opts = replace(opts, backend=backend)  # the ranks take the launcher's choice as given
    if why and opts.progress:
        print(f"[rtmodel profile] {why}", flush=True)
    if opts.progress:
        print(f"[rtmodel profile] launching {n} local ranks ({n // k} pretend node(s) x {k})", flush=True)
    payload = opts.to_json()
    lock_env, lock_fds = pass_locks(locks or [])
    port = _free_port()
    procs: list[subprocess.Popen] = []
    killed: set[int] = set()
    # scancel / kill: SystemExit, so the except below stops the ranks; the failure records' directory goes
    # however this ends (a SIGKILL included: run_directory's guardian)
    with sigterm_exits(), run_directory("rtmodel-profile-") as run:
        errdir = str(run.path)
        try:
            for r in range(n):
                # -P: rtmodel's own `profiler`, even in a folder that holds one of the user's (safe path)
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-P", "-m", "profiler", "--options-json", payload],
                        env=_rank_env(r, n, k, port, errdir, lock_env),
                        pass_fds=lock_fds if r == 0 else (),
                        preexec_fn=die_with_parent(),
                    )
                )
            first_failure = None
            while any(p.poll() is None for p in procs):
                if first_failure is None and any(p.returncode not in (None, 0) for p in procs):
                    first_failure = time.monotonic()
                if first_failure is not None and time.monotonic() - first_failure > GRACE_S:
                    killed.update(r for r, p in enumerate(procs) if p.poll() is None)
                    stop_processes(procs, STOP_GRACE_S)
                time.sleep(0.05)
            codes = {r: p.wait() for r, p in enumerate(procs)}
            if any(codes.values()):
                raise _failure(Path(errdir), codes, killed, opts.out)
        except BaseException:  # Ctrl-C, SIGTERM, or a launch that failed halfway: never leave ranks behind
            stop_processes(procs, STOP_GRACE_S)
            raise
    return json.loads(Path(opts.out).read_text(encoding="utf-8"))


def _failure(errdir: Path, codes: dict[int, int], killed: set[int], out: str) -> ProfilingError:
    reports = read_failures(errdir, codes, killed)
    if not reports:
        return ProfilingError(f"the profile ranks stopped (exit codes {codes}) without saying why")
    first = reports[0]
    if os.environ.get(DEBUG_ENV) and first.get("traceback"):
        print(first["traceback"], file=sys.stderr)
    err = RankFailure(first["rank"], first["phase"], first["message"])
    extra = f" ({len(reports) - 1} other rank(s) failed after it)" if len(reports) > 1 else ""
    partial = ""
    try:
        doc = json.loads(Path(out).read_text(encoding="utf-8"))
        if not doc.get("complete") and doc.get("sections_done"):
            partial = (
                f"; partial profile kept in {out} (sections done: {', '.join(doc['sections_done'])}); "
                f"finish it with `rtmodel profile --resume {shlex.quote(str(out))}` and the options "
                "of this run"
            )
    except (OSError, ValueError):
        pass
    err.args = (str(err) + extra + partial,)
    return err

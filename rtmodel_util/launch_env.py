"""Who this process is in a launched job, and the bounds every launcher checks before it starts anything.

- the environment variables launchers and ranks share, and the one test for "this process is a rank of
  a launched job" (`in_launched_rank`), with the check of that environment before any rendezvous
  (`check_launch_env`: a RANK >= WORLD_SIZE otherwise waits the whole timeout, then dumps C++ frames);
- the bounds every launcher applies before it starts anything: local ranks (`check_local_ranks`),
  timeouts (`check_timeout_s`), the [cluster] extra being installed (`require_modules`).

Why apart from rtmodel_util.process_control: these are rules about a job's description (names, numbers,
packages), read and checked before any process exists; starting, signalling and stopping processes is
the other module's job. Standard library only (plus the model's error type): launchers and ranks call it
without torch.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from runtime_model.core.defaults import MAX_GPUS
from runtime_model.core.errors import DEBUG_ENV, UserError

__all__ = [
    "DEBUG_ENV",
    "DEFAULT_TIMEOUT_S",
    "DEVICE_INDEX_ENV",
    "ERROR_DIR_ENV",
    "LAUNCH_VARS",
    "NODE_NAME_ENV",
    "RANKS_PER_NODE_ENV",
    "RANK_VARS",
    "LaunchEnv",
    "LaunchEnvError",
    "LaunchRefused",
    "check_launch_env",
    "check_local_ranks",
    "check_timeout_s",
    "in_launched_rank",
    "is_lead_process",
    "launch_env",
    "max_local_ranks",
    "require_modules",
]

# ---- the environment launchers and ranks share ------------------------------------------------------------
NODE_NAME_ENV = "RTMODEL_NODE_NAME"  # overrides socket.gethostname() as this rank's node name
RANKS_PER_NODE_ENV = "RTMODEL_RANKS_PER_NODE"  # set by launchers that pretend nodes (--ranks-per-node)
DEVICE_INDEX_ENV = "RTMODEL_DEVICE_INDEX"  # GPU index when LOCAL_RANK is a pretend-node index
ERROR_DIR_ENV = "RTMODEL_ERROR_DIR"  # where ranks leave failure records for the local launcher
# what torchrun, srun wrappers or our launcher set for every rank (env:// rendezvous); all four make a rank
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# a rank's identity: a launcher strips these from the environment it hands to a job of its own
RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID")

CLUSTER_HINT = 'pip install "rtmodel-advisor[cluster]"'


class LaunchRefused(UserError):
    """A launch that cannot work as asked (too many local ranks, a timeout that is no timeout, torch
    missing); one line naming the flag or the package (exit 2)."""


class LaunchEnvError(LaunchRefused):
    """This process's rank environment (RANK, WORLD_SIZE, ...) is malformed or inconsistent; the message
    names the variable. It is this process's own mistake, so every rank that has it says it."""


def in_launched_rank(environ: Mapping[str, str] | None = None) -> bool:
    """True when torchrun / srun / our launcher / a static env:// setup made this process one rank of a
    job: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT all set. Otherwise rtmodel launches its own ranks."""
    env = os.environ if environ is None else environ
    return all(env.get(v) for v in LAUNCH_VARS)


def is_lead_process(environ: Mapping[str, str] | None = None) -> bool:
    """True for the process that writes a job's outputs: a launcher, or rank 0 of a launched job."""
    env = os.environ if environ is None else environ
    if not in_launched_rank(env):
        return True
    try:
        return int(env["RANK"]) == 0
    except ValueError:
        return False


@dataclass(frozen=True)
class LaunchEnv:
    """This rank's place in the job, as its launcher described it (checked: see check_launch_env).
    local_rank / local_world_size are None where the launcher (a plain srun setup) did not set them;
    master_addr / master_port only where a caller runs a rank with a rendezvous of its own (a launched
    rank, see in_launched_rank, always has them)."""

    rank: int
    world_size: int
    local_rank: int | None
    local_world_size: int | None
    master_addr: str | None
    master_port: int | None


_WHO = "as torchrun/srun sets it for each rank"


def _env_int(env: Mapping[str, str], name: str, minimum: int, maximum: int | None = None) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        span = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise LaunchEnvError(f"{name} must be an integer {span} ({_WHO}), got {raw!r}")
    return value


def check_launch_env(environ: Mapping[str, str] | None = None) -> LaunchEnv:
    """This rank's environment, checked before any rendezvous: LaunchEnvError (one line naming the
    variable) when it is missing, not a number, or inconsistent (RANK >= WORLD_SIZE, LOCAL_RANK >=
    LOCAL_WORLD_SIZE, LOCAL_WORLD_SIZE not dividing WORLD_SIZE: rtmodel needs equal nodes).
    RANK and WORLD_SIZE are required; every other variable is checked when it is set."""
    env = os.environ if environ is None else environ
    for name in ("RANK", "WORLD_SIZE"):
        if not env.get(name):
            raise LaunchEnvError(f"{name} is not set ({_WHO}); every rank needs RANK and WORLD_SIZE")
    world = _env_int(env, "WORLD_SIZE", 1, MAX_GPUS)  # no job has more ranks than rtmodel answers for
    rank = _env_int(env, "RANK", 0)
    port = _env_int(env, "MASTER_PORT", 1, 65535)
    local_rank = _env_int(env, "LOCAL_RANK", 0)
    local_world = _env_int(env, "LOCAL_WORLD_SIZE", 1)
    pretend = _env_int(env, RANKS_PER_NODE_ENV, 1)
    addr = env.get("MASTER_ADDR") or None
    if addr is not None and (not addr.strip() or any(c.isspace() for c in addr.strip())):
        raise LaunchEnvError(
            f"MASTER_ADDR must be a host name or address ({_WHO}), got {env['MASTER_ADDR']!r}"
        )
    if rank >= world:
        raise LaunchEnvError(f"RANK={rank} must be less than WORLD_SIZE={world} (ranks count from 0)")
    if local_world is not None:
        if local_world > world:
            raise LaunchEnvError(f"LOCAL_WORLD_SIZE={local_world} must not exceed WORLD_SIZE={world}")
        if world % local_world:
            raise LaunchEnvError(
                f"LOCAL_WORLD_SIZE={local_world} must divide WORLD_SIZE={world} "
                "(rtmodel needs the same number of ranks on every node)"
            )
        if local_rank is not None and local_rank >= local_world:
            raise LaunchEnvError(f"LOCAL_RANK={local_rank} must be less than LOCAL_WORLD_SIZE={local_world}")
    elif local_rank is not None and local_rank >= world:
        raise LaunchEnvError(f"LOCAL_RANK={local_rank} must be less than WORLD_SIZE={world}")
    if pretend is not None and world % pretend:
        raise LaunchEnvError(f"{RANKS_PER_NODE_ENV}={pretend} must divide WORLD_SIZE={world}")
    return LaunchEnv(rank, world, local_rank, local_world, addr and addr.strip(), port)


def launch_env(environ: Mapping[str, str] | None = None) -> LaunchEnv | None:
    """check_launch_env() when this process is a launched rank, else None (rtmodel launches the ranks)."""
    return check_launch_env(environ) if in_launched_rank(environ) else None


# ---- bounds checked before anything starts ---------------------------------------------------------------
RANKS_PER_CPU = 8
MIN_LOCAL_RANKS_BOUND = 16
LOCAL_RANKS_CEILING = 1024
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MIN_TIMEOUT_S = 1.0  # a torchrun job's start-up (interpreters, rendezvous) takes seconds
# --timeout-s of `rtmodel profile` and `rtmodel validate` (one flag, one default): validate's 600 s, not the
# profile's former 300 s. The larger is the safer: it only delays the error a dead rank causes, while a
# first NCCL communicator, a multi-node rendezvous or a large model's collective can take minutes.
DEFAULT_TIMEOUT_S = 600.0


def max_local_ranks() -> int:
    """The most ranks (processes) rtmodel starts on one machine, or pretends one node has:
    8 per CPU core, at least 16, never more than 1024.

    Why: every rank is a Python process with torch loaded (hundreds of MB, one busy thread at least).
    Beyond a few per core they only time-slice, so what a profile or validation measures is the
    scheduler, not the network; GPU machines have more cores than GPUs / 8 (8 GPUs come with dozens
    of cores), so one rank per GPU always fits. 16 keeps small test machines able to pretend two nodes of 8. 1024 is past where
    gloo's full mesh (n^2 / 2 TCP connections on this machine) and the file-descriptor limit give out.
    The bound is checked before any process starts: 10^12 ranks used to be spawned one by one."""
    return min(LOCAL_RANKS_CEILING, max(MIN_LOCAL_RANKS_BOUND, RANKS_PER_CPU * (os.cpu_count() or 1)))


def check_local_ranks(value, flag: str, minimum: int = 1, error: type[UserError] = LaunchRefused) -> int:
    """`value` when it is an integer from `minimum` to max_local_ranks(); `error` naming `flag` otherwise."""
    bound = max_local_ranks()
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= bound:
        raise error(
            f"{flag} must be an integer from {minimum} to {bound} (the most ranks this machine "
            f"runs: {RANKS_PER_CPU} per CPU core, at least {MIN_LOCAL_RANKS_BOUND}, at most "
            f"{LOCAL_RANKS_CEILING}), got {value!r}"
        )
    return value


def check_timeout_s(value, flag: str = "--timeout-s", error: type[UserError] = LaunchRefused) -> float:
    """A finite timeout of at least MIN_TIMEOUT_S and at most 7 days (longer than any scheduler's time
    limit; `inf` would overflow the rendezvous' timedelta and a collective's millisecond count)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (MIN_TIMEOUT_S <= seconds <= MAX_TIMEOUT_S):
        raise error(
            f"{flag} must be a number of seconds from {MIN_TIMEOUT_S:.0f} (starting the ranks alone takes "
            f"longer) to {MAX_TIMEOUT_S:.0f} (7 days), got {value!r}"
        )
    return seconds


def require_modules(*names: str, error: type[UserError] = LaunchRefused) -> None:
    """Raise `error` (one line with the install hint) for the first module that is not installed."""
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise error(f"{name} is not installed: {CLUSTER_HINT}")

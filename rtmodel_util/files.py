"""The rules for every file rtmodel reads or writes, in one place.

Outputs (`profile --out` and `--trace-out`, `calibrate --out`, `validate --results`, `plot --out` and
`--data`, the emulator's stats):
- checked before any work (`check_output_path`; a directory output such as `--trace-out DIR`:
  `check_output_dir`), with the same words for every command, creating nothing;
- only regular files are written: a device node, FIFO or socket is refused (an atomic rename over the
  system's null device, as root, would replace it); a symbolic link is written through, so the link
  stays and its target is updated;
- never one of the command's own inputs, however it is named: the same file through a symbolic or a
  hard link is the same file (`os.path.samefile`), and the caller passes every input it reads, those a
  --scenario file names included (`calibrate X --out X` would destroy the profile it reads);
- written whole or not at all (`write_atomic`, the one writer of figures, traces, results, profiles and
  calibrations: a temp file beside the target, every byte written (a short write is retried, a failed
  one raises), fsync, its size checked, rename): on a full disk the old file stays as it was and no
  temp file is left;
- one writer at a time (`output_lock`): a second command naming the same output is refused at once
  instead of one silently losing the other's work (an appender of a shared log may wait a little
  for the lock instead: `wait_s`).

The lock is an flock on a hidden file beside the output, held for the whole command. Nothing in the
environment can skip it. A local launcher that holds it and starts the rank that writes the output
passes that rank its own open descriptor of the lock file (`pass_locks`: the descriptor is inherited,
and the environment only says its number). The rank's `output_lock` accepts a named descriptor only
when it is the current lock file (same device and inode) and an flock on it succeeds, i.e. when it
shares the launcher's lock (an inherited descriptor shares its open file description, and so its
lock) or nobody holds the lock at all; naming any other number, or one of a lock held by another
command, changes nothing: the lock is then taken, or refused, as usual. Why not an environment flag
("the launcher holds it"): a user can set it, and two commands would write one file. The job's other
ranks take no lock: each writes only its own trace, into a directory its launcher (or rank 0 under
torchrun) holds locked.

Standard library only (plus the model's error type): launchers and ranks call it without torch.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from runtime_model.core.errors import UserError

# The numbers of the lock descriptors a launcher passed to its writing rank (pass_locks); each is checked
# against the lock file before it counts (_inherited): the environment alone proves nothing.
LOCK_FDS_ENV = "RTMODEL_OUTPUT_LOCK_FDS"


class OutputPathError(UserError):
    """An output path that cannot be written; the message names the flag and the path (exit 2)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def output_path_arg(text: str | None, flag: str) -> Path | None:
    """An output option as typed, as a Path (None: not given). A trailing slash means a directory, and a
    Path drops it: `--out newdir/` would otherwise write a file named `newdir`."""
    if text is None:
        return None
    if _spells_directory(text):
        raise _directory_error(flag, text)
    return Path(text)


def _spells_directory(text: str) -> bool:
    return text.endswith(("/", os.sep))


def _directory_error(flag: str, text: str) -> OutputPathError:
    return OutputPathError(f"{flag} {text} is a directory; give a file path, e.g. {Path(text) / 'NAME'}")


def output_target(path: str | os.PathLike) -> Path:
    """The file a write to `path` lands in: a symbolic link's target (the link itself stays)."""
    p = Path(os.fspath(path))
    return Path(os.path.realpath(p)) if p.is_symlink() else p


def check_output_path(
    path: str | os.PathLike, flag: str, inputs: Mapping[str, str | os.PathLike | None] | None = None
) -> Path:
    """`path` as a Path when a command may write it; OutputPathError (one line naming `flag`) otherwise.

    inputs: the command's input files by flag (e.g. {"PROFILE": "p.json"}); the output may not be one of
    them. Nothing is created or written: the caller writes later (atomically), after its work is done."""
    text = os.fspath(path)
    if not text.strip():
        raise OutputPathError(f"{flag} needs a file path, got an empty one")
    p = Path(text)
    if not _spells_directory(text):
        _check_name_length(p, f"{flag} {text}")  # first: stat() of a longer name raises
    if p.is_dir() or _spells_directory(text):
        raise _directory_error(flag, text)
    target = output_target(p)
    parent = target.parent  # Path("x.json").parent is Path("."): the working directory
    if not parent.exists():
        raise OutputPathError(f"{flag} {text}: directory {parent} does not exist (create it first)")
    if not parent.is_dir():
        raise OutputPathError(f"{flag} {text}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{flag} {text}: directory {parent} is not writable")
    _check_name_length(target, f"{flag} {text}")
    if _existing_regular_file_mode(target, f"{flag} {text}") is not None:
        if not os.access(target, os.W_OK):
            raise OutputPathError(f"{flag} {text}: the file exists and is not writable")
        for in_flag, in_path in (inputs or {}).items():
            if in_path is not None and same_file(target, in_path):
                raise OutputPathError(
                    f"{flag} {text} is also the input {in_flag}; writing it would destroy what this "
                    "command reads: give another output file"
                )
    return p


def check_output_dir(
    path: str | os.PathLike, flag: str, inputs: Mapping[str, str | os.PathLike | None] | None = None
) -> Path:
    """`path` as a Path when a command may write its files into it (`--trace-out DIR`): an existing
    directory it can write, or a new one whose parent exists and can be written (the writer creates it);
    OutputPathError (one line naming `flag`) otherwise: an empty path (it would mean the working
    directory), an existing file or device, or one of the command's `inputs` (by flag). Creates nothing."""
    text = os.fspath(path)
    if not text.strip():
        raise OutputPathError(f"{flag} needs a directory path, got an empty one")
    p = Path(text)
    label = f"{flag} {text}"
    for in_flag, in_path in (inputs or {}).items():
        if in_path is not None and same_file(p, in_path):
            raise OutputPathError(f"{label} is also {in_flag}; give a directory of its own for the traces")
    if p.exists():
        if not p.is_dir():
            mode = p.stat().st_mode
            kind = "a file" if stat.S_ISREG(mode) else _kind(mode)
            raise OutputPathError(f"{label} is {kind}; give a directory (it is created if missing)")
        if not os.access(p, os.W_OK | os.X_OK):
            raise OutputPathError(f"{label}: the directory is not writable")
        return p
    _check_name_length(p, label)
    parent = Path(os.path.realpath(p)).parent
    if not parent.is_dir():
        raise OutputPathError(f"{label}: directory {parent} does not exist (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"{label}: directory {parent} is not writable")
    return p


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """One file by two names, written or not yet: the same path once links are followed, or a hard link."""
    try:
        return os.path.realpath(a) == os.path.realpath(b) or os.path.samefile(a, b)
    except (OSError, ValueError):  # not both there yet, or a name with a NUL
        return False


def _check_name_length(target: Path, label: str) -> None:
    """A name the file system cannot hold is refused before the work, not when the result is written."""
    try:
        name_max = os.pathconf(target.parent if target.parent.is_dir() else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    length = len(os.fsencode(target.name))
    if length > name_max:
        raise OutputPathError(f"{label}: the file name is {length} bytes; this file system allows {name_max}")


def _existing_regular_file_mode(target: Path, label: str) -> int | None:
    """The mode of `target` when it is an existing regular file, None when it does not exist;
    OutputPathError naming `label` for anything else (a device, FIFO, socket or directory)."""
    if not target.exists():
        return None
    mode = target.stat().st_mode
    if not stat.S_ISREG(mode):
        raise OutputPathError(f"{label} is {_kind(mode)}; rtmodel writes only regular files")
    return stat.S_IMODE(mode)


def write_atomic(path: str | os.PathLike, data: str | bytes, durable: bool = True) -> None:
    """Write `data` to `path` whole or not at all: a temp file beside the target, every byte written,
    fsync, its size checked, rename.

    Refuses (OutputPathError) a target that exists and is not a regular file, so a rename never
    replaces a device node or a FIFO; a symbolic link is written through. A short write is continued
    and a write that fails (a full disk: ENOSPC) raises; a file system that reports bytes it did not
    keep is caught by the size check. Leaves the old file as it was and no temp file behind when
    anything fails, and keeps the mode of the file it replaces. durable=False skips the fsync (for a
    stats file rewritten every second by a time-critical process)."""
    target = output_target(path)
    old_mode = _existing_regular_file_mode(target, str(path))
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise TypeError(f"write_atomic writes str or bytes, not {type(data).__name__}")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".rtmodel-", suffix=".tmp")  # fits whatever the name
    try:
        try:
            _write_all(fd, payload)
            if durable:
                os.fsync(fd)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size != len(payload):
            raise OSError(errno.EIO, f"wrote {size} of {len(payload)} bytes", str(path))
        os.chmod(tmp, old_mode if old_mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Every byte of `data` to `fd`: os.write may write fewer than asked (then the rest is written), and
    raises on a full disk; a write of nothing is a full disk too, never a silent loop."""
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


def write_json_atomic(path: str | os.PathLike, doc, indent: int | None = 1, durable: bool = True) -> None:
    """`doc` as JSON (strict: no NaN or Infinity, which other readers reject), atomically."""
    write_atomic(path, json.dumps(doc, indent=indent, allow_nan=False) + "\n", durable)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _lock_file(target: Path) -> Path:
    """The output's lock, beside it: every job that can write the output finds the same lock whatever
    its TMPDIR (SLURM gives each job its own). A fixed-length hidden name, whatever the output's length."""
    real = Path(os.path.realpath(target))
    key = hashlib.sha256(str(real).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return real.parent / f".rtmodel-lock-{key}"


@dataclass(frozen=True)
class HeldLock:
    """An output lock this process holds: its lock file and the descriptor that holds the flock."""

    lock_file: Path
    fd: int


@contextlib.contextmanager
def output_lock(
    path: str | os.PathLike, flag: str, wait_s: float = 0.0, what: str | None = None
) -> Iterator[HeldLock]:
    """Hold an exclusive lock on the output `path` (a file, or a directory of outputs) for the whole
    command; OutputPathError at once if another rtmodel command holds it (after up to `wait_s` seconds
    of waiting for it: a short append to a shared log). Creating the lock file is also the proof that
    the output's directory accepts new files (`/proc/x`, a read-only mount: refused here, before work).
    Released when the process ends, however it ends (flock); the lock file is removed on release (one a
    killed command left behind is simply taken again).

    A rank started by a launcher that holds the lock holds it through the descriptor the launcher passed
    (pass_locks; checked, never taken on the environment's word: see the module's doc)."""
    target = output_target(path)
    lock = _lock_file(target)
    inherited = _inherited(lock)
    if inherited is not None:
        yield HeldLock(lock, inherited)  # the launcher's lock: its descriptor stays open, the file stays
        return
    what = what or ("directory" if target.is_dir() else "file")  # as the messages name the output
    fd = _take_lock(lock, f"{flag} {os.fspath(path)}", what, wait_s)
    try:
        yield HeldLock(lock, fd)
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        os.close(fd)


def _inherited(lock: Path) -> int | None:
    """The descriptor among LOCK_FDS_ENV's that holds the flock on `lock` for this process, or None.

    Counts only a descriptor open on the current lock file (same device and inode) on which an flock
    succeeds: one inherited from the launcher that holds the lock shares that lock; any other number
    names nothing, a closed descriptor or another file."""
    for text in os.environ.get(LOCK_FDS_ENV, "").split(","):
        if not text.strip().isdigit():
            continue
        fd = int(text)
        try:
            mine, current = os.fstat(fd), os.stat(lock, follow_symlinks=False)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) != (current.st_dev, current.st_ino):
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue
        return fd
    return None


def _take_lock(lock: Path, label: str, what: str = "file", wait_s: float = 0.0) -> int:
    """flock on `lock` (waiting up to `wait_s` for its holder), retried when its holder removed the file
    between our open and our lock (we would hold a lock on a name nobody else can find)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            raise OutputPathError(
                f"{label}: cannot create a file in {lock.parent} ({exc.strerror}); give a {what} in a "
                "directory you can write"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            raise OutputPathError(
                f"{label}: another rtmodel command is writing this {what} now; wait for it or give another {what}"
            ) from None
        try:
            if os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def pass_locks(locks: Iterable[HeldLock]) -> tuple[dict[str, str], tuple[int, ...]]:
    """(the environment entry, the descriptors to pass: subprocess's pass_fds) with which a launcher
    holding `locks` lets the one rank it starts to write those outputs hold them too (output_lock)."""
    fds = tuple(held.fd for held in locks)
    return {LOCK_FDS_ENV: ",".join(map(str, fds))}, fds

"""The rules for every file rtmodel reads or writes, in one place.

Outputs (`profile --out`, `calibrate --out`, `validate --results`, `plot --out`, the emulator's stats):
- checked before any work (`check_output_path`), with the same words for every command, creating nothing;
- only regular files are written: a device node, FIFO or socket is refused (an atomic rename over the
  system's null device, as root, would replace it); a symbolic link is written through, so the link
  stays and its target is updated;
- never one of the command's own inputs (`calibrate X --out X` would destroy the profile it reads);
- written whole or not at all (`write_atomic`: a temp file beside the target, fsync, rename);
- one writer at a time (`output_lock`): a second command naming the same output is refused at once
  instead of one silently losing the other's work.

Standard library only (plus the model's error type): launchers and ranks call it without torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from runtime_model.core.errors import UserError

LOCK_HELD_ENV = (
    "RTMODEL_OUTPUT_LOCK_HELD"  # the launcher holds the lock on this path; its ranks do not retake it
)


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
            if in_path is not None and _same_file(target, in_path):
                raise OutputPathError(
                    f"{flag} {text} is also the input {in_flag}; writing it would destroy what this "
                    "command reads: give another output file"
                )
    return p


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


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_atomic(path: str | os.PathLike, data: str | bytes, durable: bool = True) -> None:
    """Write `data` to `path` whole or not at all: a temp file beside the target, fsync, rename.

    Refuses (OutputPathError) a target that exists and is not a regular file, so a rename never
    replaces a device node or a FIFO; a symbolic link is written through. Leaves no temp file behind
    when anything fails, and keeps the mode of the file it replaces. durable=False skips the fsync
    (for a stats file rewritten every second by a time-critical process)."""
    target = output_target(path)
    old_mode = _existing_regular_file_mode(target, str(path))
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".rtmodel-", suffix=".tmp")  # fits whatever the name
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.chmod(tmp, old_mode if old_mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


@contextlib.contextmanager
def output_lock(path: str | os.PathLike, flag: str) -> Iterator[None]:
    """Hold an exclusive lock on the output `path` for the whole command; OutputPathError at once if
    another rtmodel command holds it. Released when the process ends, however it ends (flock); the lock
    file is removed on release (one a killed command left behind is simply taken again).

    A launcher that holds the lock sets LOCK_HELD_ENV for its ranks, which then skip it."""
    target = output_target(path)
    if os.environ.get(LOCK_HELD_ENV) == os.path.realpath(target):
        yield
        return
    lock = _lock_file(target)
    fd = _take_lock(lock, f"{flag} {path}")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        os.close(fd)


def _take_lock(lock: Path, label: str) -> int:
    """flock on `lock`, retried when its holder removed the file between our open and our lock (we would
    hold a lock on a name nobody else can find)."""
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            raise OutputPathError(
                f"{label}: cannot create its lock file {lock.name}: {exc.strerror}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputPathError(
                f"{label}: another rtmodel command is writing this file now; wait for it or give another file"
            ) from None
        try:
            if os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def lock_env(path: str | os.PathLike) -> dict[str, str]:
    """The environment entry a launcher holding `output_lock(path)` passes to its ranks."""
    return {LOCK_HELD_ENV: os.path.realpath(output_target(path))}

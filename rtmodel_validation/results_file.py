"""The results file as an output: what its lines may be, checked before a run, and each record appended
whole (rtmodel_util.files' rules for every output).

Why checked before the run: `validate --results FILE` trains for minutes to hours and only then appends
one line; a FILE it must not append to (another document, say a profile JSON given by mistake, or a
directory that takes no new files, /proc) was found only then, and the run was lost, or worse, the line
was appended to a profile, which then was no longer JSON. Now FILE must be new, empty, or JSONL whose
every line is one of: a validation record (either header, any version), a flat predicted/measured line
(rtmodel_validation.results.read_parity_points: results from elsewhere), a blank line or a # comment; anything
else is refused in one line naming the first line that is not (exit 2), before any rank starts.

Why an append rewrites the file (its old bytes, a newline if its last line had none, the record) through
the one atomic writer, under the output's lock: an O_APPEND write can be cut short on a nearly full disk
and leave half a record (reported as appended, exit 0), and a last line without its newline glued the
new record to it (both lost to every reader). The file is small (one short line per validation). The
lock is waited for a little (APPEND_WAIT_S) rather than refused: two validations of one project (a job
array) both append, one after the other, and neither record is lost; a command that replaces the file
(`calibrate --out` naming it) holds the lock and is not a results file, so the append is refused.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from rtmodel_util.files import check_output_path, output_lock, write_atomic
from rtmodel_validation.errors import ValidationError
from runtime_model.core.document_header import header_of
from runtime_model.core.errors import USER_OS_ERRORS, RunFailure

# the header: "rtmodel-validation/<RECORD_VERSION>" (runtime_model.core.document_header);
RECORD_KIND = "validation"
RECORD_VERSION = 1  # records written before it say {"kind": "rtmodel-validation", "version": 1}: both read
APPEND_WAIT_S = 30.0  # how long an append waits for another writer of the file (an append takes milliseconds)
# a record is a few KiB (a few hundred at thousands of ranks); far longer is not one
MAX_LINE_BYTES = 16 * 2**20


def number(x) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def pair_ms(d: dict) -> tuple[float, float] | None:
    """(predicted, measured) mean in ms of a comparison or flat record, in either accepted spelling."""
    pred = number(d.get("predicted_mean_s"))
    meas = number(d.get("measured_mean_s"))
    if meas is None and isinstance(d.get("measured"), dict):
        meas = number(d["measured"].get("mean_s"))
    return (pred * 1e3, meas * 1e3) if pred is not None and meas is not None else None


def line_problem(line: bytes) -> str | None:
    """Why `line` may not be in a results file (to follow "line N"), or None when it may."""
    from rtmodel_util.json_document import DocumentError, parse_document

    text = line.strip()
    if not text or text.startswith(b"#"):
        return None
    if len(line) > MAX_LINE_BYTES:
        return f"is longer than {MAX_LINE_BYTES // 2**20} MiB, far longer than a validation record"
    try:
        doc = parse_document(text.decode("utf-8"))
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    except DocumentError as exc:  # "is not valid JSON (... at line 1 column 5)", "holds NaN, ..."
        return re.sub(r" at line 1 column ", " at column ", str(exc)).replace("valid JSON", "JSON")
    if not isinstance(doc, dict):
        return "is not a JSON object"
    kind = header_of(doc).kind
    if kind == RECORD_KIND:
        return None
    if kind is not None:
        return f"is an rtmodel {kind} document, not a validation record"
    if pair_ms(doc) is not None:
        return None  # a flat predicted/measured line
    return "is not a validation record"


def first_problem(lines: Iterable[bytes]) -> str | None:
    """ "line N <why>" for the first line that may not be in a results file, or None."""
    for lineno, line in enumerate(lines, 1):
        problem = line_problem(line)
        if problem is not None:
            return f"line {lineno} {problem}"
    return None


def _lines(fh) -> Iterable[bytes]:
    """The file's lines, each read up to one byte past MAX_LINE_BYTES (a file without newlines is not read whole)."""
    while line := fh.readline(MAX_LINE_BYTES + 1):
        yield line


def _whole_document(path: Path) -> str | None:
    """What a file whose first line is not JSON is, when it is one JSON document (a profile given as
    --results): "one rtmodel profile document"; None otherwise."""
    try:
        if path.stat().st_size > 64 * 2**20:
            return None
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    kind = header_of(doc).kind
    return (
        f"one rtmodel {kind} document" if kind else ("one JSON document" if isinstance(doc, dict) else None)
    )


def _refusal(label: str, problem: str) -> ValidationError:
    return ValidationError(
        f"{label} is not a validation results file: {problem}; give a new file or a .jsonl file "
        "`rtmodel validate` appends to"
    )


def check_results_file(path: str | os.PathLike, label: str) -> None:
    """Before the run: ValidationError (one line, naming `label` and the first bad line) unless `path` is
    missing, empty or a results file (the module's doc). Reads at most up to the first bad line."""
    p = Path(path)
    if not p.is_file():
        return  # missing (created by the append); a directory or special file: check_output_path says so
    try:
        with p.open("rb") as fh:
            problem = first_problem(_lines(fh))
    except OSError as exc:
        raise ValidationError(f"{label}: cannot read it ({exc.strerror or exc})") from None
    if problem is None:
        return
    if problem.startswith("line 1 "):
        whole = _whole_document(p)
        problem = f"it holds {whole}" if whole else problem
    raise _refusal(label, problem)


def check_results_output(
    path: str | os.PathLike, flag: str, inputs: Mapping[str, str | os.PathLike | None] | None = None
) -> Path:
    """Everything about a results file that can be known before the run, in one line each (exit 2): the
    one output rule (rtmodel_util.files.check_output_path: its directory exists and is writable, not a
    directory, device or input), a results file (check_results_file), and its lock can be taken (the
    directory takes new files; no other command is replacing it)."""
    p = check_output_path(path, flag, inputs=inputs)
    label = f"{flag} {os.fspath(path)}"
    check_results_file(p, label)
    probe_lock(p, flag)
    return p


def probe_lock(path: Path, flag: str) -> None:
    """Take and release the file's lock: its lock file can be created beside it, and nobody holds it for
    longer than an append."""
    with output_lock(path, flag, wait_s=APPEND_WAIT_S):
        pass


def append_line(path: Path, line: str, flag: str) -> Path:
    """Append `line` (one JSON record, no newline) to the results file `path`, whole or not at all, under
    its lock (the module's doc). ValidationError for a user's mistake (exit 2: the file became something
    else, its directory went away); RunFailure for a failed write (exit 1: a full disk), the file as it was."""
    label = f"{flag} {path}"
    try:
        with output_lock(path, flag, wait_s=APPEND_WAIT_S):
            if path.exists() and not path.is_file():
                raise ValidationError(f"cannot append to results file {path}: not a regular file")
            old = path.read_bytes() if path.exists() else b""
            problem = first_problem(old.splitlines(keepends=True))
            if problem is not None:
                raise _refusal(label, problem)
            newline = b"\n" if old and not old.endswith(b"\n") else b""  # a last line without its newline
            write_atomic(path, old + newline + line.encode("utf-8") + b"\n")
    except OSError as exc:
        why = f"cannot append to results file {path}: {exc.strerror or exc}"
        raise (ValidationError(why) if isinstance(exc, USER_OS_ERRORS) else RunFailure(why)) from None
    return path

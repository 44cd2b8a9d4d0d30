"""Read the output of NVIDIA nccl-tests (`all_reduce_perf`, `sendrecv_perf`) as a user already has it.

Why parse by the header: the layout changed across versions (NVIDIA/nccl-tests: before v2.13 the
columns were `size count type redop time algbw busbw error ...` with no `root`; since v2.13 `size count
type redop root time algbw busbw #wrong ...`; the 2017 original `bytes N type op time algbw busbw res`;
2.17+ may add per-iteration columns; `-C` names the time column `cputime`). So the out-of-place time,
algbw and busbw are read at the position the column header gives them, whichever version wrote it.

What a run tells (doc/PERFORMANCE.md of nccl-tests): time in microseconds, algbw = S / t in GB/s
(1e9 bytes), busbw = algbw x 2(n-1)/n for all_reduce and x 1 for sendrecv. The ranks and their hosts
come from the device list (`#  Rank  0 Group  0 Pid ... on HOST device ...`); which collective it was,
from the footer (`# Collective test concluded: all_reduce_perf`) or else from busbw / algbw.

A file as a cluster leaves it (calibration/nccl_tests_log): launcher labels are stripped, several runs
are split and one is used (the last complete one; runs of different shapes are refused), never a blend.
Sizes nccl-tests' own check failed are not fitted; a size or bandwidth no machine has is refused.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from calibration.nccl_tests_log import algorithm_hint, nics_hint, split_runs, strip_launcher
from runtime_model.core.errors import UserError
from runtime_model.core.physical_bounds import MAX_BUFFER_BYTES, MAX_ALGBW_Bps

ALL_REDUCE, SENDRECV = "all_reduce", "sendrecv"
_RANK_LINE = re.compile(r"^#\s*Rank\s+(\d{1,9})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device", re.I)
_CONCLUDED = re.compile(r"Collective test concluded:\s*(\w+?)(?:_perf)?\b", re.I)
_TIME_NAMES = ("time", "cputime")
_SIZE_NAMES = ("size", "bytes")
_CHECK_NAMES = ("#wrong", "error")
_FOOTER = re.compile(r"^#\s*(Avg bus bandwidth|Out of bounds values)", re.I)
# nccl-tests' DeltaMaxValue(type) (src/common.cu before v2.13): an old `error` beyond it x (ranks - 1) failed
_DELTA_MAX = {"half": 5e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}
MAX_BYTES = MAX_BUFFER_BYTES  # a larger (or negative) size is an overflowed print
MAX_GBPS = MAX_ALGBW_Bps / 1e9  # algbw or busbw, or size / time: beyond any node's links, not a measurement
# One size's time in us: nccl-tests times each size over a few tens of iterations; an hour for one call
# (a 1 TiB all-reduce at 1 Gbit/s takes 2.5 hours, but no GPU holds it) is an overflowed print
MAX_TIME_US = 3.6e9
MAX_FILE_BYTES = 16 << 20  # a nccl-tests log is kilobytes; anything this big is not one


class NcclTestsError(UserError):
    """The file is not an nccl-tests output this reader can use; the message says why, in one line."""


class OtherCollective(NcclTestsError):
    """A run of a collective the link cannot come from (all_gather_perf ...): skipped beside others."""

    def __init__(self, message: str, name: str):
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class NcclTestsRow:
    nbytes: int
    time_s: float  # out-of-place
    algbw_GBps: float
    busbw_GBps: float
    check: float | None = None  # #wrong (elements), or the old max error; None where not checked
    dtype: str = ""
    old_error: bool = False  # `check` is the pre-2.13 max error, not a count
    impossible: str = ""  # why no machine prints this row ("" for a row to fit): _verified refuses it
    redop: str = ""  # the reduction (sum, prod, ...; `-o all` prints each size once per reduction)

    def failed(self, ranks: int) -> bool:
        """Whether nccl-tests' own check failed this size (a count above 0, an error above tolerance)."""
        if self.check is None:
            return False
        if not self.old_error:
            return self.check != 0
        return self.check > _DELTA_MAX.get(self.dtype, 0.0) * max(ranks - 1, 1)


@dataclass(frozen=True)
class NcclTestsRun:
    """One nccl-tests run: the collective, its ranks and hosts, and every size's out-of-place row."""

    path: str
    collective: str
    ranks: int
    hosts: int
    rows: tuple[NcclTestsRow, ...]
    device: str = ""
    wrong_sizes: int = 0  # sizes nccl-tests marked wrong, not fitted
    algorithm: str = ""  # what the log says NCCL ran (nccl_tests_log.algorithm_hint), "" where silent
    algorithm_from: str = ""
    nics_per_host: int = 0  # NCCL's NET/... Using [0]..[n] list, 0 where the log has none
    nic_transport: str = ""
    complete: bool = True  # its footer (`# Avg bus bandwidth`) printed: not cut off
    runs_note: str = ""  # which of several runs in the file this is
    launcher: str = ""  # whose per-line labels were stripped

    @property
    def ranks_per_host(self) -> int:
        return self.ranks // self.hosts


def read_nccl_tests(path: Path) -> NcclTestsRun:
    """Parse one nccl-tests output file; NcclTestsError (one line) for anything it cannot use."""
    try:
        if not path.is_file():  # a FIFO or device would block the read, a directory fail it
            raise NcclTestsError(
                f"--nccl-tests {path}: is not a regular file"
                if path.exists()
                else f"--nccl-tests {path}: cannot read it (no such file)"
            )
        if path.stat().st_size > MAX_FILE_BYTES:
            raise NcclTestsError(
                f"--nccl-tests {path}: {path.stat().st_size:,} bytes is not an nccl-tests output"
            )
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise NcclTestsError(f"--nccl-tests {path}: cannot read it ({exc.strerror or exc})") from None
    return parse_nccl_tests(text, str(path))


def parse_nccl_tests(text: str, path: str = "<text>") -> NcclTestsRun:
    """The run a file holds: launcher labels stripped, runs split (nccl_tests_log), one run chosen."""
    lines, launcher = strip_launcher(text.splitlines())
    runs: list[NcclTestsRun] = []
    skipped: list[str] = []
    error: NcclTestsError | None = None
    for part in split_runs(lines):
        try:
            runs.append(_parse_run(part, lines, path))
        except OtherCollective as exc:
            skipped.append(exc.name)
            error = exc
        except NcclTestsError as exc:
            error = exc
    if not runs:
        raise error  # type: ignore[misc]  # split_runs gives at least one part, so one error at least
    return replace(_chosen(runs, skipped, path), launcher=launcher)


def _parse_run(part: list[str], every: list[str], path: str) -> NcclTestsRun:
    """One run's lines as an NcclTestsRun; the algorithm and NIC hints from its own lines, else the file's."""
    header = _column_header(part, path)
    rows = tuple(r for r in (_row(line, header, path) for line in part) if r is not None)
    if not rows:
        raise NcclTestsError(f"--nccl-tests {path}: no data rows under the column header")
    seen = Counter((r.nbytes, r.dtype, r.redop) for r in rows)
    if twice := next((key for key, count in seen.items() if count > 1), None):
        raise NcclTestsError(
            f"--nccl-tests {path}: size {twice[0]:,} B ({' '.join(w for w in twice[1:] if w) or 'one type'}) has "
            f"{seen[twice]} rows in one run: two runs without their `# nThread` line between them? Keep one run "
            "(runs are never blended)"
        )
    ranks, hosts, device = _devices(part, path)
    rows, wrong = _verified(rows, ranks, path)
    text = "\n".join(part)
    algorithm, algorithm_from = algorithm_hint(part)
    if not algorithm:
        algorithm, algorithm_from = algorithm_hint(every)
    nics, transport = nics_hint(part) if nics_hint(part)[0] else nics_hint(every)
    complete = any(_FOOTER.match(line.strip()) for line in part)
    return NcclTestsRun(
        path, _collective(text, rows, ranks, path), ranks, hosts, rows, device, wrong_sizes=wrong,
        algorithm=algorithm, algorithm_from=algorithm_from, nics_per_host=nics, nic_transport=transport,
        complete=complete,
    )  # fmt: skip


def _chosen(runs: list[NcclTestsRun], skipped: list[str], path: str) -> NcclTestsRun:
    """The last complete run (footer printed) of several, never a blend; runs of different shapes are
    refused: which one describes the cluster is the user's call."""
    shapes = sorted({f"{r.collective}_perf {r.ranks} ranks / {r.hosts} hosts" for r in runs})
    if len(shapes) > 1:
        raise NcclTestsError(
            f"--nccl-tests {path}: {len(runs)} runs of different shapes ({', '.join(shapes)}): keep the one "
            "to use in the file (runs are never blended)"
        )
    done = [i for i, r in enumerate(runs) if r.complete]
    i = done[-1] if done else len(runs) - 1
    notes = []
    if len(runs) > 1:
        busbw = ", ".join(f"{r.rows[-1].busbw_GBps:g}" for r in runs)
        which = "last complete" if done else "last"
        notes.append(
            f"the {which} of its {len(runs)} {runs[i].collective}_perf runs (run {i + 1}; not blended; busbw "
            f"at each run's largest size {busbw} GB/s)"
        )
    if skipped:
        notes.append(f"skipped its {', '.join(f'{name}_perf' for name in skipped)} run(s)")
    return replace(runs[i], runs_note="; ".join(notes))


def _column_header(lines: list[str], path: str) -> dict[str, int]:
    """Positions of size, type, out-of-place time, algbw, busbw and its check (#wrong or error) in a data
    row, from the header line."""
    for line in lines:
        if not line.startswith("#"):
            continue
        words = line.lstrip("#").split()
        size = next((i for i, w in enumerate(words) if w in _SIZE_NAMES), None)
        time = next((i for i, w in enumerate(words) if w in _TIME_NAMES), None)
        if size is not None and time is not None and words[time + 1 : time + 3] == ["algbw", "busbw"]:
            check = words[time + 3] if len(words) > time + 3 and words[time + 3] in _CHECK_NAMES else ""
            dtype = words.index("type") if "type" in words else -1
            redop = next((words.index(w) for w in ("redop", "op") if w in words), -1)
            return {
                "size": size, "time": time, "algbw": time + 1, "busbw": time + 2, "width": time + 3,
                "check": time + 3 if check else -1, "error": int(check == "error"), "type": dtype, "redop": redop,
            }  # fmt: skip
    raise NcclTestsError(
        f"--nccl-tests {path}: no nccl-tests column header (a '#' line with size ... time algbw busbw)"
    )


def _row(line: str, header: dict[str, int], path: str) -> NcclTestsRow | None:
    """A data row, or None for anything else (comments, NCCL INFO lines, blank lines); a size no GPU
    holds is a file that is not a run (one line)."""
    if line.startswith("#"):
        return None
    words = line.split()
    if len(words) < header["width"]:
        return None
    size = words[header["size"]]
    if (
        size.lstrip("-").isdigit() and len(size.lstrip("-")) > 100
    ):  # int() refuses 4,300 digits; no size has 100
        raise NcclTestsError(f"--nccl-tests {path}: a size of {len(size)} digits overflows: not a run to fit")
    try:
        nbytes = int(size)
        time_us, algbw, busbw = (float(words[header[k]]) for k in ("time", "algbw", "busbw"))
    except ValueError:
        return None
    if nbytes < 0 or nbytes > MAX_BYTES:
        raise NcclTestsError(f"--nccl-tests {path}: a size of {nbytes:,} B overflows: not a run to fit")
    if nbytes == 0:
        return None  # an empty size: nothing to fit
    check = _check_value(words, header)
    dtype = words[header["type"]] if 0 <= header["type"] < len(words) else ""
    redop = words[header["redop"]] if 0 <= header["redop"] < len(words) else ""
    row = NcclTestsRow(nbytes, time_us * 1e-6, algbw, busbw, check, dtype, bool(header["error"]), redop=redop)
    return replace(row, impossible=_impossible(row))


def _impossible(row: NcclTestsRow) -> str:
    """Why no machine prints this row, "" where one can: a time that is not a positive number of us up to
    MAX_TIME_US, a bandwidth (printed, or size / time) that is not a number in [0, MAX_GBPS] GB/s.
    Kept for _verified to refuse, unless nccl-tests' own check marked the row wrong."""
    time_us = row.time_s * 1e6
    for name, value in (("algbw", row.algbw_GBps), ("busbw", row.busbw_GBps)):
        if not (math.isfinite(value) and 0 <= value <= MAX_GBPS):
            return f"{name} {value:,g} GB/s at {row.nbytes:,} B is beyond any machine (a number in [0, {MAX_GBPS:,.0f}] GB/s)"
    if not (math.isfinite(time_us) and 0 < time_us <= MAX_TIME_US):
        return f"a time of {time_us:g} us at {row.nbytes:,} B is not a measurement (more than 0, at most {MAX_TIME_US:,.0f} us)"
    rate = row.nbytes / time_us * 1e-3
    if rate > MAX_GBPS:
        return (
            f"{row.nbytes:,} B in {time_us:g} us ({rate:,.0f} GB/s) is beyond any machine "
            f"(at most {MAX_GBPS:,.0f} GB/s)"
        )
    return ""


def _check_value(words: list[str], header: dict[str, int]) -> float | None:
    """The row's own check (#wrong, or the old max error), None where it has none (`-c 0` prints N/A)."""
    if header["check"] < 0 or header["check"] >= len(words):
        return None
    try:
        return float(words[header["check"]])
    except ValueError:
        return None


def _verified(rows: tuple[NcclTestsRow, ...], ranks: int, path: str) -> tuple[tuple[NcclTestsRow, ...], int]:
    """The rows nccl-tests' own check passed (#wrong 0; an old `error` within its DeltaMaxValue(type) x
    (ranks - 1)), and how many sizes it failed: a wrong result's time is not the collective's. A
    bandwidth no machine has among the rest is a file that is not a run (one line)."""
    kept = tuple(r for r in rows if not r.failed(ranks))
    if not kept:
        raise NcclTestsError(
            f"--nccl-tests {path}: nccl-tests marked every size wrong (#wrong / error): a broken run, not a "
            "network to fit"
        )
    for r in kept:
        if r.impossible:
            raise NcclTestsError(f"--nccl-tests {path}: {r.impossible}: not a run to fit")
    return kept, len(rows) - len(kept)


def _devices(lines: list[str], path: str) -> tuple[int, int, str]:
    """(ranks, distinct hosts, the first device's name) from the `#  Rank` lines."""
    found: dict[int, str] = {}
    device = ""
    for line in lines:
        m = _RANK_LINE.match(line.strip())
        if m:
            rank, host = int(m.group(1)), m.group(2)
            if found.get(rank, host) != host:
                raise NcclTestsError(
                    f"--nccl-tests {path}: rank {rank} is listed on {found[rank]} and on {host}: each process "
                    "ran a test of its own (nccl-tests built without MPI=1 under mpirun?), no collective "
                    "across the nodes"
                )
            found[rank] = host
            if not device:
                device = line.split("]", 1)[-1].strip() if "]" in line else ""
    if not found:
        raise NcclTestsError(
            f"--nccl-tests {path}: no '#  Rank N ... on HOST device' lines, so the ranks and nodes are "
            "unknown (keep nccl-tests' device list in the file)"
        )
    ranks, hosts = len(found), len(set(found.values()))
    if sorted(found) != list(range(ranks)):
        raise NcclTestsError(f"--nccl-tests {path}: the device list skips ranks (mixed or cut-off output?)")
    if len(set(Counter(found.values()).values())) > 1:
        raise NcclTestsError(
            f"--nccl-tests {path}: {ranks} ranks on {hosts} hosts are not the same number per host"
        )
    return ranks, hosts, device


def _collective(text: str, rows: tuple[NcclTestsRow, ...], ranks: int, path: str) -> str:
    """all_reduce or sendrecv: the footer's name, else busbw / algbw (2(n-1)/n against 1)."""
    m = _CONCLUDED.search(text)
    if m:
        name = m.group(1).lower()
        if name in (ALL_REDUCE, SENDRECV):
            return name
        raise OtherCollective(
            f"--nccl-tests {path}: a {name}_perf run; give all_reduce_perf or sendrecv_perf", name
        )
    ratios = [r.busbw_GBps / r.algbw_GBps for r in rows if r.algbw_GBps > 0]
    ratio = sorted(ratios)[len(ratios) // 2]
    all_reduce = 2 * (ranks - 1) / ranks
    if abs(ratio - all_reduce) <= 0.02 * all_reduce:
        return ALL_REDUCE
    if abs(ratio - 1.0) <= 0.02:
        return SENDRECV
    raise NcclTestsError(
        f"--nccl-tests {path}: busbw / algbw = {ratio:.3f} is neither all_reduce's 2(n-1)/n = "
        f"{all_reduce:.3f} nor sendrecv's 1 (another collective?)"
    )

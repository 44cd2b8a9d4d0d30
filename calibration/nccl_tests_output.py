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
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from runtime_model.core.errors import UserError

ALL_REDUCE, SENDRECV = "all_reduce", "sendrecv"
_RANK_LINE = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device", re.I)
_CONCLUDED = re.compile(r"Collective test concluded:\s*(\w+?)(?:_perf)?\b", re.I)
_TIME_NAMES = ("time", "cputime")
_SIZE_NAMES = ("size", "bytes")
MAX_FILE_BYTES = 16 << 20  # a nccl-tests log is kilobytes; anything this big is not one


class NcclTestsError(UserError):
    """The file is not an nccl-tests output this reader can use; the message says why, in one line."""


@dataclass(frozen=True)
class NcclTestsRow:
    nbytes: int
    time_s: float  # out-of-place
    algbw_GBps: float
    busbw_GBps: float


@dataclass(frozen=True)
class NcclTestsRun:
    """One nccl-tests run: the collective, its ranks and hosts, and every size's out-of-place row."""

    path: str
    collective: str
    ranks: int
    hosts: int
    rows: tuple[NcclTestsRow, ...]
    device: str = ""

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


_LAUNCHER_LABEL = re.compile(r"^\s*\d+:\s?")  # `srun --label` / `mpirun --tag-output`-style "0: " prefix


def parse_nccl_tests(text: str, path: str = "<text>") -> NcclTestsRun:
    lines = text.splitlines()
    labelled = [line for line in lines if line.strip()]
    if labelled and all(_LAUNCHER_LABEL.match(line) for line in labelled):
        lines = [_LAUNCHER_LABEL.sub("", line, count=1) for line in lines]
    header = _column_header(lines, path)
    rows = tuple(r for r in (_row(line, header) for line in lines) if r is not None)
    if not rows:
        raise NcclTestsError(f"--nccl-tests {path}: no data rows under the column header")
    ranks, hosts, device = _devices(lines, path)
    return NcclTestsRun(path, _collective(text, rows, ranks, path), ranks, hosts, rows, device)


def _column_header(lines: list[str], path: str) -> dict[str, int]:
    """Positions of size, out-of-place time, algbw and busbw in a data row, from the header line."""
    for line in lines:
        if not line.startswith("#"):
            continue
        words = line.lstrip("#").split()
        size = next((i for i, w in enumerate(words) if w in _SIZE_NAMES), None)
        time = next((i for i, w in enumerate(words) if w in _TIME_NAMES), None)
        if size is not None and time is not None and words[time + 1 : time + 3] == ["algbw", "busbw"]:
            return {"size": size, "time": time, "algbw": time + 1, "busbw": time + 2, "width": time + 3}
    raise NcclTestsError(
        f"--nccl-tests {path}: no nccl-tests column header (a '#' line with size ... time algbw busbw)"
    )


def _row(line: str, header: dict[str, int]) -> NcclTestsRow | None:
    """A data row, or None for anything else (comments, NCCL INFO lines, blank lines)."""
    if line.startswith("#"):
        return None
    words = line.split()
    if len(words) < header["width"]:
        return None
    try:
        nbytes = int(words[header["size"]])
        time_us, algbw, busbw = (float(words[header[k]]) for k in ("time", "algbw", "busbw"))
    except ValueError:
        return None
    if nbytes <= 0 or not all(math.isfinite(v) and v > 0 for v in (time_us, algbw)) or busbw < 0:
        return None  # an empty size or a failed line: nothing to fit
    return NcclTestsRow(nbytes, time_us * 1e-6, algbw, busbw)


def _devices(lines: list[str], path: str) -> tuple[int, int, str]:
    """(ranks, distinct hosts, the first device's name) from the `#  Rank` lines."""
    found: dict[int, str] = {}
    device = ""
    for line in lines:
        m = _RANK_LINE.match(line.strip())
        if m:
            found[int(m.group(1))] = m.group(2)
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
        raise NcclTestsError(f"--nccl-tests {path}: a {name}_perf run; give all_reduce_perf or sendrecv_perf")
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

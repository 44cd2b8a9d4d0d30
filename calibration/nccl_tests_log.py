"""An nccl-tests log as a cluster's launcher writes it: labels stripped, runs split, NCCL's own hints read.

Why: the file a user has is seldom `all_reduce_perf`'s bare stdout. OpenMPI's `--tag-output` (mpirun,
MPI-operator) puts `[1,0]<stdout>:` (or `<stderr>:` for NCCL's warnings) before every line, `srun -l`
puts ` 0: `, MPICH / Intel MPI `-prepend-rank` puts `[0] `; a rerun is often appended to the same file
(every run starts with nccl-tests' `# nThread ... nGpus ...` line, src/common.cu); and with
NCCL_DEBUG=INFO the log says which algorithm NCCL ran (`NCCL_ALGO set by environment to Ring`, the
TUNING subsystem's `1048576 Bytes -> Algo 1 proto 2 time ...`, numbered as NVIDIA/nccl
src/include/nccl_common.h: 0 Tree, 1 Ring, 2 CollNetDirect, 3 CollNetChain, 4 NVLS, 5 NVLSTree, 6 PAT)
and over how many NICs (`NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB ... ; OOB ...`).
"""

from __future__ import annotations

import re

LAUNCHER_LABELS = {
    "mpirun --tag-output": re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:\s?"),
    "srun --label": re.compile(r"^\s*\d+:\s?"),
    "mpirun -prepend-rank": re.compile(r"^\[\d+\]\s?"),
}
_RUN_START = re.compile(r"^#\s*nThread\s+\d+\s+nGpus\s+\d+")
_ENV_ALGO = re.compile(r"NCCL_ALGO(?:\s+set by environment to\s+|=)([\^\w,;:]+)")
_TUNED_ALGO = re.compile(r"\b(\d{1,19}) Bytes -> Algo (\w+) proto")  # sizes past int64 are no NCCL's
_NET_USING = re.compile(r"NET/(\w+)\s*:\s*Using\s+([^;]*)")
ALGO_NUMBERS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
ALGO_NAMES = {
    "tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
    "collnet": "collnet_direct", "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat",
}  # fmt: skip


def strip_launcher(lines: list[str]) -> tuple[list[str], str]:
    """The lines without the launcher's per-line label, and the launcher's name ("" where none).

    A label counts where at least half the non-blank lines carry the same kind (a shell's own echo or a
    launcher's unlabelled warning may sit between them); only the lines that carry it lose it."""
    filled = [line for line in lines if line.strip()]
    best, best_count = "", 0
    for name, label in LAUNCHER_LABELS.items():
        count = sum(1 for line in filled if label.match(line))
        if count > best_count:
            best, best_count = name, count
    if not filled or 2 * best_count < len(filled):
        return lines, ""
    label = LAUNCHER_LABELS[best]
    return [label.sub("", line, count=1) for line in lines], best


def split_runs(lines: list[str]) -> list[list[str]]:
    """One list of lines per run: a new run starts at each `# nThread` line after the first (what came
    before the first belongs to it: the launcher's lines, `# Collective test starting`)."""
    starts = [i for i, line in enumerate(lines) if _RUN_START.match(line.strip())]
    if len(starts) < 2:
        return [lines]
    bounds = [0, *starts[1:], len(lines)]
    return [lines[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def algorithm_hint(lines: list[str]) -> tuple[str, str]:
    """(algorithm, where the log says it) or ("", ""): what NCCL ran at the largest size its TUNING lines
    show, else what NCCL_ALGO allowed; a list or exclusion (`Tree,Ring`, `^NVLS`) is given as written."""
    tuned: dict[int, str] = {}
    env = ""
    for line in lines:
        if m := _TUNED_ALGO.search(line):
            algo = m.group(2).lower()
            tuned[int(m.group(1))] = ALGO_NUMBERS[int(algo)] if len(algo) == 1 and algo in "0123456" else algo
        elif m := _ENV_ALGO.search(line):
            env = m.group(1)
    if tuned:
        size = max(tuned)
        return ALGO_NAMES.get(tuned[size].replace("_", ""), tuned[size]), f"NCCL's TUNING line at {size:,} B"
    if env:
        return ALGO_NAMES.get(env.lower(), env), f"NCCL_ALGO={env} in the log"
    return "", ""


def nics_hint(lines: list[str]) -> tuple[int, str]:
    """(NICs per host, the transport) from NCCL's `NET/<transport> : Using [0]... [1]...` lines, or
    (0, "") where the log has none (NCCL_DEBUG was not INFO)."""
    nics, transport = 0, ""
    for line in lines:
        if m := _NET_USING.search(line):
            count = len(re.findall(r"\[\d+\]", m.group(2)))
            if count > nics:
                nics, transport = count, m.group(1)
    return nics, transport

"""Entry point of each rank when `rtmodel validate` launches the job locally:

    python -m torch.distributed.run --standalone --nproc-per-node N -m rtmodel_validation.worker --job FILE --out DIR

Reads the rank job (rtmodel_validation.plan.Plan.rank_job), runs rtmodel_validation.runner.run_rank, and rank 0 writes
every rank's report to DIR/reports.json (atomically). A failing rank writes DIR/rank<R>.error (one
line: what failed) before exiting non-zero, so the launcher can name it instead of showing a traceback.
Rank 0 appends each phase it starts to DIR/phases.txt (one line each); the launcher shows them as they come.
Each rank dies with torchrun (SIGKILL through the kernel's parent-death signal): torchrun starts its workers
in sessions of their own, so a torchrun killed outright would otherwise leave them training.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import traceback
from pathlib import Path

from rtmodel_util.files import write_atomic
from rtmodel_util.process_control import set_parent_death_signal

PHASES_FILE = "phases.txt"


def phase_writer(out: Path):
    """on_phase for run_rank: append the phase to out/PHASES_FILE (one line, flushed at once)."""

    def note(line: str) -> None:
        with (out / PHASES_FILE).open("a") as fh:
            fh.write(" ".join(line.split()) + "\n")

    return note


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--job", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    set_parent_death_signal(signal.SIGKILL)  # first: loading torch takes seconds
    rank = int(os.environ.get("RANK", "0"))
    try:
        from rtmodel_validation.job import RankJob
        from rtmodel_validation.runner import run_rank

        job = RankJob.from_json(json.loads(args.job.read_text()))
        reports = run_rank(job, on_phase=phase_writer(args.out) if rank == 0 else None)
        if reports is not None:
            write_atomic(args.out / "reports.json", json.dumps([r.to_json() for r in reports]))
        return 0
    except Exception as exc:  # noqa: BLE001 - report any failure of this rank in one line, then exit non-zero
        line = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        try:
            write_atomic(args.out / f"rank{rank}.error", line)
        except OSError:
            pass
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    from rtmodel_util.rank_exit import exit_without_finalisation

    exit_without_finalisation(main())

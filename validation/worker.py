"""Entry point of each rank when `rtmodel validate` launches the job locally:

    python -m torch.distributed.run --standalone --nproc-per-node N -m validation.worker --job FILE --out DIR

Reads the rank job (validation.plan.Plan.rank_job), runs validation.runner.run_rank, and rank 0 writes
every rank's report to DIR/reports.json (atomically). A failing rank writes DIR/rank<R>.error (one
line: what failed) before exiting non-zero, so the launcher can name it instead of showing a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import traceback
from pathlib import Path


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--job", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    try:
        from validation.runner import run_rank

        reports = run_rank(json.loads(args.job.read_text()))
        if reports is not None:
            _write_atomic(args.out / "reports.json", json.dumps(reports))
        return 0
    except Exception as exc:  # noqa: BLE001 - report any failure of this rank in one line, then exit non-zero
        line = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        try:
            _write_atomic(args.out / f"rank{rank}.error", line)
        except OSError:
            pass
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    from validation.runner import exit_without_finalisation

    exit_without_finalisation(main())

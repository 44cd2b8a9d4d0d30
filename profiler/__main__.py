"""`python -m profiler ...` is `rtmodel profile ...` (same options, same one error path).

The local launcher also starts its ranks through here with an internal `--options-json PAYLOAD`:
such a rank records its failure (rank, phase, message) for the launcher instead of printing it.
Exit codes: 0 done, 1 a rank failed, 2 bad options; RTMODEL_DEBUG=1 adds tracebacks.
"""

from __future__ import annotations

import os
import sys
import traceback

from profiler.errors import RankFailure
from runtime_model.core.errors import DEBUG_ENV, UserError

OPTIONS_JSON = "--options-json"


def run_launched_rank(payload: str) -> int:
    """One rank started by the local launcher; failures go to the launcher's error directory."""
    from profiler.launch import profile
    from profiler.options import ProfileOptions

    try:
        profile(ProfileOptions.from_json(payload))
        return 0
    except RankFailure as exc:
        return _report(exc, 1)
    except UserError as exc:
        return _report(RankFailure(int(os.environ.get("RANK", "0")), "setup", str(exc)), 2)
    except KeyboardInterrupt:
        print("rtmodel profile: interrupted", file=sys.stderr)
        return 130


def _report(exc: RankFailure, code: int) -> int:
    from profiler.failures import record_failure

    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(exc)
    if not record_failure(exc.rank, exc.phase, exc):
        print(f"rtmodel profile: error: {exc}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == OPTIONS_JSON:  # a rank the local launcher started
        return run_launched_rank(args[1])
    from rtmodel_cli.app import app

    app(["profile", *args], prog_name="python -m profiler")
    return 0


if __name__ == "__main__":
    from rtmodel_util.rank_exit import end_launched_rank

    code = main()
    end_launched_rank(code)  # a launcher's rank: its document and failure file are written
    sys.exit(code)

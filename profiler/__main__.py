"""The local launcher's ranks start here (`python -m profiler --options-json PAYLOAD`); any other
`python -m profiler ARGS` becomes `python -m rtmodel_cli profile ARGS` (same options, same error path).

A launched rank records its failure (rank, phase, message) for the launcher instead of printing it.
Exit codes: 0 done, 1 a rank failed, 2 bad options; RTMODEL_DEBUG=1 adds tracebacks.
Why a new program and not an import of the command: the command's options are the shell's
(rtmodel_cli/commands/profile.py) and the profiler imports no shell; job scripts written for
`torchrun ... -m profiler ...` keep working, and the process (pid, environment) stays torchrun's rank.
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
    from profiler.launch import run_profile
    from profiler.options import ProfileOptions

    try:
        run_profile(ProfileOptions.from_json(payload))
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
        from rtmodel_util.shown import shown  # a rank's output passes no shell: a name read may carry escapes

        print(f"rtmodel profile: error: {shown(str(exc))}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == OPTIONS_JSON:  # a rank the local launcher started
        return run_launched_rank(args[1])
    # the launcher's -P: a user folder named like a package stays out
    flags = ["-P"] if sys.flags.safe_path else []
    os.execv(sys.executable, [sys.executable, *flags, "-m", "rtmodel_cli", "profile", *args])  # never returns


if __name__ == "__main__":
    from rtmodel_util.rank_exit import end_launched_rank

    code = main()
    end_launched_rank(code)  # a launcher's rank: its document and failure file are written
    sys.exit(code)

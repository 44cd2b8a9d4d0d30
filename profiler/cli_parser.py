"""The argument parser of the profiler's `python -m` tools: a user's mistake is one line, exit 2.

Why its own module: the tools that need no torch (padding) share it with those that do (opcount,
memcount) without importing torch.
"""

from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    """argparse with rtmodel's error convention: `error: ...` on one line, exit 2, no usage dump."""

    def error(self, message):
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)

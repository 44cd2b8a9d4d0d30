"""Decent-DP's setup lines kept out of rtmodel's output.

Why: Decent-DP logs its setup with loguru at DEBUG on rank 0 ("Initializing Decentralized Data
Parallel", its rank and topology), and loguru's default handler prints DEBUG, so every profile and
validation showed those lines, --quiet or not. loguru reads its default level from LOGURU_LEVEL once,
when it is first imported: a rank sets it first. A process that imported loguru already keeps its own
logging, as does anyone who set LOGURU_LEVEL themselves.
"""

from __future__ import annotations

import os
import sys


def quiet_decent_dp_setup() -> None:
    """Before anything imports decent_dp in this process: loguru's default handler starts at INFO."""
    if "loguru" not in sys.modules:
        os.environ.setdefault("LOGURU_LEVEL", "INFO")

"""Decent-DP's DEBUG setup lines stay out of rtmodel's ranks' output, and a user's own loguru set-up wins."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOGS_AT_DEBUG = textwrap.dedent("""
    import sys
    if sys.argv[1] == "loguru-first":
        import loguru  # noqa: F401
    from rtmodel_util.decent_dp_logs import quiet_decent_dp_setup
    quiet_decent_dp_setup()
    from loguru import logger
    logger.debug("setup line")
    logger.info("info line")
""")


@pytest.mark.parametrize(
    "case, user_level, shown",
    [
        ("rank", None, ["info line"]),  # as Decent-DP's rank-0 DEBUG lines in a profile or validation
        ("rank", "DEBUG", ["setup line", "info line"]),  # the user asked for DEBUG
        ("loguru-first", None, ["setup line", "info line"]),  # loguru already configured: left alone
    ],
)
def test_only_an_unconfigured_loguru_starts_at_info(case, user_level, shown):
    pytest.importorskip("loguru")
    env = {k: v for k, v in os.environ.items() if k != "LOGURU_LEVEL"}
    env.update({"LOGURU_LEVEL": user_level} if user_level else {})
    proc = subprocess.run([sys.executable, "-c", LOGS_AT_DEBUG, case], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert [line.rsplit(" - ", 1)[-1] for line in proc.stderr.splitlines()] == shown

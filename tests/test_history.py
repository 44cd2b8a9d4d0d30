"""New commits' subjects fit `git log --oneline` and a web UI: at most 72 characters, the measurements in the
body (docs/development.md, "Commits"). Older subjects were paragraphs; the rule holds from RULE_FROM on."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
RULE_FROM = "d0588b76362df51988dde7f29119741c019e466c"  # the first commit written under the rule
MAX_SUBJECT_CHARS = 72


def test_commit_subjects_fit_72_characters():
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    res = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--format=%h %s", f"{RULE_FROM}^..HEAD"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if res.returncode != 0:
        pytest.skip("no history here (a shallow clone or an exported tree)")
    lines = res.stdout.splitlines()
    assert lines, "the rule's first commit is in the history"
    too_long = [line for line in lines if len(line.partition(" ")[2]) > MAX_SUBJECT_CHARS]
    assert not too_long, too_long

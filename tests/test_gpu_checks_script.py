"""benchmarks/gpu_checks.sh, the one script a lent GPU runs: a mistyped stage costs nothing, and whatever
its stages do, what it leaves in $OUT is two files (a lent machine returns at most 8)."""

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("tar") is None, reason="needs bash, tar"
)


def _checks(tmp_path, *stages):
    out, work = tmp_path / "out", tmp_path / "work"
    env = os.environ | {"OUT": str(out), "WORK": str(work), "INSTALL": "0"}
    done = subprocess.run(
        ["bash", "benchmarks/gpu_checks.sh", *stages], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    return done, out


def test_an_unknown_stage_stops_the_run_before_any_stage(tmp_path):
    done, out = _checks(tmp_path, "env", "bogus")
    assert done.returncode == 2 and "unknown stage bogus" in done.stdout
    assert list(out.iterdir()) == []


def test_every_stage_is_packed_into_two_files(tmp_path):
    done, out = _checks(tmp_path, "env")  # quick with or without a GPU (it fails without one)
    assert done.returncode == 0, done.stderr[-1000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu-checks.tgz", "summary.txt"]
    summary = (out / "summary.txt").read_text().splitlines()
    assert len(summary) == 1 and summary[0].startswith("=== env: rc ") and "(limit 30 s)" in summary[0]
    with tarfile.open(out / "gpu-checks.tgz") as tar:
        assert "./env.log" in tar.getnames()

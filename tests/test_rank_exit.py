"""How a finished rank ends: what it printed survives the exit that skips finalisation, the code is the
rank's, and its process group is gone."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rtmodel_util.rank_exit import release_process_groups

ROOT = Path(__file__).resolve().parent.parent


def test_exit_keeps_buffered_output_and_the_code():
    """stdout to a pipe is block-buffered: os._exit alone would drop the line."""
    rank = textwrap.dedent("""
        import sys
        from rtmodel_util.rank_exit import exit_without_finalisation
        print("RESULT done")
        sys.stderr.write("note")
        exit_without_finalisation(3)
    """)
    proc = subprocess.run([sys.executable, "-c", rank], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "RESULT done\n", "note")


def test_release_destroys_the_group(tmp_path):
    pytest.importorskip("torch")
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    release_process_groups()
    assert not dist.is_initialized()

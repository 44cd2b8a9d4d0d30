"""How a finished rank ends: what it printed survives the exit that skips finalisation, the code is the
rank's, and its process group is gone."""

import os
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


LAUNCH_ENV = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
ENDING_COMMAND = textwrap.dedent("""
    from rtmodel_util.rank_exit import end_launched_rank
    end_launched_rank(4)
    print("returned to the command")
""")


@pytest.mark.parametrize("launched", [True, False], ids=["torchrun-rank", "local-launcher"])
def test_a_command_ends_as_a_rank_only_inside_a_launched_job(launched):
    """profile and validate under torchrun leave as finished ranks; a local launcher returns to the shell."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_ENV}
    env.update(LAUNCH_ENV if launched else {})
    proc = subprocess.run([sys.executable, "-c", ENDING_COMMAND], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    expected = (4, "") if launched else (0, "returned to the command\n")
    assert (proc.returncode, proc.stdout) == expected


def test_release_destroys_the_group(tmp_path):
    pytest.importorskip("torch")
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    release_process_groups()
    assert not dist.is_initialized()

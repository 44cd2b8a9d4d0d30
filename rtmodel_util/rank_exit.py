"""How a finished rank ends: its process groups released while the interpreter lives, then an exit that
skips finalisation. One ending for profile's, validation's and the emulated benchmark's ranks (and the
tests' spawned ones), because gloo's native threads torn down at finalisation abort a rank whose work is
done (pytorch/pytorch#179291).
"""

from __future__ import annotations

import gc
import os
import sys


def exit_without_finalisation(code: int) -> None:
    """End a rank whose work is done and written: flush, then skip interpreter finalisation.

    Even after release_process_groups, gloo/Decent-DP native threads can still be torn down during
    finalisation and abort the rank (seen in 1 of 12 four-rank validation runs, and once
    in a 2-rank gloo test with no async work at all); os._exit skips that teardown,
    which is safe here because every result is already flushed or written atomically.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def end_launched_rank(code: int = 0) -> None:
    """End a command that ran as one rank of a torchrun job (profile, validate) as every finished rank
    ends; a plain local launch's parent held no process group and returns to the shell normally."""
    from rtmodel_util.launch_env import in_launched_rank

    if in_launched_rank():
        exit_without_finalisation(code)


def release_process_groups() -> None:
    """Free the trainings' process groups while the interpreter is fully alive, then destroy them.

    Decent-DP's wrapper sits in a reference cycle (its hooks close over it) holding the gloo
    sub-groups and their async work; left to interpreter shutdown, gloo's worker threads are torn
    down during finalisation and the rank dies with SIGABRT ("terminate called without an active
    exception", pytorch/pytorch#179291) after the run itself succeeded.
    """
    import torch.distributed as dist  # lazily: rtmodel_util is imported where torch is not

    gc.collect()
    dist.destroy_process_group()
    gc.collect()

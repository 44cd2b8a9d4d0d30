"""One BLAS thread in rtmodel's own process, asked for while numpy's and scipy's BLAS libraries load.

Why: OpenBLAS starts a thread per core as it loads and lets each one spin before it sleeps. On the
2-core VM that is 0.08 s of CPU in every `rtmodel` run (numpy's import costs 0.11 s without it, 0.19 s
with it; scipy.special loads a second OpenBLAS that does it again); on a 64-core login node, 63
spinning threads per run. rtmodel's own linear algebra is small (dense matrices of at most
consensus.DENSE_MAX_N = 512 ranks; `advise --gpus 4096` is faster on one thread), so its process asks
for one. OpenBLAS reads OPENBLAS_NUM_THREADS when it loads: the variable is set only around the imports
and removed after them, so the ranks and commands rtmodel launches get the user's environment as it
was, and a value the user set is theirs and wins.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Import numpy or scipy inside this block: its BLAS loads with one thread (unless the user set one)."""
    if BLAS_THREADS_ENV in os.environ:
        yield
        return
    os.environ[BLAS_THREADS_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(BLAS_THREADS_ENV, None)

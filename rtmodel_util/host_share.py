"""How many OpenMP threads a rank gets when several ranks share one host's cores.

Why: torchrun sets OMP_NUM_THREADS=1 only where a node has several ranks; with one rank per node
it leaves torch's default, one intra-op thread per core. On a real cluster that rank owns its node's
cores. When one machine stands in for several nodes (the emulator, the local launcher pretending
nodes), those ranks share its cores, and each then ran as many threads as the whole machine has. On
the 2-core emulator's 4x1 cluster a 30 ms sleep took 49 ms (sd 13 ms) of backward and its runs were
the benchmark's noisiest; with one thread per rank it took 31.0 ms (sd 0.8 ms), as on 2-rank nodes.
"""

from __future__ import annotations

import os

OMP_THREADS_ENV = "OMP_NUM_THREADS"


def threads_per_rank(ranks_on_host: int) -> int:
    """This host's cores shared evenly by `ranks_on_host` ranks, at least one thread each."""
    return max(1, (os.cpu_count() or 1) // max(1, ranks_on_host))


def omp_threads_env(ranks_on_host: int) -> dict[str, str]:
    """{OMP_NUM_THREADS: share} for a rank's environment, or {} where the user set it: theirs wins."""
    if OMP_THREADS_ENV in os.environ:
        return {}
    return {OMP_THREADS_ENV: str(threads_per_rank(ranks_on_host))}

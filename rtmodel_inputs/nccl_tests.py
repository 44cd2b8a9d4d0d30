"""`--nccl-tests FILE`: an nccl-tests run's measured inter-node link in place of a preset's.

Why a module of its own: advise, the plots and the trace path all take the same log; the reader and the
fit live in calibration (nccl_tests_output, nccl_tests_link), this is where a scenario takes them. The
link's warnings (the run's shape is not the question's, a per-NIC rate beyond belief, one run of
several used) also go to stderr, one line each: the plots keep no provenance line, and --format json
keeps stdout one document.
"""

from __future__ import annotations

import sys
from pathlib import Path


def with_nccl_tests(scenario, path: Path):
    """(scenario with the nccl-tests run's inter-node link and its own group cost, the provenance line)."""
    from dataclasses import replace

    from calibration.nccl_tests_link import nccl_tests_link
    from calibration.nccl_tests_output import read_nccl_tests

    run = read_nccl_tests(path)
    link = nccl_tests_link(run, scenario.network, scenario.shape.gpus_per_node)
    for line in link.warnings:
        print(f"note: --nccl-tests {path.name}: {line}", file=sys.stderr)
    return replace(scenario, network=link.network), link.provenance(run)

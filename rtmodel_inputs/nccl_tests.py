"""`--nccl-tests FILE`: an nccl-tests run's measured inter-node link in place of a preset's.

Why a module of its own: advise, the plots and the trace path all take the same log; the reader and the
fit live in calibration (nccl_tests_output, nccl_tests_link), this is where a scenario takes them. The
link's warnings (the run's shape is not the question's, a per-NIC rate beyond belief, one run of
several used) also go to stderr, one line each: the plots keep no provenance line, and --format json
keeps stdout one document. One resolution of the inputs (`said_once`) says each line once, however
many scenarios it applies the run to (the answer's, the tuned DDP's, the one a step is backed out at).
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from pathlib import Path

from rtmodel_util.shown import say

_SAID: ContextVar[set | None] = ContextVar("rtmodel_nccl_tests_said", default=None)


@contextlib.contextmanager
def said_once():
    """Within it, each of the run's warning lines goes to stderr once."""
    token = _SAID.set(set())
    try:
        yield
    finally:
        _SAID.reset(token)


def with_nccl_tests(scenario, path: Path):
    """(scenario with the nccl-tests run's inter-node link and its own group cost, the provenance line)."""
    from dataclasses import replace

    from calibration.nccl_tests_link import nccl_tests_link
    from calibration.nccl_tests_output import read_nccl_tests

    run = read_nccl_tests(path)
    link = nccl_tests_link(run, scenario.network, scenario.shape.gpus_per_node)
    said = _SAID.get()
    for line in link.warnings:
        text = f"note: --nccl-tests {path.name}: {line}"
        if said is None or text not in said:
            say(text)
        if said is not None:
            said.add(text)
    return replace(scenario, network=link.network), link.provenance(run)

"""The three families side by side: All-Reduce, gossip and local SGD, ranked by the user's objective.

Why a verdict of its own: the advisor's pick chooses among what runs with one line of code (DDP or
Decent-DP); local SGD changes the training algorithm (an outer optimizer, H inner steps), so it is
compared, not substituted. Each family's best option is ranked on the objective the user chose:
- "iteration": mean time per iteration, whatever the convergence;
- "accuracy": time to All-Reduce's loss: options whose iterations are known to reach it (All-Reduce;
  gossip exact or measured, convergence.py; local SGD measured, local_sgd_convergence.py) first, fastest
  first; the others after them, by their lower bound (time per iteration), with what they cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from runtime_model.advice.run_lines import validate_line
from runtime_model.convergence.consensus_cost import EXACT, MEASURED
from runtime_model.core.scenario import Scenario
from runtime_model.prediction.local_sgd import LocalSgd, LocalSgdPrediction, local_sgd_prediction
from runtime_model.prediction.local_sgd_convergence import MEASURED as LOCAL_MEASURED
from runtime_model.prediction.local_sgd_convergence import LocalSgdCost, local_sgd_cost

ITERATION, ACCURACY = "iteration", "accuracy"  # advisor.OBJECTIVES (the advisor imports this module)
LOCAL_SGD = "local SGD"  # its family name


@dataclass(frozen=True)
class LocalSgdRow:
    prediction: LocalSgdPrediction
    speedup: float  # All-Reduce's mean over this mean
    convergence: LocalSgdCost
    memory: object = None  # memory.accounting.MemoryUse per rank where memory was asked

    @property
    def fits(self) -> bool:
        return self.memory is None or self.memory.fits is not False


@dataclass(frozen=True)
class FamilyBest:
    """One family's representative for the cross-family verdict."""

    family: str  # "All-Reduce", "gossip", "local SGD"
    option: str
    mean_s: float
    known_time: bool  # its iterations are known to reach All-Reduce's loss
    cost: str  # what its convergence costs, in words


def model_params(scenario: Scenario) -> float:
    """The model's parameter count: one gradient element per parameter."""
    return scenario.buckets.message_bytes / scenario.buckets.element_bytes


def local_sgd_rows(
    scenario: Scenario, allreduce_mean_s: float, configs: list[LocalSgd], memory=None
) -> list[LocalSgdRow]:
    """Predict each local-SGD configuration, with its speedup, its convergence cost and, with `memory`
    (memory_fit.MemoryQuestion), its memory per rank (a full replica, the outer copy and momentum)."""
    rows = []
    params = model_params(scenario)
    for opts in configs:
        pred = local_sgd_prediction(scenario, opts)
        cost = local_sgd_cost(opts, pred.replicas, params)
        use = None
        if memory is not None:
            from runtime_model.advice.memory_fit import local_sgd_memory

            use = local_sgd_memory(scenario, opts, memory)
        rows.append(LocalSgdRow(pred, allreduce_mean_s / pred.mean_s, cost, use))
    return rows


def _ordered(candidates: list[FamilyBest], objective: str) -> list[FamilyBest]:
    if objective == ACCURACY:
        return sorted(candidates, key=lambda c: (not c.known_time, c.mean_s))
    return sorted(candidates, key=lambda c: c.mean_s)


def family_candidates(
    allreduce_mean_s: float, gossip, local: list[LocalSgdRow], objective: str, baseline: str = "ddp"
) -> list[FamilyBest]:
    """Each family's best option under `objective` (gossip: `gossip`, the advisor's own choice among the
    runnable topologies that fit, or None; All-Reduce: `baseline`, DDP or the sharded row that fits;
    local SGD: its rows that fit), best family first."""
    option = "allreduce" if baseline == "ddp" else baseline
    out = [FamilyBest("All-Reduce", option, allreduce_mean_s, True, "All-Reduce's iterations")]
    local = [r for r in local if r.fits]
    if gossip is not None:
        known = gossip.convergence.kind in (EXACT, MEASURED)
        out.append(
            FamilyBest(
                "gossip", gossip.topology, gossip.prediction.mean_s, known, gossip.convergence.describe()
            )
        )
    if local:
        pool = [
            FamilyBest(
                LOCAL_SGD,
                r.prediction.name,
                r.prediction.mean_s,
                r.convergence.kind == LOCAL_MEASURED,
                r.convergence.describe(),
            )
            for r in local
        ]
        out.append(_ordered(pool, objective)[0])
    return _ordered(out, objective)


def family_verdict(candidates: list[FamilyBest], objective: str, too_close: bool = False) -> str:
    """One sentence: the families' best options in the objective's order, each with its cost. Local SGD
    whose time to All-Reduce's loss is not known is never ranked: it changes the training algorithm, and
    a faster iteration at a higher loss says nothing about the time to the same loss, so ranking it first
    would read against a verdict that picks among the algorithms that keep it (issue 50). `too_close`:
    the verdict is too close to call, and the ranking says it is the predicted order, not a pick."""
    ranked = "time per iteration" if objective == ITERATION else "time to All-Reduce's loss (known first)"
    if too_close:
        ranked = f"predicted {ranked} (too close to call against All-Reduce: the verdict above)"
    unranked = [c for c in candidates if c.family == LOCAL_SGD and not c.known_time]
    parts = []
    for c in candidates:
        if c in unranked:
            continue
        known = "" if objective == ITERATION or c.known_time else ", time to the loss not known"
        parts.append(f"{c.family} ({c.option}) {c.mean_s * 1e3:.1f} ms/iteration: {c.cost}{known}")
    text = f"Across the three families, ranked by {ranked}: " + "; ".join(parts) + "."
    for c in unranked:
        h = re.search(r"H=(\d+)", c.option)  # the row's name: local-sgd H=30 ...
        measures = (
            "torchft's DiLoCo runs it, FSDP2 inside each replica; rtmodel validate runs DDP inside"
            if c.option.endswith(" fsdp")
            else f"{validate_line(local_sgd_h=int(h[1]) if h else 30)} measures its time per iteration beside "
            "the pick, not its loss"
        )
        text += (
            f" Not ranked: {c.family} ({c.option}) {c.mean_s * 1e3:.1f} ms/iteration, {c.cost}: its time to "
            f"All-Reduce's loss is not known ({measures})."
        )
    return text





def sharded_replica_configs(rows: list[LocalSgdRow], configs: list[LocalSgd]) -> list[LocalSgd]:
    """Each node-replica configuration whose replica does not fit with DDP inside, again with FSDP inside
    (as torchft's DiLoCo runs it), unless asked for already: the memory check then has a local-SGD row
    that may fit."""
    shaped = [r for r in rows if not r.fits and r.prediction.options.replica == "node"]
    extra = [replace(r.prediction.options, inner="fsdp") for r in shaped if r.prediction.options.inner == "ddp"]
    return [c for c in dict.fromkeys(extra) if c not in configs]

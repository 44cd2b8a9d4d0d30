"""The advice JSON's memory: each row's bytes per GPU with their parts and whether they fit, the sharded
baselines as entries of the All-Reduce family, and what the memory was computed from.

Why beside report.py: the schema's other entries are built there; these are added only where memory
was asked (an Advice with a memory_fit.MemoryQuestion), so a document without them is unchanged.
"""

from __future__ import annotations

from dataclasses import asdict

from runtime_model.advice.family_report import ALLREDUCE
from runtime_model.advice.memory_fit import DDP, BaselineRow, does_not_fit

DDP_TOPOLOGY = "allreduce"  # DDP's entry keeps the name every earlier document gave it


def memory_dict(use) -> dict | None:
    """One row's `memory`: its predicted peak per GPU, the parts it is made of, the GPU's capacity and
    whether it fits (null: the activations are not known and the states alone fit)."""
    if use is None:
        return None
    return {
        "bytes": use.peak_bytes,
        "parts": dict(use.parts),
        "capacity_bytes": use.capacity_bytes,
        "fits": use.fits,
        "activations_known": use.activations_known,
    }


def baseline_topology(method: str) -> str:
    return DDP_TOPOLOGY if method == DDP else method


def baseline_entry(row: BaselineRow, reference_mean_s: float, compute) -> dict:
    """An All-Reduce-family row (DDP or a sharded baseline) that is not the verdict's reference; `compute`:
    the scenario's (its utilization's numerator)."""
    from runtime_model.convergence.consensus_cost import EXACT_COST
    from runtime_model.prediction.local_sgd import compute_utilization

    p = row.prediction
    return {
        "topology": baseline_topology(row.method),
        "family": ALLREDUCE,
        "applicable": True,
        "reason": None if row.fits else does_not_fit(row.memory),
        "iteration_s": {"mean": p.mean_s, "p50": p.p50_s, "p99": p.p99_s},
        "compute_wait_s": p.compute_wait_s,
        "comm_s": p.comm_s,
        "exposed_comm_s": p.exposed_comm_s,
        "optimizer_s": p.optimizer_s,
        "speedup_vs_allreduce": reference_mean_s / p.mean_s,
        "factors": None,
        "consensus": {"exact_rounds": 1, "rho": 0.0, "method": "global average every iteration"},
        "convergence": {**asdict(EXACT_COST), "about": EXACT_COST.describe()},
        "uncertainty_s": row.uncertainty_s,
        "compute_utilization": compute_utilization(compute, p.mean_s),
        "nic_bytes_per_iteration": None,
        "decent_dp_builtin": False,
        "runs_on_decent_dp": False,
        "library": row.library,
        "vs_best": None,
        "memory": memory_dict(row.memory),
    }


def add_memory(advice, preds: list[dict], doc: dict) -> None:
    """Fill the memory of `preds` (advice_to_dict's entries, in its order) and add the All-Reduce family's
    other rows and the document's `memory` and `baseline`; nothing where memory was not asked."""
    q = advice.memory
    if q is None:
        return
    reference = next(r for r in advice.baselines if r.method == advice.baseline) if advice.baselines else None
    preds[0]["topology"] = baseline_topology(advice.baseline)
    if reference is not None:
        preds[0]["memory"] = memory_dict(reference.memory)
        preds[0]["library"] = reference.library
    by_name = {r.topology: r for r in advice.rows}
    local = iter(advice.local_sgd)
    for entry in preds[1:]:
        if entry.get("family") == "local-sgd":
            entry["memory"] = memory_dict(next(local).memory)
        elif entry["topology"] in by_name:
            entry["memory"] = memory_dict(by_name[entry["topology"]].memory)
    preds += [
        baseline_entry(r, advice.allreduce.mean_s, advice.scenario.compute)
        for r in advice.baselines
        if r.method != advice.baseline
    ]
    doc["baseline"] = baseline_topology(advice.baseline)
    doc["memory"] = {
        "device": q.device,
        "capacity_bytes": q.capacity_bytes,
        "activation_bytes": q.activation_bytes,
        "activation_source": q.activation_source,
        "recipe": asdict(q.recipe),
        "gossip_optimizer": q.gossip_optimizer or q.recipe.optimizer,
    }
